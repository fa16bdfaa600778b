/* view_attribution.js — direct logit attribution (attnviz --attribution /
 * --target) and head ablation (--ablate): for a chosen position, a layer x
 * head grid of each head's direct share of the target token's logit (the
 * final norm's scale frozen), each MLP's share beside it, and the
 * prediction it explains; then the ablation grid (the change in the target's
 * log-probability when a head is zeroed or mean-ablated) with the heads that
 * matter most ranked. Reads Data.meta.attribution, ablation, predictions
 * (src/out/lens_out.c, json_out.c); token text is only ever set as text. */
/* global Data, Draw, Views */

(() => {

const shown = s => (s === '' ? '∅' : s.replace(/\n/g, '↵').replace(/\t/g, '⇥'));

/* blue for positive, red for negative, alpha by |v| / max */
function shade(v, max) {
  if (v === null || v === undefined || !isFinite(v)) return 'transparent';
  const a = (0.08 + 0.72 * Math.min(1, Math.abs(v) / (max || 1))).toFixed(3);
  return v >= 0 ? 'rgba(53, 89, 214, ' + a + ')' : 'rgba(214, 64, 53, ' + a + ')';
}

/* A layer x head grid of values (null: none), plus an extra column (MLP) when given. */
function grid(values, extra, extraLabel, fmt) {
  const L = values.length, H = values[0].length;
  let max = 0;
  for (const row of values) for (const v of row) if (v !== null && isFinite(v)) max = Math.max(max, Math.abs(v));
  if (extra) for (const v of extra) if (v !== null && isFinite(v)) max = Math.max(max, Math.abs(v));
  const g = Draw.el('div');
  g.style.display = 'grid';
  g.style.gridTemplateColumns = '40px repeat(' + H + ', minmax(44px, 1fr))' + (extra ? ' 12px minmax(52px, 1fr)' : '');
  g.style.gap = '2px';
  g.style.fontSize = '11px';
  g.style.fontFamily = 'var(--mono)';
  g.style.maxWidth = Math.min(1200, 60 + (H + (extra ? 2 : 0)) * 56) + 'px';
  const cell = (txt, bg, tip) => {
    const c = Draw.el('div', null, txt);
    c.style.textAlign = 'center';
    c.style.padding = '3px 0';
    c.style.borderRadius = '3px';
    c.style.background = bg;
    if (tip) c.title = tip;
    g.appendChild(c);
  };
  cell('', 'transparent');
  for (let h = 0; h < H; h++) cell('H' + h, 'transparent');
  if (extra) cell('', 'transparent'), cell(extraLabel, 'transparent');
  for (let l = L - 1; l >= 0; l--) {
    cell('L' + l, 'transparent');
    for (let h = 0; h < H; h++) {
      const v = values[l][h];
      cell(v === null ? '' : fmt(v), shade(v, max), v === null ? 'layer ' + l + ' head ' + h + ': not ablated' : 'layer ' + l + ' head ' + h + ': ' + v);
    }
    if (extra) cell('', 'transparent'), cell(fmt(extra[l]), shade(extra[l], max), 'layer ' + l + ' MLP: ' + extra[l]);
  }
  return g;
}

/* the grids and their side notes, side by side */
function flexRow() {
  const box = Draw.el('div');
  Object.assign(box.style, { display: 'flex', gap: '24px', flexWrap: 'wrap', alignItems: 'flex-start' });
  return box;
}

const f2 = v => (Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));

function AttributionView(host, c) {
  const meta = Data.meta, attr = meta.attribution, abl = meta.ablation;
  const toks = meta.display_tokens || meta.tokens;
  host.textContent = '';
  const ttl = Draw.el('div', 'view-title');
  ttl.appendChild(Draw.el('h2', null, 'Attribution'));
  ttl.appendChild(Draw.el('span', 'sub', 'Each head\'s and each MLP\'s direct contribution to the target token\'s logit, through the ' +
    'final norm\'s scale frozen (TransformerLens\'s stack_head_results with apply_ln). Blue raises the logit, red lowers it.'));
  host.appendChild(ttl);
  if (attr && attr.positions.length) {
    const positions = attr.positions;
    const bar = Draw.el('div');
    bar.style.margin = '0 0 10px';
    const lab = Draw.el('label', null, 'Position ');
    const sel = Draw.el('select');
    positions.forEach((e, i) => {
      const o = Draw.el('option', null, e.position + ': ' + shown(toks[e.position] || '') + ' → ' + shown(e.display || e.token));
      o.value = String(i);
      sel.appendChild(o);
    });
    const start = c && c.pin !== null && c.pin !== undefined ? positions.findIndex(e => e.position === c.pin) : -1;
    sel.value = String(start >= 0 ? start : positions.length - 1);
    lab.appendChild(sel);
    bar.appendChild(lab);
    host.appendChild(bar);
    const box = flexRow();
    host.appendChild(box);
    const show = () => {
      const e = positions[+sel.value];
      box.textContent = '';
      box.appendChild(grid(e.heads, e.mlp, 'MLP', f2));
      const side = Draw.el('div');
      side.style.minWidth = '220px';
      side.appendChild(Draw.el('div', null, 'Target after "' + shown(toks[e.position] || '') + '" (position ' + e.position + '):'));
      const t = Draw.el('div', null, shown(e.display || e.token) + '  (id ' + e.target_id + ')');
      t.style.fontFamily = 'var(--mono)';
      t.style.fontWeight = '650';
      t.style.margin = '4px 0 8px';
      side.appendChild(t);
      let heads = 0, mlp = 0;
      e.heads.forEach(r => r.forEach(v => { heads += v; }));
      e.mlp.forEach(v => { mlp += v; });
      side.appendChild(Draw.el('div', null, 'logit ' + f2(e.logit) + ' = heads ' + f2(heads) + ' + MLPs ' + f2(mlp) + ' + embeddings and biases ' + f2(e.other)));
      const pred = Array.isArray(meta.predictions) ? meta.predictions.find(p => p.position === e.position) : null;
      if (pred) {
        side.appendChild(Draw.el('div', null, 'The model predicts:'));
        for (const x of pred.top) {
          const d = Draw.el('div', null, shown(x.display || x.token) + '  ' + (x.prob * 100).toFixed(2) + '%');
          d.style.fontFamily = 'var(--mono)';
          side.appendChild(d);
        }
      }
      box.appendChild(side);
    };
    sel.addEventListener('change', show);
    show();
  }
  if (abl) {
    const h = Draw.el('div', 'view-title');
    h.style.marginTop = '18px';
    h.appendChild(Draw.el('h2', null, 'Head ablation'));
    h.appendChild(Draw.el('span', 'sub', 'Change in log p("' + shown(abl.display || abl.token) + '") after "' + shown(toks[abl.position] || '') +
      '" (position ' + abl.position + ', clean ' + abl.base_logprob.toFixed(3) + ') when a head\'s output is ' +
      (abl.mode === 'mean' ? 'replaced by its mean over the input' : 'zeroed') + '. Red: the head helped this prediction.'));
    host.appendChild(h);
    const box = flexRow();
    box.appendChild(grid(abl.effects, null, '', f2));
    const ranked = [];
    abl.effects.forEach((r, l) => r.forEach((v, hh) => { if (v !== null && isFinite(v)) ranked.push([v, l, hh]); }));
    ranked.sort((a, b) => Math.abs(b[0]) - Math.abs(a[0]));
    const side = Draw.el('div');
    side.appendChild(Draw.el('div', null, 'Heads that matter most:'));
    for (const [v, l, hh] of ranked.slice(0, 10)) {
      const d = Draw.el('div', null, 'L' + l + ' H' + hh + '  ' + (v >= 0 ? '+' : '') + v.toFixed(4));
      d.style.fontFamily = 'var(--mono)';
      side.appendChild(d);
    }
    box.appendChild(side);
    host.appendChild(box);
  }
  return null;
}

Views.register({
  id: 'attribution',
  order: 7,
  label: 'Attribution',
  uses: { layer: false, mode: false, heads: false, merge: false, contrast: false },
  picksHead: () => false,
  draw: (host, c) => AttributionView(host, c),
  exportTitle: m => m + ' · attribution',
  unavailable: () => ((Data.meta.attribution && Data.meta.attribution.positions.length) || Data.meta.ablation ? null
    : 'Attribution needs a causal model run with --predict K --attribution (or --target), or --ablate'),
});
})();
