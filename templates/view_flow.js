/* view_flow.js — information-flow routes (attnviz --flow; Ferrando & Voita
 * 2024): the graph from one token's output down through the layers, tokens as
 * columns and layers as rows (the output on top), a line from token j below a
 * layer to token i above it for each pair kept, its width the pair's share
 * (summed over heads, plus the residual's when j = i), the MLP's share as a
 * square beside its node. The threshold control prunes the graph again
 * client-side, from the JSON's threshold up: every pair kept at a higher
 * threshold is among those the JSON lists. Reads Data.meta.flow
 * (src/out/flow_out.c); token text is only ever set as text (SVG text nodes). */
/* global Data, Draw, Views */

(() => {

const NS = 'http://www.w3.org/2000/svg';
const shown = s => (s === '' ? '∅' : s.replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/ /g, '·'));
const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);
const fmt = w => w.toFixed(3);

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

/* pairs (layer, from, to) with their heads and residual, and the MLPs' shares, from the edge list */
function index(flow) {
  const pairs = new Map(), mlp = new Map();
  for (const e of flow.edges) {
    if (e.kind === 'mlp') { mlp.set(e.layer + ',' + e.to, e.weight); continue; }
    const k = e.layer + ',' + e.from + ',' + e.to;
    let p = pairs.get(k);
    if (!p) pairs.set(k, p = { layer: e.layer, from: e.from, to: e.to, heads: [], resid: 0, sum: 0 });
    if (e.kind === 'residual') p.resid += e.weight;
    else p.heads.push([e.head, e.weight]);
    p.sum += e.weight;
  }
  const into = new Map(); /* "layer,to" -> pairs */
  for (const p of pairs.values()) {
    const k = p.layer + ',' + p.to;
    if (!into.has(k)) into.set(k, []);
    into.get(k).push(p);
  }
  return { into, mlp };
}

/* the graph at threshold t: traced from the output token down, as attnviz traces it */
function trace(flow, ix, t) {
  const kept = [], mlps = [], nodes = new Set([(flow.layers[1] + 1) + ',' + flow.position]);
  let act = new Set([flow.position]);
  for (let l = flow.layers[1]; l >= flow.layers[0]; l--) {
    const next = new Set();
    for (const i of act) {
      const m = ix.mlp.get(l + ',' + i) || 0;
      if (m > t) mlps.push([l, i, m]);
      if (!(m > t || 1 - m > t)) continue;
      for (const p of ix.into.get(l + ',' + i) || []) {
        if (!(p.sum > t)) continue;
        kept.push(p);
        next.add(p.from);
        nodes.add(l + ',' + p.from);
      }
    }
    act = next;
  }
  return { kept, mlps, nodes };
}

function FlowView(host) {
  const meta = Data.meta, flow = meta.flow;
  const toks = meta.display_tokens || meta.tokens;
  const n = toks.length, lo = flow.layers[0], hi = flow.layers[1], rows = hi - lo + 1;
  const ix = index(flow);
  host.textContent = '';
  const ttl = Draw.el('div', 'view-title');
  ttl.appendChild(Draw.el('h2', null, 'Flow'));
  ttl.appendChild(Draw.el('span', 'sub', 'Information-flow routes (Ferrando & Voita 2024) into token ' + flow.position +
    ' ("' + clip(shown(toks[flow.position]), 20) + '") after layer ' + hi + ': each line carries a token\'s share of the ' +
    'stream above it (summed over heads, plus the residual for the token itself), the width its weight; squares are the ' +
    'MLP\'s share. Hover a line for its heads.'));
  host.appendChild(ttl);
  const bar = Draw.el('div', 'flow-controls');
  bar.style.display = 'flex';
  bar.style.gap = '10px';
  bar.style.alignItems = 'center';
  bar.style.margin = '4px 0 8px';
  const lab = Draw.el('label', null, 'threshold');
  const range = Draw.el('input');
  range.type = 'range';
  range.min = String(flow.threshold);
  range.max = String(Math.max(0.5, flow.threshold));
  range.step = '0.005';
  range.value = String(flow.threshold);
  range.setAttribute('aria-label', 'threshold');
  const note = Draw.el('span', 'sub');
  lab.appendChild(range);
  bar.appendChild(lab);
  bar.appendChild(note);
  host.appendChild(bar);
  const wrap = Draw.el('div');
  wrap.style.overflow = 'auto';
  wrap.style.maxHeight = '78vh';
  host.appendChild(wrap);

  /* fit the tokens to the panel (its 20 px paddings, the layer labels' margin and 16 px at the right)
   * down to 18 px a column (then it scrolls), labels turned when narrow */
  const left = 52, top = 34;
  const colW = Math.max(18, Math.min(96, Math.floor(((host.clientWidth || 1000) - 40 - left - 16) / Math.max(1, n))));
  const turn = colW < 44, rowH = Math.max(34, Math.min(110, Math.floor(420 / rows)));
  const W = left + n * colW + 16, H = top + rows * rowH + (turn ? 90 : 40);
  const x = t => left + (t + 0.5) * colW, y = b => top + (hi + 1 - b) * rowH;

  function draw() {
    const t = Math.max(flow.threshold, +range.value);
    const g = trace(flow, ix, t);
    note.textContent = fmt(t) + ' · ' + g.kept.length + ' token pairs, ' + g.mlps.length + ' MLPs' +
      (t > flow.threshold ? '' : ' (the run\'s threshold: lower needs attnviz --flow T)');
    const svg = svgEl('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'class': 'flow-graph' });
    svg.style.fontFamily = 'var(--mono)';
    svg.style.fontSize = '11px';
    /* layer bands and labels */
    for (let l = lo; l <= hi; l++) {
      if ((l - lo) % 2 === 0) svg.appendChild(svgEl('rect', { x: left, y: y(l + 1), width: n * colW, height: rowH, fill: 'var(--panel-2)' }));
      svg.appendChild(svgEl('text', { x: 8, y: (y(l) + y(l + 1)) / 2 + 4, fill: 'var(--ink-2)' }, 'L' + l));
    }
    /* tokens, below and above */
    for (let p = 0; p < n; p++) {
      const s = clip(shown(toks[p]), turn ? 12 : Math.max(3, Math.floor(colW / 7)));
      const below = svgEl('text', turn
        ? { x: x(p) + 4, y: y(lo) + 14, 'text-anchor': 'end', transform: 'rotate(-60 ' + (x(p) + 4) + ' ' + (y(lo) + 14) + ')' }
        : { x: x(p), y: y(lo) + 24, 'text-anchor': 'middle' }, s);
      below.setAttribute('fill', p === flow.position ? 'var(--accent)' : 'var(--ink-2)');
      below.appendChild(svgEl('title', {}, p + ': ' + toks[p]));
      svg.appendChild(below);
      if (p === flow.position) svg.appendChild(svgEl('text', { x: x(p), y: top - 14, 'text-anchor': 'middle', fill: 'var(--accent)', 'font-weight': 650 }, s));
    }
    /* the pairs, widest last so they stay on top */
    for (const p of g.kept.slice().sort((a, b) => a.sum - b.sum)) {
      const self = p.from === p.to, residual = self && p.resid >= p.sum - p.resid;
      const line = svgEl('line', {
        x1: x(p.from), y1: y(p.layer), x2: x(p.to), y2: y(p.layer + 1),
        stroke: residual ? 'var(--muted)' : 'var(--accent)', 'stroke-width': (0.75 + 9 * p.sum).toFixed(2),
        'stroke-opacity': (0.35 + 0.6 * p.sum).toFixed(3), 'stroke-linecap': 'round', 'class': 'flow-edge',
      });
      const heads = p.heads.slice().sort((a, b) => b[1] - a[1]);
      line.appendChild(svgEl('title', {}, 'layer ' + p.layer + ': token ' + p.from + ' → ' + p.to + ' ' + fmt(p.sum) +
        (self ? '\nresidual ' + fmt(p.resid) : '') + heads.slice(0, 8).map(h => '\nhead ' + h[0] + ' ' + fmt(h[1])).join('') +
        (heads.length > 8 ? '\n… ' + (heads.length - 8) + ' more heads' : '')));
      svg.appendChild(line);
    }
    for (const [l, i, w] of g.mlps) {
      const s = 4 + 10 * w;
      const sq = svgEl('rect', { x: x(i) + 7, y: (y(l) + y(l + 1)) / 2 - s / 2, width: s, height: s, fill: 'var(--gen)',
        'fill-opacity': (0.35 + 0.6 * w).toFixed(3), 'class': 'flow-mlp' });
      sq.appendChild(svgEl('title', {}, 'layer ' + l + ' MLP at token ' + i + ' ' + fmt(w)));
      svg.appendChild(sq);
    }
    for (const k of g.nodes) {
      const [b, i] = k.split(',').map(Number);
      svg.appendChild(svgEl('circle', { cx: x(i), cy: y(b), r: b === hi + 1 ? 5 : 3.5, fill: 'var(--panel)', stroke: 'var(--ink-2)', 'stroke-width': 1.5 }));
    }
    const keep = wrap.scrollLeft;
    wrap.textContent = '';
    wrap.appendChild(svg);
    wrap.scrollLeft = keep;
  }
  range.addEventListener('input', draw);
  draw();
  /* the output token in sight when the graph is wider than the panel */
  wrap.scrollLeft = Math.max(0, x(flow.position) - wrap.clientWidth / 2);
  return null;
}

Views.register({
  id: 'flow',
  order: 8,
  label: 'Flow',
  uses: { layer: false, mode: false, heads: false, merge: false, contrast: false },
  picksHead: () => false,
  draw: host => FlowView(host),
  exportTitle: m => m + ' · information flow',
  unavailable: () => (Data.meta.flow && Array.isArray(Data.meta.flow.edges) ? null
    : 'The flow graph needs a causal model run with --flow'),
});
})();
