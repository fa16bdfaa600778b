/* view_compare.js — every measure of the page side by side (attnviz --measure LIST; docs/measures.md):
 * for the selected layer, the focused head's raw attention and value-weighted (norm) attention, and the
 * layer's ALTI and rollout (every head together, through the layer), each as a small matrix (rows:
 * queries, columns: keys; each scaled to its own largest weight) over one query's row as bars, so a
 * reader sees at once where a head looks and what the layer passes on. The panel of the measure the
 * switch (measure.js, key W) has chosen is outlined; clicking a panel chooses it; clicking a matrix row
 * picks the query. Reads Data (measures, measureStack, attention, block, masked), measure.js's labels;
 * token text is only ever set as text. */
/* global Data, Draw, Measure, Views */

(() => {

const shown = s => (s === '' ? '∅' : s.replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/ /g, '·'));
const clip = (s, k) => (s.length > k ? s.slice(0, k - 1) + '…' : s);
const BARS = 12; /* keys listed under a matrix: all of them up to this many, else the row's largest, in order */

function caption(k, li, h) {
  const st = Data.measureStack(k);
  return st && st.perLayer ? 'through layer ' + Data.layers[li] + ', every head'
    : 'head ' + Data.heads[h] + ' of layer ' + Data.layers[li];
}

/* the keys a bar list shows for row q of mat (n x n): every key when few, else the largest, in position order */
function barKeys(mat, n, q, li) {
  const ks = [];
  for (let j = 0; j < n; j++) if (!Data.masked(q, j, li) || mat[q * n + j] > 0) ks.push(j);
  if (ks.length <= BARS) return ks;
  return ks.sort((a, b) => mat[q * n + b] - mat[q * n + a]).slice(0, BARS).sort((a, b) => a - b);
}

function panel(k, mat, n, li, h, q, c, chosen) {
  const th = Draw.theme();
  const card = Draw.el('div', 'cmp-card' + (chosen ? ' chosen' : ''));
  card.dataset.measure = k;
  const head = Draw.el('div', 'cmp-head');
  head.appendChild(Draw.el('span', 'cmp-name', Measure.LABEL[k] || k));
  head.appendChild(Draw.el('span', 'cmp-cap', caption(k, li, h)));
  card.appendChild(head);
  card.title = (Measure.TITLE[k] || k).replace(/ \(W\)$/, '') + '. Click to show it in the other views.';
  card.addEventListener('click', ev => { if (!ev.target.closest('canvas')) Measure.set(k); });
  /* the matrix: one canvas pixel a cell (max-pooled past SIDE cells), scaled up without smoothing, to its own
   * largest weight */
  const SIDE = 236;
  const idx = Array.from({ length: n }, (_, i) => i);
  const rgb = Draw.colorRgb(th.accent), bg = Draw.colorRgb(th.bg);
  const cv = Draw.heatThumb(mat, n, idx, idx, rgb, bg, 1, SIDE, Draw.colorRgb(th.maskBg || th.bg), (i, j) => Data.masked(i, j, li));
  const side = Math.min(SIDE, n * 24);
  cv.className = 'cmp-mat';
  cv.style.width = cv.style.height = side + 'px';
  cv.setAttribute('aria-label', (Measure.LABEL[k] || k) + ' matrix, ' + n + ' × ' + n);
  cv.addEventListener('click', ev => {
    const r = cv.getBoundingClientRect();
    const i = Math.min(n - 1, Math.max(0, Math.floor(((ev.clientY - r.top) / r.height) * n)));
    c.onQuery(i);
    c.onPick(li, h); /* draws again */
  });
  const wrap = Draw.el('div', 'cmp-matwrap');
  wrap.appendChild(cv);
  /* the picked query's row, outlined on the matrix */
  const mark = Draw.el('div', 'cmp-row');
  mark.style.top = ((q / n) * side) + 'px';
  mark.style.height = Math.max(1, side / n) + 'px';
  wrap.appendChild(mark);
  card.appendChild(wrap);
  /* query q's row as bars over the keys, scaled to the row's largest */
  const row = mat.subarray(q * n, (q + 1) * n);
  let rmax = 0;
  for (let j = 0; j < n; j++) if (row[j] > rmax) rmax = row[j];
  const list = Draw.el('div', 'cmp-bars');
  const label = Draw.el('div', 'cmp-q', 'query ' + q + ' “' + clip(shown(Data.label(q)), 18) + '”');
  list.appendChild(label);
  for (const j of barKeys(mat, n, q, li)) {
    const line = Draw.el('div', 'cmp-bar');
    line.dataset.key = String(j);
    line.appendChild(Draw.el('span', 'cmp-tok', clip(shown(Data.label(j)), 12)));
    const track = Draw.el('span', 'cmp-track');
    const fill = Draw.el('span', 'cmp-fill');
    fill.style.width = (rmax > 0 ? (100 * row[j]) / rmax : 0).toFixed(1) + '%';
    track.appendChild(fill);
    line.appendChild(track);
    line.appendChild(Draw.el('span', 'cmp-val', row[j].toFixed(3)));
    line.title = j + ': ' + Data.label(j) + ' — ' + row[j].toFixed(4);
    list.appendChild(line);
  }
  card.appendChild(list);
  return card;
}

async function CompareView(host, c) {
  const li = c.li, h = c.focus, n = Data.n;
  const q = c.query >= 0 && c.query < n ? c.query : n - 1;
  const ks = Data.measures;
  const mats = {};
  for (const k of ks) {
    const st = Data.measureStack(k);
    await Data.attention(li, st, [h]);
    if (c.stale()) return null;
    const codes = Data.block(li, h, st);
    const m = new Float32Array(n * n);
    for (let i = 0; i < n * n; i++) m[i] = codes[i] / 1e4;
    mats[k] = m;
  }
  host.textContent = '';
  const ttl = Draw.el('div', 'view-title');
  ttl.appendChild(Draw.el('h2', null, 'Compare measures · layer ' + Data.layers[li]));
  ttl.appendChild(Draw.el('span', 'sub', 'Where head ' + Data.heads[h] + ' looks (attention' +
    (ks.includes('norm') ? ', and weighted by its values\' norms' : '') + ') beside what the layer passes on' +
    (ks.some(k => Data.measureStack(k).perLayer) ? ' (ALTI, rollout: every head, the residual, through this layer)' : '') +
    '. Rows: queries; columns: keys; each matrix scaled to its largest weight. The bars: query ' + q +
    '\'s row (click a matrix row for another; the head chips pick the head).'));
  host.appendChild(ttl);
  const grid = Draw.el('div', 'cmp-grid');
  grid.id = 'compare-grid';
  const chosen = Data.measure;
  for (const k of ks) grid.appendChild(panel(k, mats[k], n, li, h, q, c, k === chosen));
  host.appendChild(grid);
  return null;
}

Views.register({
  id: 'compare',
  order: 9,
  label: 'Compare',
  needs: 'measures',
  uses: { layer: true, mode: false, heads: true, merge: false, contrast: false },
  picksHead: () => true,
  allMeasures: true,
  draw: (host, c) => CompareView(host, c),
  exportTitle: (m, c) => m + ' · measures compared · head ' + Data.heads[c.focus],
  unavailable: () => (Data.stacked || Data.measures.length < 2
    ? 'Compare draws the measures side by side: write the page with --measure LIST (e.g. norm,alti,rollout)' : null),
});
})();
