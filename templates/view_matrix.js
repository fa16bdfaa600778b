/* view_matrix.js — the matrix view: one head (or the mean, max or rollout of
 * the active heads) as a heat map, queries down, keys across, with the
 * sentence boundary and (causal pages) the hatched masked triangle; a model
 * with attention sinks (gpt-oss) gets a "sink" column right of the keys: each
 * row's share of its softmax that went to the head's sink logit. Needs
 * from data.js: Tok (groups, filterIdx, masked) and the derived matrices
 * behind Draw.seriesFor; Data.pattern. */
/* global Data, Tok, Fmt, Draw, Tip, Views, Tiles */

/* The file's body is one function (not indented): it registers the view
 * and leaves no names behind. */
(() => {

/* ---------------------------------------------------------------- matrix view */

/* Zoom into a matrix wider than the screen (a long input): a window of
 * rows x columns, 1/k of each side, drawn as a matrix of its own. Kept while
 * the tokens, toggles and filter stay (across heads and layers, to compare
 * them at one place). {key, k, r0, c0} */
let MZ = null;
const MZ_LEVELS = [1, 2, 4, 8, 16, 32, 64];

/* The selected head (or aggregate) as a heat map, queries down, keys across.
 * spec {li, mode, hs, focus, t, filter, gamma, pin} (pin: a raw token index
 * whose query row is outlined, or -1). Generated tokens' labels take the
 * generation color. Past the screen's width it can zoom (MZ); the returned
 * controller follows the redraws. */
function MatrixView(host, spec) {
  let ctl = null;
  const draw = () => { ctl = drawMatrix(host, spec, draw); };
  draw();
  return ctl ? { exportScene: (P, ttl) => ctl.exportScene(P, ttl) } : null;
}

function drawMatrix(host, spec, redraw) {
  const { t } = spec;
  /* a rollout mixes layers: an encoder's local window (both ways) bounds no rollout row */
  const noWin = Data.windowBoth && (spec.mode === 'rollout' || Data.perLayer);
  const masked = noWin && !(Data.meta.image && Data.meta.image.bidirectional) ? Tok.masked : Tok.maskFor(t, spec.li);
  const win = noWin ? 0 : Data.window(spec.li);
  const m = t.mc; /* row stride of the derived matrices */
  let { rows, cols } = Tok.filterIdx(t, spec.filter);
  const FR = rows.length, FC = cols.length;
  const zkey = t.key + '|' + spec.filter + '|' + FR + 'x' + FC;
  if (!MZ || MZ.key !== zkey) MZ = { key: zkey, k: 1, r0: 0, c0: 0 };
  const z = MZ;
  const spanR = Math.max(1, Math.ceil(FR / z.k)), spanC = Math.max(1, Math.ceil(FC / z.k));
  z.r0 = Math.max(0, Math.min(FR - spanR, z.r0));
  z.c0 = Math.max(0, Math.min(FC - spanC, z.c0));
  if (z.k > 1) { rows = rows.slice(z.r0, z.r0 + spanR); cols = cols.slice(z.c0, z.c0 + spanC); }
  host.textContent = '';
  const sspec = Object.assign({}, spec, { hs: spec.mode === 'heads' ? [spec.focus] : spec.hs });
  const series = Draw.seriesFor(sspec);
  if (!series) { host.appendChild(Draw.el('div', 'empty', 'Computing rollout…')); return null; }
  const s = series[0];
  const th = Draw.theme();
  const title = Draw.el('div', 'view-title');
  const pat = s.h >= 0 ? Data.pattern(spec.li, s.h) : null;
  const what = s.h >= 0 ? 'head ' + Data.heads[s.h] + (pat ? ' (' + pat + ')' : '') :
    Data.perLayer ? s.name + ' through it (every head)' :
    s.name.toLowerCase() + (spec.mode === 'rollout' ? ' through layer ' + Data.layers[spec.li] : ' of ' + spec.hs.length + ' head' + (spec.hs.length === 1 ? '' : 's'));
  title.appendChild(Draw.el('h2', null, 'Matrix view · ' + (Data.stacked ? Data.stack.label.toLowerCase() + ' attention, ' : '') +
    'layer ' + Data.layers[spec.li] + ', ' + what));
  const ax = Data.stacked ? Draw.stackAxes() : null;
  title.appendChild(Draw.el('span', 'sub', (ax ? 'Rows: ' + ax.rows + ' (queries), columns: ' + ax.cols + ' (keys)' : 'Rows: queries (attending), columns: keys (attended to)') +
    '. Hover a cell for its weight.' +
    (Data.causal ? ' Hatched: masked (a key after its query; causal model' +
      (win ? '; or ' + win + ' or more tokens before it: this layer\'s sliding window' : '') + ').' :
      win && Data.windowBoth ? ' Hatched: masked (a key ' + win + ' or more tokens before or after its query: this layer\'s local window).' : '')));
  host.appendChild(title);

  const R = rows.length, C = cols.length;
  const avail = Math.max(360, Math.min(host.clientWidth - 60, 1400));
  const measure = document.createElement('canvas').getContext('2d');
  const big = Math.max(R, C);
  const fs = big <= 40 ? 13 : 11;
  measure.font = fs + 'px ' + th.sans;
  let labW = 0;
  /* labels of the visible row and column groups (the same list for a self-attention stack) */
  const rowLabels = [];
  for (let g = 0; g < t.mr; g++) rowLabels.push(Draw.tokLabel(t.rows, g));
  const colLabels = t.cols === t.rows ? rowLabels : [];
  if (t.cols !== t.rows) for (let g = 0; g < t.mc; g++) colLabels.push(Draw.tokLabel(t.cols, g));
  for (const g of rows) labW = Math.max(labW, measure.measureText(rowLabels[g]).width);
  let labH = 0;
  for (const g of cols) labH = Math.max(labH, measure.measureText(colLabels[g]).width);
  labW = Math.min(150, Math.ceil(labW)) + 10;
  labH = Math.min(150, Math.ceil(labH)) + 10;
  let cell = Math.floor((avail - labW) / Math.max(C, 1));
  cell = Math.max(1, Math.min(34, cell));
  if (cell * C < 200 && C > 0) cell = Math.max(cell, Math.min(34, Math.floor(200 / C)));
  const showLabels = cell >= 9;
  if (!showLabels) { labW = 44; labH = 26; }
  /* more keys than pixels (a long input): cells are a fraction of a pixel and
   * the heat map is max-pooled to the pixels, so a single strong weight still shows */
  const pooled = C > 0 && C > avail - labW;
  if (pooled) cell = (avail - labW) / C;
  const gw = cell * C, gh = cell * R;
  /* the sink column (s.mat.sink: one share per row group), a gap apart from the keys */
  const sinks = s.mat.sink && spec.mode !== 'rollout' ? s.mat.sink : null;
  const sinkGap = sinks ? 8 : 0, sinkW = sinks ? Math.max(10, Math.min(34, cell)) : 0, sinkX = labW + gw + sinkGap;
  const W = labW + gw + sinkGap + sinkW + 8, Ht = labH + gh + 8;
  const wrap = Draw.el('div', 'mx-wrap');
  let zoomAt = null;
  /* zoom: when the whole matrix has more columns than pixels, or once zoomed */
  const zoomable = FC > Math.max(360, Math.min(host.clientWidth - 60, 1400)) - 44 || z.k > 1;
  if (zoomable) {
    const bar = Draw.el('div', 'mx-zoom');
    const maxK = MZ_LEVELS.filter(k => Math.ceil(Math.max(FR, FC) / k) >= 16).pop() || 1;
    const btn = (label, title, enabled, fn) => {
      const b = Draw.el('button', 'btn' + (label.length === 1 ? ' icon' : ''), label);
      b.type = 'button';
      b.title = title;
      b.disabled = !enabled;
      b.addEventListener('click', () => { fn(); redraw(); });
      bar.appendChild(b);
      return b;
    };
    const zoomTo = (k, cr, cc) => {
      /* keep the cell (cr, cc) of the whole matrix in the middle */
      z.k = k;
      z.r0 = Math.round(cr - Math.ceil(FR / k) / 2);
      z.c0 = Math.round(cc - Math.ceil(FC / k) / 2);
    };
    bar.appendChild(Draw.el('span', 'ctl-label', 'Zoom'));
    const mid = () => [z.r0 + spanR / 2, z.c0 + spanC / 2];
    btn('−', 'Zoom out', z.k > 1, () => zoomTo(MZ_LEVELS[MZ_LEVELS.indexOf(z.k) - 1], ...mid()));
    btn('+', 'Zoom in (or double-click the map where to zoom)', z.k < maxK, () => zoomTo(MZ_LEVELS[MZ_LEVELS.indexOf(z.k) + 1], ...mid()));
    btn('Fit', 'The whole matrix', z.k > 1, () => { z.k = 1; });
    btn('←', 'Earlier keys', z.k > 1 && z.c0 > 0, () => { z.c0 -= Math.ceil(spanC / 2); });
    btn('→', 'Later keys', z.k > 1 && z.c0 + spanC < FC, () => { z.c0 += Math.ceil(spanC / 2); });
    btn('↑', 'Earlier queries', z.k > 1 && z.r0 > 0, () => { z.r0 -= Math.ceil(spanR / 2); });
    btn('↓', 'Later queries', z.k > 1 && z.r0 + spanR < FR, () => { z.r0 += Math.ceil(spanR / 2); });
    const fmtI = v => v.toLocaleString('en-US');
    const where = Draw.el('span', 'mx-where', z.k > 1
      ? z.k + '× · query rows ' + fmtI(z.r0) + '–' + fmtI(z.r0 + rows.length - 1) + ', key columns ' + fmtI(z.c0) + '–' + fmtI(z.c0 + cols.length - 1) + ' of ' + fmtI(FR) + ' × ' + fmtI(FC)
      : 'all ' + fmtI(FR) + ' × ' + fmtI(FC) + ' (each pixel: the largest weight of the cells it covers)');
    bar.appendChild(where);
    wrap.appendChild(bar);
    wrap.dataset.zoom = String(z.k);
    /* double-click: zoom in (2x per step) around that cell */
    zoomAt = (r, c) => {
      if (z.k >= maxK) return;
      zoomTo(MZ_LEVELS[MZ_LEVELS.indexOf(z.k) + 1], (z.k > 1 ? z.r0 : 0) + r, (z.k > 1 ? z.c0 : 0) + c);
      redraw();
    };
  }
  const stack = Draw.el('div');
  stack.style.position = 'relative';
  const cv = Draw.el('canvas');
  const ov = Draw.el('canvas');
  ov.style.position = 'absolute';
  ov.style.left = '0';
  ov.style.top = '0';
  stack.append(cv, ov);
  wrap.appendChild(stack);
  let vmax = 0;
  for (const r of rows) for (const c of cols) vmax = Math.max(vmax, s.mat[r * m + c]);
  if (spec.mode !== 'rollout' && spec.mode !== 'max' && vmax < 1e-9) vmax = 1;
  const scaleMax = spec.mode === 'heads' || spec.mode === 'max' ? 1 : vmax;
  const legend = Draw.el('div', 'mx-legend');
  const lg = Draw.el('canvas');
  legend.append(Draw.el('span', null, '0'), lg, Draw.el('span', null, Fmt.att(scaleMax) + (spec.gamma !== 1 ? ' (√ scale)' : '')));
  if (Data.causal) {
    const ms = Draw.el('span', 'mx-masked');
    ms.append(Draw.el('span', 'sw-masked'), document.createTextNode('masked (key after the query' +
      (win ? ', or outside this layer\'s ' + win + '-token window)' : ')')));
    legend.appendChild(ms);
  } else if (win) {
    const ms = Draw.el('span', 'mx-masked');
    ms.append(Draw.el('span', 'sw-masked'), document.createTextNode('masked (outside this layer\'s local window, ±' + (win - 1) + ')'));
    legend.appendChild(ms);
  }
  wrap.appendChild(legend);
  host.appendChild(wrap);

  const ctx = Draw.sizeCanvas(cv, W, Ht, 30e6);
  const octx = Draw.sizeCanvas(ov, W, Ht, 30e6);
  const rgb = Draw.colorRgb(s.color), bgRgb = Draw.hexRgb(th.bg);
  const heat = pooled
    ? Draw.heatPooled(s.mat, m, rows, cols, rgb, bgRgb, spec.gamma, scaleMax, Math.ceil(gw * Draw.dpr()), Math.ceil(gh * Draw.dpr()), Data.causal || win ? Draw.hexRgb(th.maskBg) : null, masked)
    : Draw.heatCanvas(s.mat, m, rows, cols, rgb, bgRgb, spec.gamma, scaleMax, Data.causal || win ? Draw.hexRgb(th.maskBg) : null, masked);
  ov.dataset.pooled = pooled ? '1' : '';
  /* sentence boundary (first B token) on each axis */
  const bRow = rows.findIndex(g => Draw.tokSeg(t.rows, g) === 1), bCol = cols.findIndex(g => Draw.tokSeg(t.cols, g) === 1);
  /* the masked cells as row runs [r0, r1) x [c0, C): each row's masked keys are
   * a suffix of the columns (groups are in token order) */
  const maskRuns = [];
  if (Data.causal) {
    let c0 = 0;
    /* a block of image tokens that attend both ways (Gemma 3) moves a row's first masked key past the block */
    const raw = (ts, g) => ts.groups[ts.visible[g]].members[0];
    const open = (g, c) => Data.inBlock(raw(t.rows, g), raw(t.cols, c));
    rows.forEach((g, r) => {
      while (c0 < C && (cols[c0] <= g || open(g, cols[c0]))) c0++;
      const last = maskRuns[maskRuns.length - 1];
      if (c0 >= C) return;
      if (last && last.c0 === c0 && last.r1 === r) last.r1 = r + 1;
      else maskRuns.push({ r0: r, r1: r + 1, c0 });
    });
  }
  /* rows are ascending too, so c0 only grows: the loop above is linear.
   * A sliding window also masks a prefix of each row's columns: [0, k). */
  const windowRuns = [];
  if (win) rows.forEach((g, r) => {
    let k = 0;
    while (k < C && cols[k] <= g && masked(g, cols[k])) k++;
    if (k) windowRuns.push({ r, c0: 0, k });
    /* a local window both ways (an encoder's) masks a suffix too */
    let k2 = C;
    if (Data.windowBoth) while (k2 > k && cols[k2 - 1] >= g && masked(g, cols[k2 - 1])) k2--;
    if (k2 < C) windowRuns.push({ r, c0: k2, k: C - k2 });
  });
  function paintMask(p, ox, oy) {
    const rects = maskRuns.map(u => [ox + labW + u.c0 * cell, oy + labH + u.r0 * cell, (C - u.c0) * cell, (u.r1 - u.r0) * cell])
      .concat(windowRuns.map(u => [ox + labW + u.c0 * cell, oy + labH + u.r * cell, u.k * cell, cell]));
    if (rects.length) p.hatch(rects, th.maskBg, th.maskLine);
  }
  const labColor = (ts, g) => (Draw.tokGen(ts, g) ? th.gen : Draw.tokSpecial(ts, g) ? th.muted : th.ink);
  const pinRow = spec.pin >= 0 ? rows.indexOf(t.rows.visIndex[t.rows.groupOf[spec.pin]]) : -1;
  function paintSinks(p, ox, oy, labelsToo) {
    if (!sinks) return;
    const inv = scaleMax > 0 ? 1 / scaleMax : 0;
    p.rect(ox + sinkX, oy + labH, sinkW, gh, th.bg, 1);
    rows.forEach((g, r) => {
      let a = Math.min(1, sinks[g] * inv);
      if (spec.gamma !== 1) a = Math.pow(a, spec.gamma);
      if (a > 0.002) p.rect(ox + sinkX, oy + labH + r * cell, sinkW, Math.max(cell, 0.5), s.color, a);
    });
    /* its outline, so that an empty column still reads as one */
    p.rect(ox + sinkX - 1, oy + labH, 1, gh, th.muted, 0.5);
    p.rect(ox + sinkX + sinkW, oy + labH, 1, gh, th.muted, 0.5);
    if (labelsToo) p.text(ox + sinkX + sinkW / 2, oy + labH - 6, 'sink', { size: fs, color: th.muted, baseline: 'middle', rotate: -90, weight: 600 });
  }
  function paintAll(p, ox, oy, labelsToo) {
    p.image(heat, ox + labW, oy + labH, gw, gh, false);
    paintSinks(p, ox, oy, labelsToo);
    paintMask(p, ox, oy);
    if (bRow > 0) p.rect(ox + labW, oy + labH + bRow * cell - 0.5, gw, 1, th.muted, 0.7);
    if (bCol > 0) p.rect(ox + labW + bCol * cell - 0.5, oy + labH, 1, gh, th.muted, 0.7);
    if (!labelsToo) return;
    if (showLabels) {
      rows.forEach((g, r) => p.text(ox + labW - 6, oy + labH + r * cell + cell / 2, fitText(measure, rowLabels[g], labW - 10), { size: fs, color: labColor(t.rows, g), anchor: 'end', baseline: 'middle', weight: r === pinRow ? 700 : 400 }));
      cols.forEach((g, c) => p.text(ox + labW + c * cell + cell / 2, oy + labH - 6, fitText(measure, colLabels[g], labH - 10), { size: fs, color: labColor(t.cols, g), baseline: 'middle', rotate: -90 }));
    } else {
      const step = Math.ceil(40 / cell);
      for (let r = 0; r < R; r += step * 2) p.text(ox + labW - 6, oy + labH + r * cell + cell / 2, String(Draw.tokPos(t.rows, rows[r])), { size: 10, color: th.muted, anchor: 'end', baseline: 'middle' });
      for (let c = 0; c < C; c += step * 2) p.text(ox + labW + c * cell + cell / 2, oy + labH - 8, String(Draw.tokPos(t.cols, cols[c])), { size: 10, color: th.muted, anchor: 'middle', baseline: 'middle' });
    }
  }
  const screenPainter = Draw.canvasPainterOn(ctx);
  screenPainter.rect(0, 0, W, Ht, th.bg, 1);
  paintAll(screenPainter, 0, 0, true);
  /* the pinned query row: an outline across the grid and a tick at its label */
  if (pinRow >= 0) {
    const y = labH + pinRow * cell;
    ctx.strokeStyle = th.accent;
    ctx.lineWidth = cell >= 6 ? 2 : 1;
    ctx.strokeRect(labW - 1, y - 1, gw + 2, cell + 2);
    ctx.fillStyle = th.accent;
    ctx.fillRect(labW - 4, y, 3, cell);
  }
  ov.dataset.pinrow = String(pinRow);
  /* legend gradient */
  const lctx = Draw.sizeCanvas(lg, 160, 10);
  for (let x = 0; x < 160; x++) {
    let a = x / 159;
    if (spec.gamma !== 1) a = Math.pow(a, spec.gamma);
    lctx.fillStyle = 'rgb(' + Math.round(bgRgb[0] + (rgb[0] - bgRgb[0]) * a) + ',' + Math.round(bgRgb[1] + (rgb[1] - bgRgb[1]) * a) + ',' + Math.round(bgRgb[2] + (rgb[2] - bgRgb[2]) * a) + ')';
    lctx.fillRect(x, 0, 1, 10);
  }
  ov.dataset.labw = labW;
  ov.dataset.labh = labH;
  ov.dataset.cell = cell;
  ov.dataset.rows = R;
  ov.dataset.cols = C;
  Draw.heatHover(ov, octx, { x0: labW, y0: labH, cell, rows: R, cols: C, w: W, h: Ht }, th.ink, (box, r, c) => {
    const gr = rows[r], gc = cols[c];
    Tip.title(box, rowLabels[gr] + '  →  ' + colLabels[gc]);
    if (masked(gr, gc)) Tip.sub(box, Draw.MASKED_TEXT);
    else Tip.row(box, s.name + (pat ? ' · ' + pat : ''), Fmt.att(s.mat[gr * m + gc]), s.color);
    Tip.sub(box, (ax ? ax.rowSide + ' ' : 'query ') + Draw.tokPos(t.rows, gr) + ', ' + (ax ? ax.colSide + ' ' : 'key ') + Draw.tokPos(t.cols, gc));
    if (t.rows.side.hasDisplay || t.cols.side.hasDisplay) Tip.sub(box, 'vocab: ' + t.rows.groups[t.rows.visible[gr]].vocab + '  →  ' + t.cols.groups[t.cols.visible[gc]].vocab);
  });
  ov.dataset.sinkx = sinks ? String(sinkX) : '';
  ov.dataset.sinkw = String(sinkW);
  if (sinks) ov.addEventListener('mousemove', ev => {
    /* the sink column (heatHover above hid the tip: outside the keys' grid) */
    const b = ov.getBoundingClientRect();
    const x = ev.clientX - b.left - sinkX, r = Math.floor((ev.clientY - b.top - labH) / cell);
    if (x < 0 || x >= sinkW || r < 0 || r >= R) return;
    const gr = rows[r];
    Tip.show(ev.clientX, ev.clientY, box => {
      Tip.title(box, rowLabels[gr] + '  →  sink');
      Tip.row(box, s.name + (pat ? ' · ' + pat : ''), Fmt.att(sinks[gr]), s.color);
      Tip.sub(box, 'query ' + Draw.tokPos(t.rows, gr) + ': the share of its softmax that went to the head\'s sink logit (no key)');
    });
  });
  if (zoomAt) ov.addEventListener('dblclick', ev => {
    const r0 = ov.getBoundingClientRect();
    const c = Math.floor((ev.clientX - r0.left - labW) / cell), r = Math.floor((ev.clientY - r0.top - labH) / cell);
    if (c >= 0 && r >= 0 && c < C && r < R) zoomAt(r, c);
  });

  function exportScene(P, ttl) {
    const pad = 20, top = 40;
    const p = P(W + 2 * pad, Ht + top + pad);
    p.rect(0, 0, W + 2 * pad, Ht + top + pad, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    if (p.vector && R * C <= 4096) {
      /* cells as rectangles (weight = opacity of the head color), then labels */
      const inv = scaleMax > 0 ? 1 / scaleMax : 0;
      rows.forEach((g, r) => cols.forEach((gc, c) => {
        if (masked(g, gc)) return;
        let a = Math.min(1, s.mat[g * m + gc] * inv);
        if (spec.gamma !== 1) a = Math.pow(a, spec.gamma);
        if (a > 0.002) p.rect(pad + labW + c * cell, top + labH + r * cell, cell, cell, s.color, a);
      }));
      paintAll({ image() {}, text: p.text.bind(p), rect: p.rect.bind(p), hatch: p.hatch.bind(p) }, pad, top, true);
    } else {
      paintAll(p, pad, top, true);
    }
    return p;
  }
  return { exportScene };
}

/* s, cut with an ellipsis to at most maxW pixels in measure's font (whole code points). */
function fitText(measure, s, maxW) {
  if (measure.measureText(s).width <= maxW) return s;
  const cps = Array.from(s);
  let lo = 0, hi = cps.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure.measureText(cps.slice(0, mid).join('') + '…').width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return cps.slice(0, lo).join('') + '…';
}

/* The view's entry (views.js). In Heads mode it shows the focused head,
 * so the head chips pick one head instead of toggling. */
Views.register({
  id: 'matrix',
  order: 4,
  label: 'Matrix view',
  uses: { layer: true, mode: true, heads: true, merge: true, contrast: true },
  picksHead: mode => mode === 'heads',
  /* a long input (tiles.js): the view fetches its own tiles, never the layer */
  get ownsLayers() { return Tiles.on; },
  draw(host, c) {
    if (Tiles.on) return Tiles.matrix(host, { li: c.li, mode: c.mode, focus: c.focus, gamma: c.gamma, query: c.query, onQuery: c.onQuery });
    if (c.mode !== 'heads' && !c.hs.length) {
      host.textContent = '';
      host.appendChild(Draw.el('div', 'empty', 'No head selected — click a head square above.'));
      return null;
    }
    return MatrixView(host, { li: c.li, mode: c.mode, hs: c.hs, focus: c.focus, t: c.t, filter: c.filter, gamma: c.gamma, pin: c.pin });
  },
  exportTitle: (m, c) => m + ' · layer ' + c.vt.L + ' · ' + (c.mode === 'heads' ? 'head ' + Data.heads[c.focus] : c.vt.headsTxt) + c.vt.filt,
  drawHead: (host, s) => Tiles.on ? Tiles.matrix(host, { li: s.li, mode: 'heads', focus: s.h, gamma: s.gamma, query: -1 }) : MatrixView(host, { li: s.li, mode: 'heads', hs: [s.h], focus: s.h, t: s.t, filter: s.filter, gamma: s.gamma }),
});
})();
