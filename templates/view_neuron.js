/* view_neuron.js — the neuron view: for one head and one query token, the
 * query vector, each key vector, their elementwise product, q·k/√d and the
 * softmax weight. Needs from data.js: Data.queriesKeys (the decoded q/k
 * codes and their decimals; pages written without --qk have none),
 * Data.code (the captured weight), Tok.filterIdx on unmerged tokens,
 * Data.masked, Data.label/text. */
/* global Data, Tok, Fmt, Draw, Tip, Views */

/* The file's body is one function (not indented): it registers the view
 * and leaves no names behind. */
(() => {

/* ---------------------------------------------------------------- neuron view */

/* q, k, q×k, q·k/√d and softmax for one head and query. spec {li, h, t (no
 * merge), filter, qi (raw token index), onQuery(i)}. Needs queries/keys. */
function NeuronView(host, spec, qk) {
  const { li, h, t } = spec;
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  host.textContent = '';
  const d = qk.d || Data.headDim;
  const n = Data.n;
  /* offline: integer codes with dq/dk decimals; live: the float32 values (dq null) */
  const q = qk.q, k = qk.k, dq = qk.decQ, dk = qk.decK, exact = dq === null;
  const sq = exact ? 1 : Math.pow(10, -dq), sk = exact ? 1 : Math.pow(10, -dk);
  const fmtQ = exact ? v => v.toPrecision(5) : c => Fmt.fixed(c, dq);
  const fmtK = exact ? v => v.toPrecision(5) : c => Fmt.fixed(c, dk);
  const fmtP = exact ? v => v.toPrecision(5) : c => Fmt.fixed(c, dq + dk);
  let qi = spec.qi;
  const rawRows = rows.map(g => Draw.tokPos(t.rows, g));
  const rawCols = cols.map(g => Draw.tokPos(t.cols, g));
  if (!rawRows.includes(qi)) qi = rawRows.length ? rawRows[0] : 0;
  /* the keys the query sees: every key, or (causal) those up to the query; a
   * prefix of rawCols, which is ascending. Masked keys are not listed. */
  const keysFor = i => (Data.causal ? rawCols.filter(j => !Data.masked(i, j, li)) : rawCols);
  let keys = keysFor(qi);

  const title = Draw.el('div', 'view-title');
  const pat = Data.pattern(li, h);
  title.appendChild(Draw.el('h2', null, 'Neuron view · layer ' + Data.layers[li] + ', head ' + Data.heads[h] + (pat ? ' (' + pat + ')' : '')));
  title.appendChild(Draw.el('span', 'sub', 'Hover or click a query token on the left. Cells: blue positive, orange negative; hover a cell for its value.' +
    (Data.causal ? ' Causal model: only the keys up to the query are listed (later keys are masked; the softmax runs over these).' : '')));
  host.appendChild(title);

  const nmax = Math.max(cols.length, 1);
  const rh = nmax <= 40 ? 22 : nmax <= 128 ? 18 : 15;
  const avail = Math.max(600, host.clientWidth - 40 - 170 - 130 - 78 - 132 - 40);
  const cw = Math.max(2, Math.min(11, Math.floor(avail / (2 * d + 3))));
  const gap = cw * 3;
  const cellsW = 2 * d * cw + gap;

  const wrap = Draw.el('div', 'nv');
  const qcol = Draw.el('div', 'nv-queries');
  qcol.appendChild(Draw.el('div', 'qh', 'Query'));
  const qEls = rows.map(g => {
    const e = Draw.el('div', 'tok', Draw.tokLabel(t.rows, g));
    const thumb = Draw.tokThumb(t.rows, g, Math.max(10, rh - 4)); /* an image run: the patch itself */
    if (thumb) e.prepend(thumb);
    const ttl = Draw.tokTitle(t.rows, g);
    if (ttl) e.title = ttl;
    e.style.height = rh + 'px';
    e.style.lineHeight = rh + 'px';
    e.dataset.pos = Draw.tokPos(t.rows, g);
    if (Draw.tokSpecial(t.rows, g)) e.classList.add('special');
    if (Draw.tokGen(t.rows, g)) e.classList.add('gen');
    if (Draw.tokPos(t.rows, g) === qi) e.classList.add('cur');
    qcol.appendChild(e);
    return e;
  });
  const main = Draw.el('div', 'nv-main');
  const head = Draw.el('div', 'nv-head');
  head.appendChild(Draw.el('div', 'nv-lab', 'Key'));
  const hk = Draw.el('div', 'nv-cells');
  hk.style.width = cellsW + 'px';
  hk.style.display = 'flex';
  const l1 = Draw.el('span', null, 'k (key vector)');
  l1.style.width = d * cw + gap + 'px';
  hk.append(l1, Draw.el('span', null, 'q × k (elementwise)'));
  head.appendChild(hk);
  const nh = Draw.el('div', 'nv-num', 'q·k/√d');
  head.appendChild(nh);
  head.appendChild(Draw.el('div', 'nv-sm', 'softmax'));
  const qrow = Draw.el('div', 'nv-qrow');
  const qlab = Draw.el('div', 'nv-lab', 'q · ' + Data.label(qi));
  qlab.style.fontWeight = '650';
  qrow.appendChild(qlab);
  const qcv = Draw.el('canvas', 'nv-cells');
  qrow.appendChild(qcv);
  qrow.style.height = rh + 4 + 'px';
  main.append(head, qrow);
  const body = Draw.el('div');
  body.style.position = 'relative';
  const rowEls = cols.map(g => {
    const r = Draw.el('div', 'nv-row');
    r.style.height = rh + 'px';
    r.dataset.pos = Draw.tokPos(t.cols, g);
    const lab = Draw.el('div', 'nv-lab', Draw.tokLabel(t.cols, g));
    const kthumb = Draw.tokThumb(t.cols, g, 12);
    if (kthumb) lab.prepend(kthumb);
    const ttl = Draw.tokTitle(t.cols, g);
    if (ttl) lab.title = ttl;
    if (Draw.tokSpecial(t.cols, g)) lab.classList.add('special');
    const sp = Draw.el('div', 'nv-cells');
    sp.style.width = cellsW + 'px';
    const num = Draw.el('div', 'nv-num');
    const sm = Draw.el('div', 'nv-sm');
    const bar = Draw.el('span', 'bar');
    const val = Draw.el('span', 'val');
    sm.append(bar, val);
    r.append(lab, sp, num, sm);
    return { r, num, bar, val };
  });
  const cv = Draw.el('canvas', 'nv-canvas');
  cv.style.left = '130px';
  cv.style.top = '0px';
  main.appendChild(body);
  const maskNote = Draw.el('div', 'nv-masked');
  main.appendChild(maskNote);
  /* lists the rows of the keys the current query sees (all but under a mask) */
  let shown = -1;
  function showRows() {
    if (shown === keys.length) return false;
    shown = keys.length;
    body.replaceChildren(...rowEls.slice(0, keys.length).map(e => e.r), cv);
    const hidden = rawCols.length - keys.length;
    maskNote.textContent = hidden ? hidden + ' later key' + (hidden === 1 ? ' is' : 's are') + ' masked (causal model) and not listed.' : '';
    maskNote.hidden = !hidden;
    return true;
  }
  const legend = Draw.el('div', 'nv-legend');
  const addSw = (color, text) => {
    const s = Draw.el('span');
    const sw = Draw.el('span', 'sw');
    sw.style.background = color;
    s.append(sw, document.createTextNode(text));
    legend.appendChild(s);
  };
  addSw('#2f6fd0', 'positive');
  addSw('#e8710a', 'negative');
  legend.appendChild(Draw.el('span', null, 'Shades are relative to the largest |q|, |k| and |q × k| here. ' +
    (exact ? 'Values: q and k as computed (float32); '
      : 'Values: q and k rounded to ' + (dq === dk ? dq : dq + ' and ' + dk) + ' decimals; ') +
    'q × k and q·k/√d computed from those; softmax is the captured attention weight.'));
  main.appendChild(legend);
  wrap.append(qcol, main);
  host.appendChild(wrap);

  const th = Draw.theme();
  const bgRgb = Draw.hexRgb(th.bg);
  const POS = Draw.hexRgb(th.dark ? '#6e9cf5' : '#2f6fd0'), NEG = Draw.hexRgb(th.dark ? '#f59a4a' : '#e8710a');
  let H = 0, ctx = null;
  const qctx = Draw.sizeCanvas(qcv, cellsW, rh, 4e6);
  cv.dataset.cw = cw;
  cv.dataset.rh = rh;
  cv.dataset.gap = gap;
  cv.dataset.d = d;
  qcv.dataset.cw = cw;

  /* zero is a faint neutral cell (so the grid shows), then toward blue / orange */
  const ZERO = Draw.hexRgb(Draw.cssVar('--panel-2'));
  function cellColor(v, scale) {
    let a = scale > 0 ? Math.min(1, Math.abs(v) / scale) : 0;
    a = Math.pow(a, 0.75);
    const c = v >= 0 ? POS : NEG;
    return 'rgb(' + Math.round(ZERO[0] + (c[0] - ZERO[0]) * a) + ',' + Math.round(ZERO[1] + (c[1] - ZERO[1]) * a) + ',' + Math.round(ZERO[2] + (c[2] - ZERO[2]) * a) + ')';
  }
  const scores = new Float64Array(n);
  /* colors are relative: q, the keys and the products each to their own largest magnitude */
  let qscale = 1, kscale = 1, pscale = 1;
  function compute() {
    const qo = qi * d;
    let mq = 0, mk = 0, mp = 0;
    for (let x = 0; x < d; x++) mq = Math.max(mq, Math.abs(q[qo + x] * sq));
    for (const j of keys) {
      let s = 0;
      for (let x = 0; x < d; x++) {
        const kv = k[j * d + x] * sk, pv = q[qo + x] * sq * kv;
        s += pv;
        mk = Math.max(mk, Math.abs(kv));
        mp = Math.max(mp, Math.abs(pv));
      }
      scores[j] = s / Math.sqrt(d);
    }
    qscale = mq; kscale = mk; pscale = mp;
  }
  function paint(c2, q2, ox, oy) {
    /* q row */
    const qo = qi * d;
    for (let x = 0; x < d; x++) {
      q2.fillStyle = cellColor(q[qo + x] * sq, qscale);
      q2.fillRect(ox + x * cw, oy.q + 2, Math.max(1, cw - (cw > 3 ? 1 : 0)), rh - 4);
    }
    keys.forEach((j, r) => {
      const y = oy.k + r * rh + 2;
      for (let x = 0; x < d; x++) {
        const kv = k[j * d + x] * sk;
        c2.fillStyle = cellColor(kv, kscale);
        c2.fillRect(ox + x * cw, y, Math.max(1, cw - (cw > 3 ? 1 : 0)), rh - 4);
        c2.fillStyle = cellColor(q[qo + x] * sq * kv, pscale);
        c2.fillRect(ox + d * cw + gap + x * cw, y, Math.max(1, cw - (cw > 3 ? 1 : 0)), rh - 4);
      }
    });
  }
  function draw() {
    keys = keysFor(qi);
    if (showRows() || !ctx) {
      H = keys.length * rh;
      ctx = Draw.sizeCanvas(cv, cellsW, H, 40e6);
    }
    compute();
    ctx.clearRect(0, 0, cellsW, H);
    qctx.clearRect(0, 0, cellsW, rh);
    paint(ctx, qctx, 0, { q: 0, k: 0 });
    qlab.textContent = 'q · ' + Data.label(qi);
    keys.forEach((j, r) => {
      const e = rowEls[r];
      e.num.textContent = scores[j].toFixed(3);
      const w = Data.code(li, h, qi, j);
      e.val.textContent = Fmt.fixed(w, 4);
      e.bar.style.width = Math.max(w > 0 ? 1 : 0, (w / 10000) * 60) + 'px';
      e.bar.style.background = Draw.headColor(Data.heads[h]);
    });
    qEls.forEach(e => e.classList.toggle('cur', +e.dataset.pos === qi));
    host.dataset.query = qi;
  }
  function setQuery(i) {
    if (i === qi) return;
    qi = i;
    spec.onQuery(i);
    draw();
  }
  qcol.addEventListener('mouseover', ev => {
    const e = ev.target.closest('.tok');
    if (e) setQuery(+e.dataset.pos);
  });
  qcol.addEventListener('click', ev => {
    const e = ev.target.closest('.tok');
    if (e) setQuery(+e.dataset.pos);
  });
  function cellTip(ev, isQ) {
    const r = ev.target.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    let dim = Math.floor(x / cw), part = 'k';
    if (dim >= d) {
      const x2 = x - d * cw - gap;
      if (x2 < 0) { Tip.hide(); return; }
      dim = Math.floor(x2 / cw);
      part = 'p';
    }
    if (dim < 0 || dim >= d) { Tip.hide(); return; }
    const qc = q[qi * d + dim];
    if (isQ) {
      if (part !== 'k') { Tip.hide(); return; }
      Tip.show(ev.clientX, ev.clientY, box => {
        Tip.title(box, 'q[' + dim + ']  ·  query ' + JSON.stringify(Data.text(qi)) + ' (' + qi + ')');
        Tip.row(box, 'q', fmtQ(qc));
      });
      return;
    }
    const row = Math.floor(y / rh);
    if (row < 0 || row >= keys.length) { Tip.hide(); return; }
    const j = keys[row];
    const kc = k[j * d + dim];
    Tip.show(ev.clientX, ev.clientY, box => {
      Tip.title(box, (part === 'k' ? 'k' : 'q × k') + '[' + dim + ']  ·  key ' + JSON.stringify(Data.text(j)) + ' (' + j + ')');
      Tip.row(box, 'q', fmtQ(qc));
      Tip.row(box, 'k', fmtK(kc));
      Tip.row(box, 'q × k', fmtP(qc * kc));
    });
  }
  cv.addEventListener('mousemove', ev => cellTip(ev, false));
  cv.addEventListener('mouseleave', () => Tip.hide());
  qcv.addEventListener('mousemove', ev => cellTip(ev, true));
  qcv.addEventListener('mouseleave', () => Tip.hide());
  draw();

  function exportScene(P, ttl) {
    const pad = 20, top = 64, lab = 130, numW = 78, smW = 140;
    const note = maskNote.hidden ? '' : maskNote.textContent;
    const W = pad + lab + cellsW + numW + smW + pad, Ht = top + rh + 8 + H + (note ? 22 : 0) + pad;
    const p = P(W, Ht);
    p.rect(0, 0, W, Ht, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    const hx = pad + lab;
    p.text(hx, 50, 'k (key vector)', { size: 11, color: th.muted, weight: 600 });
    p.text(hx + d * cw + gap, 50, 'q × k', { size: 11, color: th.muted, weight: 600 });
    p.text(hx + cellsW + numW - 4, 50, 'q·k/√d', { size: 11, color: th.muted, weight: 600, anchor: 'end' });
    p.text(hx + cellsW + numW + 10, 50, 'softmax', { size: 11, color: th.muted, weight: 600 });
    p.text(hx - 10, top + rh / 2, 'q · ' + Data.label(qi), { size: 12, color: th.ink, anchor: 'end', baseline: 'middle', weight: 650 });
    const ky = top + rh + 8;
    const cells = (1 + keys.length) * 2 * d;
    if (p.vector && cells <= 30000) {
      const tmp = { fillStyle: '', fillRect: (x, y, w, hh) => p.rect(x, y, w, hh, tmp.fillStyle, 1) };
      paint(tmp, tmp, hx, { q: top, k: ky });
    } else {
      const rc = document.createElement('canvas');
      const rcx = Draw.sizeCanvasRaw(rc, cellsW, H, 2, 60e6);
      const qc = document.createElement('canvas');
      const qcx = Draw.sizeCanvasRaw(qc, cellsW, rh, 2, 4e6);
      paint(rcx, qcx, 0, { q: 0, k: 0 });
      p.image(qc, hx, top, cellsW, rh, true);
      p.image(rc, hx, ky, cellsW, H, true);
    }
    keys.forEach((j, r) => {
      const y = ky + r * rh + rh / 2;
      p.text(hx - 10, y, Data.label(j), { size: 12, color: th.ink, anchor: 'end', baseline: 'middle' });
      p.text(hx + cellsW + numW - 4, y, scores[j].toFixed(3), { size: 12, color: th.ink, anchor: 'end', baseline: 'middle' });
      const w = Data.code(li, h, qi, j);
      p.rect(hx + cellsW + numW + 10, y - 4, Math.max(w > 0 ? 1 : 0, (w / 10000) * 60), 8, Draw.headColor(Data.heads[h]), 1);
      p.text(hx + cellsW + numW + 76, y, Fmt.fixed(w, 4), { size: 12, color: th.ink, baseline: 'middle' });
    });
    if (note) p.text(hx, ky + H + 16, note, { size: 11, color: th.muted, baseline: 'middle' });
    return p;
  }
  return { exportScene, get query() { return qi; } };
}


/* The view's entry (views.js). Shows raw word pieces (merge off) and
 * one head at a time; returns a promise while the layer's q/k decode. */
Views.register({
  id: 'neuron',
  order: 3,
  label: 'Neuron view',
  uses: { layer: true, mode: false, heads: true, merge: false, contrast: false },
  mergeNote: 'the neuron view shows word pieces',
  attentionOnly: true,
  picksHead: () => true,
  unavailable: () => (Data.stacked ? 'The neuron view needs queries and keys, which encoder-decoder documents (attnviz render, or a model run with --decoder-text or --generate) do not carry' : null),
  draw(host, c) {
    if (!Data.hasQK) {
      host.textContent = '';
      const d = Draw.el('div', 'empty');
      d.appendChild(document.createTextNode('This page has no queries and keys. Run attnviz with '));
      d.appendChild(Draw.el('code', null, '--qk'));
      d.appendChild(document.createTextNode(' to include them (they make the file larger).'));
      host.appendChild(d);
      return null;
    }
    if (!Data.loaded(c.li, [c.focus])) c.status('Decoding…');
    return Data.queriesKeys(c.li, c.focus).then(qk => (c.stale() ? null
      : NeuronView(host, { li: c.li, h: c.focus, t: c.t, filter: c.filter, qi: c.query, onQuery: c.onQuery }, qk)));
  },
  exportTitle: (m, c) => m + ' · layer ' + c.vt.L + ', head ' + Data.heads[c.focus] + ' · neuron view',
});
})();
