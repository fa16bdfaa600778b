/* explain.js — the panel of a page written with --explain L.H (explain.h):
 * why the head attends where it does. For each pair the run explained, the
 * pre-softmax score scale · q·k split over the parts of the residual stream
 * entering the layer (the embeddings, each earlier head, each MLP, the biases)
 * on the query side and on the key side: the largest products of a query part
 * and a key part, each side's parts summed over the other side, and the same
 * summed by layer as a heat map. A collapsible panel under the notes (closed:
 * one line), not a view: it reads no layer or head of the page's attention.
 * Reads Data.meta.explain (src/out/explain_out.c); token text is only ever
 * set as text. page.js calls Explain.init once. */
/* global Data, Draw, Fmt */
/* exported Explain */

const Explain = (() => {

const TOP = 12;
const fmt = v => (v >= 0 ? '+' : '−') + Math.abs(v).toFixed(Math.abs(v) >= 10 ? 2 : 3);
let pick = 0; /* the pair shown, across redraws */

/* a part's layer group for the heat map: 0 the embeddings, 1 + l layer l's heads and MLP, last the biases */
function group(x, p) {
  const l = x.part_layer[p];
  if (l >= 0) return 1 + l;
  return x.parts[p] === 'embeddings' ? 0 : x.layer + 1;
}
const groupName = (x, g) => (g === 0 ? 'emb' : g <= x.layer ? 'L' + (g - 1) : 'bias');

function bars(title, rows, scale) {
  const box = Draw.el('div', 'ex-bars');
  box.appendChild(Draw.el('h3', null, title));
  for (const [name, v] of rows) {
    const r = Draw.el('div', 'ex-bar');
    r.appendChild(Draw.el('span', 'ex-name', name));
    const track = Draw.el('span', 'ex-track');
    const fill = Draw.el('span', 'ex-fill' + (v < 0 ? ' neg' : ''));
    fill.style.width = (100 * Math.min(1, Math.abs(v) / (scale || 1))).toFixed(1) + '%';
    track.appendChild(fill);
    r.appendChild(track);
    r.appendChild(Draw.el('span', 'ex-val', fmt(v)));
    box.appendChild(r);
  }
  return box;
}

function draw(host) {
  const x = Data.meta.explain;
  host.textContent = '';
  const ttl = Draw.el('div', 'view-title');
  ttl.appendChild(Draw.el('span', 'sub', 'The score scale · q·k (before the softmax; scale ' +
    x.scale.toPrecision(4) + ') split over the parts of the residual stream entering layer ' + x.layer + ' — the embeddings, ' +
    'each earlier head (L·H), each MLP and the biases — on the query side and on the key side. The layer norm and any q/k norm ' +
    'are frozen at their measured scale and rotary positions turn each part, so the parts add up to the score. A large ' +
    'product of a query part and a key part is what makes the head pick this key.'));
  host.appendChild(ttl);
  if (pick >= x.pairs.length) pick = 0;
  const seg = Draw.el('div', 'seg ex-pairs');
  seg.setAttribute('role', 'radiogroup');
  seg.setAttribute('aria-label', 'Pair explained');
  x.pairs.forEach((p, k) => {
    const b = Draw.el('button', null, 'query ' + p.query + ' “' + Fmt.visible(p.query_token) + '” → key ' + p.key + ' “' +
      Fmt.visible(p.key_token) + '”');
    b.type = 'button';
    b.setAttribute('role', 'radio');
    b.setAttribute('aria-checked', k === pick ? 'true' : 'false');
    b.dataset.pair = String(k);
    b.addEventListener('click', () => { pick = k; draw(host); });
    seg.appendChild(b);
  });
  host.appendChild(seg);
  const p = x.pairs[pick], NP = x.parts.length, m = p.matrix;
  const sum = Draw.el('div', 'ex-sum');
  sum.id = 'explain-summary';
  sum.textContent = 'weight ' + Fmt.att(p.weight) + ' · score ' + p.score.toFixed(4) + ' · the parts sum to ' + p.parts_sum.toFixed(4) +
    (x.rest > 0 ? ' (the pass\'s float32 rounding, its own “rounding” part: ' + x.rest.toExponential(1) + ' of the stream)' : '');
  host.appendChild(sum);
  const cols = Draw.el('div', 'ex-cols');
  /* the largest products */
  const cells = [];
  for (let a = 0; a < NP; a++) for (let b = 0; b < NP; b++) cells.push([m[a][b], a, b]);
  cells.sort((u, v) => Math.abs(v[0]) - Math.abs(u[0]));
  const top = Draw.el('div', 'ex-bars');
  top.appendChild(Draw.el('h3', null, 'Largest products (query part × key part)'));
  const table = Draw.el('table', 'ex-table');
  const hr = Draw.el('tr');
  ['score', 'query part', 'key part'].forEach(t => hr.appendChild(Draw.el('th', null, t)));
  table.appendChild(hr);
  for (const [v, a, b] of cells.slice(0, TOP)) {
    const tr = Draw.el('tr');
    const td = Draw.el('td', 'ex-val' + (v < 0 ? ' neg' : ''), fmt(v));
    tr.appendChild(td);
    tr.appendChild(Draw.el('td', null, x.parts[a]));
    tr.appendChild(Draw.el('td', null, x.parts[b]));
    table.appendChild(tr);
  }
  top.appendChild(table);
  cols.appendChild(top);
  /* each side's parts, summed over the other side */
  const side = k => {
    const v = new Array(NP).fill(0);
    for (let a = 0; a < NP; a++) for (let b = 0; b < NP; b++) v[k ? b : a] += m[a][b];
    return v.map((s, i) => [x.parts[i], s]).sort((u, w) => Math.abs(w[1]) - Math.abs(u[1])).slice(0, 8);
  };
  const qs = side(0), ks = side(1);
  const scale = Math.max(...qs.concat(ks).map(r => Math.abs(r[1])), 1e-9);
  cols.appendChild(bars('Query side (summed over the key parts)', qs, scale));
  cols.appendChild(bars('Key side (summed over the query parts)', ks, scale));
  host.appendChild(cols);
  /* the products summed by layer: rows the query's, columns the key's */
  const G = x.layer + 2, gm = Array.from({ length: G }, () => new Float64Array(G));
  for (let a = 0; a < NP; a++) for (let b = 0; b < NP; b++) gm[group(x, a)][group(x, b)] += m[a][b];
  let vmax = 1e-12;
  gm.forEach(r => r.forEach(v => { vmax = Math.max(vmax, Math.abs(v)); }));
  const hm = Draw.el('div', 'ex-heat');
  hm.appendChild(Draw.el('h3', null, 'By layer (rows: query side, columns: key side; blue adds to the score, red takes from it)'));
  const cell = Math.max(14, Math.min(34, Math.floor(640 / (G + 1))));
  const grid = Draw.el('div', 'ex-grid');
  grid.style.gridTemplateColumns = '44px repeat(' + G + ', ' + cell + 'px)';
  grid.appendChild(Draw.el('span'));
  for (let g = 0; g < G; g++) grid.appendChild(Draw.el('span', 'ex-lab', groupName(x, g)));
  for (let r = 0; r < G; r++) {
    grid.appendChild(Draw.el('span', 'ex-lab', groupName(x, r)));
    for (let c = 0; c < G; c++) {
      const v = gm[r][c], s = Draw.el('span', 'ex-cell');
      s.style.height = cell + 'px';
      const a = Math.min(1, Math.abs(v) / vmax);
      s.style.background = v >= 0 ? 'rgba(53, 89, 214, ' + a.toFixed(3) + ')' : 'rgba(214, 53, 70, ' + a.toFixed(3) + ')';
      s.title = groupName(x, r) + ' (query) × ' + groupName(x, c) + ' (key): ' + fmt(v);
      grid.appendChild(s);
    }
  }
  hm.appendChild(grid);
  host.appendChild(hm);
  host.dataset.drawn = '1';
  return null;
}

/* notes: the element the panel goes after (the page's notes) */
function init(notes) {
  const x = Data.meta.explain;
  if (!x || !Array.isArray(x.pairs) || !x.pairs.length || !notes) return;
  const box = Draw.el('details', 'explain-panel');
  box.id = 'explain-panel';
  const sum = Draw.el('summary', null, 'Why head ' + x.layer + '.' + x.head + ' attends where it does (--explain: ' +
    x.pairs.length + ' pair' + (x.pairs.length === 1 ? '' : 's') + ')');
  box.appendChild(sum);
  const host = Draw.el('div', 'explain-body');
  host.id = 'explain-body';
  box.appendChild(host);
  box.addEventListener('toggle', () => { if (box.open && !host.dataset.drawn) draw(host); });
  notes.parentNode.insertBefore(box, notes.nextSibling);
}

return { init };
})();
