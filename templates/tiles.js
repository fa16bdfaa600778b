/* tiles.js — a long input (attnviz serve past --long-from tokens; docs/serve.md,
 * "Long inputs") browsed without any n x n matrix in the page: the matrix
 * view shows one head as max-pooled tiles of 256 x 256 cells and fetches the
 * tile it needs as you zoom and pan (GET /api/tile: level 0 is the whole
 * matrix, each level doubles the cells a side until a cell is one weight);
 * the head view shows one query's row, computed exactly by the server
 * (GET /api/row). Cell value = the largest weight of the query rows and key
 * columns it covers, so a single strong weight stays visible however far out.
 * Needs from data.js: Data (decode), SOURCE; from draw.js: Draw, Tip.
 * Token text reaches the DOM through textContent only. */
/* global Data, Draw, Tip, SOURCE */
/* exported Tiles */

const Tiles = (() => {
  const geo = Data.meta.tiles || null;
  /* live: the server's tiles at every level; offline (a long input's page
   * saved by attnviz serve): the levels the page embeds and each query's
   * heaviest keys, the rest needs the server */
  const offline = !SOURCE && !!(geo && geo.embedded > 0);
  const on = !!(geo && geo.long && geo.side > 0 && geo.levels > 0 && (SOURCE || offline));
  const n = Data.n, side = on ? geo.side : 256, levels = on ? (offline ? geo.embedded : geo.levels) : 1;
  const grid = L => Math.min(n, side * Math.pow(2, L));
  const count = L => Math.ceil(grid(L) / side);
  /* the first token of cell c of a G-cell grid (tiles.h: token t is in cell t * G / n) */
  const token = (G, c) => Math.floor((c * n + G - 1) / G);
  const fmtI = v => v.toLocaleString('en-US');

  /* fetched tiles and rows, the most recent kept (a tile is at most 128 kB of codes) */
  const tiles = new Map(), rows = new Map();
  function remember(map, key, p, cap) {
    map.set(key, p);
    p.catch(() => map.delete(key));
    while (map.size > cap) map.delete(map.keys().next().value);
    return p;
  }
  /* offline: a level's chunk holds every head's whole grid (H x G x G codes), decoded once */
  const levelChunks = new Map();
  function levelGrid(li, L) {
    const key = li + ':' + L;
    if (!levelChunks.has(key)) {
      const G = grid(L);
      levelChunks.set(key, Data.readChunk('av-tile-' + Data.layers[li] + '-' + L).then(codes => {
        if (codes.length !== Data.H * G * G) throw new Error('payload: level ' + L + ' of layer ' + Data.layers[li] + ' has the wrong size');
        return codes;
      }));
    }
    return levelChunks.get(key);
  }
  function tileOffline(li, h, L, tr, tc) {
    const G = grid(L), R = Math.min(side, G - tr * side), C = Math.min(side, G - tc * side);
    return levelGrid(li, L).then(all => {
      const codes = new Uint16Array(R * C), base = h * G * G;
      for (let i = 0; i < R; i++) codes.set(all.subarray(base + (tr * side + i) * G + tc * side, base + (tr * side + i) * G + tc * side + C), i * C);
      return { R, C, codes };
    });
  }
  /* offline: each query's K heaviest keys (keys, then their weights' codes; 65535: none) */
  const topChunks = new Map();
  function rowOffline(li, h, q) {
    const l = Data.layers[li], K = geo.top_k || 0;
    if (!K) return Promise.reject(new Error('this page keeps no keys per query'));
    if (!topChunks.has(l)) topChunks.set(l, Data.readChunk('av-top-' + l));
    return topChunks.get(l).then(codes => {
      const per = n * K;
      if (codes.length !== 2 * Data.H * per) throw new Error('payload: the top keys of layer ' + l + ' have the wrong size');
      const r = new Float32Array(n);
      for (let k = 0; k < K; k++) {
        const key = codes[h * per + q * K + k];
        if (key !== 65535 && key < n) r[key] = codes[Data.H * per + h * per + q * K + k] * 1e-4;
      }
      return r;
    });
  }
  function tile(li, h, L, tr, tc) {
    const key = [li, h, L, tr, tc].join(':');
    if (tiles.has(key)) return tiles.get(key);
    if (offline) return remember(tiles, key, tileOffline(li, h, L, tr, tc), 192);
    return remember(tiles, key, SOURCE.get('/api/tile?layer=' + Data.layers[li] + '&head=' + Data.heads[h] +
      '&level=' + L + '&row=' + tr + '&col=' + tc).then(async r => {
      const [R, C] = r.shape.map(Number);
      const codes = await Data.decode(r.bytes);
      if (!(R > 0 && C > 0) || codes.length !== R * C) throw new Error('server: a tile of the wrong size');
      return { R, C, codes };
    }), 192);
  }
  function row(li, h, q) {
    const key = [li, h, q].join(':');
    if (rows.has(key)) return rows.get(key);
    if (offline) return remember(rows, key, rowOffline(li, h, q), 64);
    return remember(rows, key, SOURCE.get('/api/row?layer=' + Data.layers[li] + '&head=' + Data.heads[h] + '&query=' + q).then(r => {
      if (r.bytes.length !== 4 * n) throw new Error('server: a row of the wrong size');
      return new Float32Array(r.bytes.buffer, r.bytes.byteOffset, n);
    }), 64);
  }
  /* every head's telemetry means (the head ranking), once */
  let statsReq = null;
  function stats() {
    if (!on || !geo.stats) return null;
    if (offline) return Promise.resolve(geo.headstats);
    if (!statsReq) {
      statsReq = SOURCE.get('/api/headstats').then(r => JSON.parse(new TextDecoder().decode(r.bytes)));
      statsReq.catch(() => { statsReq = null; });
    }
    return statsReq;
  }

  const label = i => Data.label ? Data.label(i) : String(i);

  /* how big an offline page is, and why: what it keeps, by the formula (meta.tiles) */
  function sizeNote() {
    if (!offline) return '';
    const L = Data.meta.config.layers, H = Data.meta.config.heads, K = geo.top_k || 0, grids = geo.grids || [];
    const cells = grids.reduce((a, g) => a + g * g, 0);
    const mb = v => (v / 1e6).toFixed(v < 1e7 ? 1 : 0) + ' MB';
    return ' This page keeps, for each of the ' + L + ' × ' + H + ' heads, zoom level' + (grids.length > 1 ? 's 0–' + (grids.length - 1) : ' 0') + ' (' +
      grids.map(g => fmtI(g) + '²').join(' + ') + ' cells) and each query\'s ' + K + ' heaviest keys: L·H·(' + (grids.length ? 'ΣG²' : '0') +
      ' + 2·n·K) = ' + fmtI(L) + '·' + fmtI(H) + '·(' + fmtI(cells) + ' + 2·' + fmtI(n) + '·' + K + ') = ' + fmtI(geo.codes) + ' 16-bit codes, ' +
      mb(2 * geo.codes) + ' before compression (' + mb(geo.zbytes) + ' compressed here): bounded by the levels kept, not by n² (the whole attention would be ' +
      mb(2 * L * H * n * n) + '). Deeper zoom and exact rows need attnviz serve.';
  }

  /* ---------------------------------------------------------------- the matrix: one tile at a time */

  /* where the matrix view is: kept across heads and layers (to compare them at one place) */
  const Z = { L: 0, tr: 0, tc: 0 };
  let drawGen = 0;

  function note(host, text) {
    host.textContent = '';
    host.appendChild(Draw.el('div', 'empty', text));
    return null;
  }

  function matrix(host, spec) {
    if (spec.mode !== 'heads') return note(host, 'A long input is shown one head at a time: pick Heads and a head above.');
    const li = spec.li, h = spec.focus, gen = ++drawGen;
    host.textContent = '';
    const th = Draw.theme();
    const title = Draw.el('div', 'view-title');
    title.appendChild(Draw.el('h2', null, 'Matrix view · layer ' + Data.layers[li] + ', head ' + Data.heads[h]));
    title.appendChild(Draw.el('span', 'sub', 'A long input (' + fmtI(n) + ' tokens): each cell is the largest weight of the query rows (down) and ' +
      'key columns (across) it covers, ' + (offline ? 'from the zoom levels this page keeps. Double-click to zoom in; click a cell for its query\'s heaviest keys below.' + sizeNote()
        : 'from tiles the server max-pools as you zoom. Double-click to zoom in; click a cell for its query\'s exact row below.')));
    host.appendChild(title);
    const wrap = Draw.el('div', 'mx-wrap tiles');
    host.appendChild(wrap);
    const bar = Draw.el('div', 'mx-zoom');
    wrap.appendChild(bar);
    const stage = Draw.el('div');
    stage.style.position = 'relative';
    wrap.appendChild(stage);
    const rowBox = Draw.el('div', 'tile-row');
    host.appendChild(rowBox);

    Z.L = Math.max(0, Math.min(levels - 1, Z.L));
    Z.tr = Math.max(0, Math.min(count(Z.L) - 1, Z.tr));
    Z.tc = Math.max(0, Math.min(count(Z.L) - 1, Z.tc));
    const redraw = () => matrix(host, spec);
    const G = grid(Z.L), T = count(Z.L);
    const btn = (text, ttl, enabled, fn) => {
      const b = Draw.el('button', 'btn' + (text.length === 1 ? ' icon' : ''), text);
      b.type = 'button';
      b.title = ttl;
      b.disabled = !enabled;
      b.addEventListener('click', () => { fn(); redraw(); });
      bar.appendChild(b);
    };
    /* one level in: the child tile around the middle of this one */
    const zoomIn = (cr, cc) => {
      const G2 = grid(Z.L + 1), f = G2 / G;
      Z.L++;
      Z.tr = Math.min(count(Z.L) - 1, Math.floor(Math.floor(cr * f) / side));
      Z.tc = Math.min(count(Z.L) - 1, Math.floor(Math.floor(cc * f) / side));
    };
    bar.appendChild(Draw.el('span', 'ctl-label', 'Zoom'));
    btn('−', 'Zoom out (the tile around this one)', Z.L > 0, () => {
      const f = grid(Z.L - 1) / G;
      const cr = (Z.tr + 0.5) * side * f, cc = (Z.tc + 0.5) * side * f;
      Z.L--;
      Z.tr = Math.floor(cr / side);
      Z.tc = Math.floor(cc / side);
    });
    btn('+', Z.L < levels - 1 || !offline ? 'Zoom in (or double-click the map where to zoom)' : 'Deeper levels need attnviz serve (this page keeps ' + levels + ')', Z.L < levels - 1, () => zoomIn(Z.tr * side + side / 2, Z.tc * side + side / 2));
    btn('Fit', 'The whole matrix', Z.L > 0, () => { Z.L = 0; Z.tr = Z.tc = 0; });
    btn('←', 'Earlier keys', Z.tc > 0, () => { Z.tc--; });
    btn('→', 'Later keys', Z.tc < T - 1, () => { Z.tc++; });
    btn('↑', 'Earlier queries', Z.tr > 0, () => { Z.tr--; });
    btn('↓', 'Later queries', Z.tr < T - 1, () => { Z.tr++; });
    const cr0 = Z.tr * side, cc0 = Z.tc * side;
    const R = Math.min(side, G - cr0), C = Math.min(side, G - cc0);
    const q0 = token(G, cr0), q1 = token(G, cr0 + R), k0 = token(G, cc0), k1 = token(G, cc0 + C);
    const per = n / G;
    bar.appendChild(Draw.el('span', 'mx-where', 'level ' + Z.L + ' of ' + (levels - 1) + ' · query rows ' + fmtI(q0) + '–' + fmtI(q1 - 1) +
      ', key columns ' + fmtI(k0) + '–' + fmtI(k1 - 1) + ' of ' + fmtI(n) + ' × ' + fmtI(n) +
      (per > 1 ? ' · a cell: ' + (Number.isInteger(per) ? per : '~' + per.toFixed(1)) + ' × ' + (Number.isInteger(per) ? per : '~' + per.toFixed(1)) + ' tokens' : ' · a cell: one weight')));
    wrap.dataset.level = String(Z.L);
    wrap.dataset.tile = Z.tr + ',' + Z.tc;
    stage.appendChild(Draw.el('div', 'empty', 'Loading tile…'));

    const t0 = performance.now();
    /* colors scale to the head's largest weight (level 0's largest cell), the same in every tile */
    const done = Promise.all([tile(li, h, Z.L, Z.tr, Z.tc), tile(li, h, 0, 0, 0)]).then(([tl, top]) => {
      if (gen !== drawGen) return;
      let vmax = 0;
      for (let i = 0; i < top.codes.length; i++) vmax = Math.max(vmax, top.codes[i]);
      vmax = vmax > 0 ? vmax * 1e-4 : 1;
      stage.textContent = '';
      const avail = Math.max(360, Math.min(host.clientWidth - 60, 1000));
      const labW = 56, labH = 30;
      const cell = Math.max(1, Math.floor((avail - labW) / Math.max(R, C)));
      const gw = cell * C, gh = cell * R, W = labW + gw + 8, Ht = labH + gh + 8;
      const cv = Draw.el('canvas'), ov = Draw.el('canvas');
      ov.style.position = 'absolute';
      ov.style.left = '0';
      ov.style.top = '0';
      stage.append(cv, ov);
      const ctx = Draw.sizeCanvas(cv, W, Ht), octx = Draw.sizeCanvas(ov, W, Ht);
      ctx.fillStyle = th.bg;
      ctx.fillRect(0, 0, W, Ht);
      /* the heat map, one pixel per cell, scaled up without smoothing */
      const img = document.createElement('canvas');
      img.width = C;
      img.height = R;
      const ictx = img.getContext('2d');
      const id = ictx.createImageData(C, R);
      const rgb = Draw.colorRgb(Draw.headColor(Data.heads[h])), bg = Draw.hexRgb(th.bg), mk = Draw.hexRgb(th.maskBg);
      const gamma = spec.gamma || 1;
      for (let i = 0; i < R; i++) {
        const qLast = token(G, cr0 + i + 1) - 1;
        for (let j = 0; j < C; j++) {
          const o = 4 * (i * C + j);
          /* a causal cell whose every key is after every query: masked, not a computed 0 */
          const masked = Data.causal && token(G, cc0 + j) > qLast;
          let a = tl.codes[i * C + j] * 1e-4 / vmax;
          if (gamma !== 1) a = Math.pow(a, gamma);
          for (let k = 0; k < 3; k++) id.data[o + k] = masked ? mk[k] : Math.round(bg[k] + (rgb[k] - bg[k]) * Math.min(1, a));
          id.data[o + 3] = 255;
        }
      }
      ictx.putImageData(id, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(img, labW, labH, gw, gh);
      /* positions along both axes */
      ctx.fillStyle = th.muted;
      ctx.font = '10px ' + th.sans;
      const step = Math.max(1, Math.ceil(60 / cell));
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      for (let i = 0; i < R; i += step) ctx.fillText(fmtI(token(G, cr0 + i)), labW - 6, labH + i * cell + cell / 2);
      ctx.textAlign = 'center';
      for (let j = 0; j < C; j += step) ctx.fillText(fmtI(token(G, cc0 + j)), labW + j * cell + cell / 2, labH - 10);
      ov.dataset.cell = String(cell);
      ov.dataset.labw = String(labW);
      ov.dataset.labh = String(labH);
      ov.dataset.rows = String(R);
      ov.dataset.cols = String(C);
      Draw.heatHover(ov, octx, { x0: labW, y0: labH, cell, rows: R, cols: C, w: W, h: Ht }, th.ink, (box, i, j) => {
        const a0 = token(G, cr0 + i), a1 = token(G, cr0 + i + 1), b0 = token(G, cc0 + j), b1 = token(G, cc0 + j + 1);
        const span = (x0, x1) => (x1 - x0 > 1 ? 'tokens ' + fmtI(x0) + '–' + fmtI(x1 - 1) : 'token ' + fmtI(x0) + ' ' + label(x0));
        Tip.title(box, 'queries ' + span(a0, a1) + '  →  keys ' + span(b0, b1));
        if (Data.causal && b0 > a1 - 1) Tip.sub(box, Draw.MASKED_TEXT);
        else Tip.row(box, (a1 - a0 > 1 || b1 - b0 > 1 ? 'largest weight · ' : 'weight · ') + 'head ' + Data.heads[h], (tl.codes[i * C + j] * 1e-4).toFixed(4), Draw.headColor(Data.heads[h]));
      });
      ov.addEventListener('dblclick', ev => {
        const b = ov.getBoundingClientRect();
        const j = Math.floor((ev.clientX - b.left - labW) / cell), i = Math.floor((ev.clientY - b.top - labH) / cell);
        if (i < 0 || j < 0 || i >= R || j >= C || Z.L >= levels - 1) return;
        zoomIn(cr0 + i, cc0 + j);
        redraw();
      });
      ov.addEventListener('click', ev => {
        const b = ov.getBoundingClientRect();
        const i = Math.floor((ev.clientY - b.top - labH) / cell);
        if (i < 0 || i >= R || !spec.onQuery) return;
        const q = token(G, cr0 + i);
        spec.onQuery(q);
        rowPanel(rowBox, li, h, q, spec.onQuery);
      });
      /* legend: the head's scale */
      const legend = Draw.el('div', 'mx-legend');
      const lg = Draw.el('canvas');
      legend.append(Draw.el('span', null, '0'), lg, Draw.el('span', null, vmax.toFixed(4) + ' (the head\'s largest weight' + (gamma !== 1 ? '; √ scale)' : ')')));
      if (Data.causal) {
        const ms = Draw.el('span', 'mx-masked');
        ms.append(Draw.el('span', 'sw-masked'), document.createTextNode('masked (every key after every query of the cell)'));
        legend.appendChild(ms);
      }
      stage.appendChild(legend);
      const lctx = Draw.sizeCanvas(lg, 160, 10);
      for (let x = 0; x < 160; x++) {
        let a = x / 159;
        if (gamma !== 1) a = Math.pow(a, gamma);
        lctx.fillStyle = 'rgb(' + [0, 1, 2].map(k => Math.round(bg[k] + (rgb[k] - bg[k]) * a)).join(',') + ')';
        lctx.fillRect(x, 0, 1, 10);
      }
      wrap.dataset.ms = String(Math.round(performance.now() - t0));
      host.dataset.tilesReady = Z.L + ':' + Z.tr + ':' + Z.tc;
    }).catch(err => {
      if (gen !== drawGen) return;
      stage.textContent = '';
      stage.appendChild(Draw.el('div', 'empty', 'Could not load this tile: ' + (err && err.message ? err.message : String(err))));
    });
    if (spec.query >= 0 && spec.query < n && spec.onQuery) rowPanel(rowBox, li, h, spec.query, spec.onQuery);
    return { done, exportScene: null };
  }

  /* ---------------------------------------------------------------- one query's exact row */

  /* Query q's row of head h in layer li, from the server: a strip of the weights
   * over the keys (max over each pixel's keys), the heaviest keys listed, and
   * controls to move the query. onQuery(i) records the reader's choice. */
  function rowPanel(box, li, h, q, onQuery) {
    const gen = (box._gen = (box._gen || 0) + 1);
    box.textContent = '';
    const head = Draw.el('div', 'tile-row-head');
    box.appendChild(head);
    const go = i => {
      i = Math.max(0, Math.min(n - 1, i));
      if (onQuery) onQuery(i);
      rowPanel(box, li, h, i, onQuery);
    };
    const btn = (text, ttl, enabled, fn) => {
      const b = Draw.el('button', 'btn' + (text.length === 1 ? ' icon' : ''), text);
      b.type = 'button';
      b.title = ttl;
      b.disabled = !enabled;
      b.addEventListener('click', fn);
      head.appendChild(b);
    };
    head.appendChild(Draw.el('span', 'ctl-label', 'Query'));
    btn('‹', 'The query before', q > 0, () => go(q - 1));
    const inp = Draw.el('input');
    inp.type = 'number';
    inp.min = '0';
    inp.max = String(n - 1);
    inp.value = String(q);
    inp.className = 'tile-q';
    inp.title = 'Query position (0 to ' + (n - 1) + ')';
    inp.addEventListener('change', () => { const v = Math.round(+inp.value); if (v >= 0 && v < n) go(v); });
    head.appendChild(inp);
    btn('›', 'The query after', q < n - 1, () => go(q + 1));
    btn('Last', 'The last token', q !== n - 1, () => go(n - 1));
    const tokSpan = Draw.el('span', 'tile-tok');
    tokSpan.textContent = label(q);
    head.appendChild(tokSpan);
    head.appendChild(Draw.el('span', 'mx-where', 'head ' + Data.heads[h] + ', layer ' + Data.layers[li] + (offline
      ? ': its ' + (geo.top_k || 0) + ' heaviest keys, as this page keeps them (the whole row needs attnviz serve)' : ': its exact row, computed by the server from q/k')));
    const body = Draw.el('div', 'tile-row-body');
    body.appendChild(Draw.el('div', 'empty', 'Loading query ' + fmtI(q) + '…'));
    box.appendChild(body);
    const t0 = performance.now();
    return row(li, h, q).then(r => {
      if (gen !== box._gen) return;
      body.textContent = '';
      const th = Draw.theme();
      const keys = Data.causal ? q + 1 : n;
      const W = Math.max(320, Math.min((box.clientWidth || 900) - 20, 1000)), Hh = 70, pad = 4;
      const cv = Draw.el('canvas');
      const ctx = Draw.sizeCanvas(cv, W, Hh + 16);
      ctx.fillStyle = th.bg;
      ctx.fillRect(0, 0, W, Hh + 16);
      let mx = 0;
      for (let j = 0; j < keys; j++) mx = Math.max(mx, r[j]);
      const color = Draw.headColor(Data.heads[h]);
      ctx.fillStyle = color;
      const px = W - 2 * pad;
      for (let x = 0; x < px; x++) {
        const j0 = Math.floor(x * n / px), j1 = Math.max(j0 + 1, Math.floor((x + 1) * n / px));
        let m = 0;
        for (let j = j0; j < j1 && j < keys; j++) m = Math.max(m, r[j]);
        if (m > 0) {
          const hgt = Math.max(1, Math.round((Hh - 4) * m / (mx || 1)));
          ctx.fillRect(pad + x, Hh - hgt, 1, hgt);
        }
      }
      if (keys < n) { /* later keys: masked */
        const x0 = pad + Math.floor(keys * px / n);
        ctx.fillStyle = th.maskBg;
        ctx.fillRect(x0, 0, W - pad - x0, Hh);
      }
      ctx.fillStyle = th.muted;
      ctx.font = '10px ' + th.sans;
      ctx.textBaseline = 'top';
      ctx.textAlign = 'left';
      ctx.fillText('key 0', pad, Hh + 3);
      ctx.textAlign = 'right';
      ctx.fillText('key ' + fmtI(n - 1), W - pad, Hh + 3);
      ctx.textAlign = 'center';
      ctx.fillText('largest ' + mx.toFixed(4), W / 2, Hh + 3);
      body.appendChild(cv);
      /* the heaviest keys */
      const top = [];
      for (let j = 0; j < keys; j++) {
        if (offline && !(r[j] > 0)) continue;
        if (top.length < 12 || r[j] > top[top.length - 1][1]) {
          top.push([j, r[j]]);
          top.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
          if (top.length > 12) top.pop();
        }
      }
      const list = Draw.el('div', 'tile-top');
      for (const [j, w] of top) {
        const it = Draw.el('div', 'tile-key');
        const track = Draw.el('span', 'tile-track'), bar = Draw.el('span', 'tile-bar');
        bar.style.width = Math.round(100 * w / (mx || 1)) + '%';
        bar.style.background = color;
        track.appendChild(bar);
        const pos = Draw.el('span', 'tile-pos', fmtI(j));
        const tk = Draw.el('span', 'tile-tok');
        tk.textContent = label(j);
        it.append(track, Draw.el('span', 'tile-w', w.toFixed(4)), pos, tk);
        it.title = 'key ' + j + ': ' + w.toFixed(6);
        list.appendChild(it);
      }
      body.appendChild(list);
      body.appendChild(Draw.el('div', 'tile-note', 'The strip: each pixel the largest weight of the keys under it' +
        (keys < n ? '; shaded: keys after the query (causal, masked)' : '') + '. The heaviest keys, by weight.'));
      box.dataset.query = String(q);
      box.dataset.ms = String(Math.round(performance.now() - t0));
    }).catch(err => {
      if (gen !== box._gen) return;
      body.textContent = '';
      body.appendChild(Draw.el('div', 'empty', 'Could not load this row: ' + (err && err.message ? err.message : String(err))));
    });
  }

  /* The head view of a long input: one head, one query's row on request. */
  function headView(host, c) {
    host.textContent = '';
    const h = c.mode === 'heads' ? c.focus : null;
    const ttl = Draw.el('div', 'view-title');
    ttl.appendChild(Draw.el('h2', null, 'Head view · layer ' + Data.layers[c.li] + (h !== null ? ', head ' + Data.heads[h] : '')));
    ttl.appendChild(Draw.el('span', 'sub', 'A long input (' + fmtI(n) + ' tokens) shows one query at a time: ' + (offline
      ? 'its heaviest keys, which this page keeps. ' : 'its weights over every key, exact, computed by the server when asked. ') +
      'Pick the query with the arrows or its position; the matrix view gives the whole head.' + sizeNote()));
    host.appendChild(ttl);
    if (h === null) return note(host.appendChild(Draw.el('div')), 'A long input is shown one head at a time: pick Heads and a head above.');
    const box = Draw.el('div', 'tile-row');
    host.appendChild(box);
    const q = c.query >= 0 && c.query < n ? c.query : n - 1;
    const done = rowPanel(box, c.li, h, q, c.onQuery);
    return { done, exportScene: null };
  }

    /* offline: the model view's thumbnails are level 0 (every head's overview) */
  function thumbs() {
    const G = grid(0);
    return Promise.all(Data.layers.map((_, li) => levelGrid(li, 0))).then(all => ({
      s: G, exact: G === n, max: true,
      block(li, h) {
        const out = new Float32Array(G * G), c = all[li];
        for (let i = 0; i < G * G; i++) out[i] = c[h * G * G + i] * 1e-4;
        return out;
      },
    }));
  }

  return { on, offline, hasStats: on && !!geo.stats, side, levels, thumbs, sizeNote, grid, count, token, tile, row, stats, matrix, headView, rowPanel, zoom: Z };
})();
