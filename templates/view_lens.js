/* view_lens.js — the logit lens (attnviz --logit-lens K): a layer x position
 * table of what the residual stream after each captured layer predicts
 * through the final norm and the unembedding: the top token, its
 * probability (the cell's shade) and the rank there of the model's final
 * prediction; hovering a cell lists its top K. Reads Data.meta.logit_lens,
 * logit_lens_layers and logit_lens_final (src/out/lens_out.c); token text is
 * only ever set as text. */
/* global Data, Draw, Views */

(() => {

const shown = s => (s === '' ? '∅' : s.replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/ /g, '·'));
const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + '…' : s);

function LensView(host) {
  const meta = Data.meta;
  const lens = meta.logit_lens, layers = meta.logit_lens_layers, fin = meta.logit_lens_final;
  const toks = meta.display_tokens || meta.tokens;
  host.textContent = '';
  const ttl = Draw.el('div', 'view-title');
  ttl.appendChild(Draw.el('h2', null, 'Logit lens'));
  ttl.appendChild(Draw.el('span', 'sub', 'What the residual stream after each layer predicts as the next token, read through the ' +
    'final norm and the unembedding. Cell: the top token; shade: its probability; the number: the rank there of the ' +
    'model\'s final prediction (bottom row; 0 = already on top). Hover a cell for its top ' + (lens[0] && lens[0][0] ? lens[0][0].top.length : 0) + '.'));
  host.appendChild(ttl);
  const wrap = Draw.el('div');
  wrap.style.overflow = 'auto';
  wrap.style.maxHeight = '75vh';
  const table = Draw.el('table', 'lens-table');
  table.style.borderCollapse = 'collapse';
  table.style.fontSize = '12px';
  table.style.fontFamily = 'var(--mono)';
  const cellStyle = td => {
    td.style.border = '1px solid var(--line)';
    td.style.padding = '2px 4px';
    td.style.whiteSpace = 'nowrap';
    td.style.textAlign = 'center';
  };
  const head = Draw.el('tr');
  const corner = Draw.el('th', null, 'layer');
  cellStyle(corner);
  head.appendChild(corner);
  for (let p = 0; p < toks.length; p++) {
    const th = Draw.el('th', null, clip(shown(toks[p]), 10));
    th.title = p + ': ' + toks[p];
    cellStyle(th);
    th.style.position = 'sticky';
    th.style.top = '0';
    th.style.background = 'var(--panel-2)';
    head.appendChild(th);
  }
  table.appendChild(head);
  /* the last layer on top, as the stream flows upwards */
  for (let i = lens.length - 1; i >= 0; i--) {
    const tr = Draw.el('tr');
    const lab = Draw.el('th', null, 'L' + layers[i]);
    cellStyle(lab);
    tr.appendChild(lab);
    for (let p = 0; p < lens[i].length; p++) {
      const e = lens[i][p], top = e.top[0];
      const td = Draw.el('td');
      cellStyle(td);
      td.appendChild(Draw.el('div', null, clip(shown(top.display || top.token), 10)));
      const sm = Draw.el('div', null, (top.prob * 100).toFixed(top.prob >= 0.1 ? 0 : 1) + '% · ' + e.rank);
      sm.style.fontSize = '10px';
      sm.style.color = 'var(--muted)';
      td.appendChild(sm);
      td.style.background = 'rgba(53, 89, 214, ' + (0.08 + 0.6 * top.prob).toFixed(3) + ')';
      if (top.id === fin[p].id) td.style.fontWeight = '650';
      td.title = 'layer ' + layers[i] + ', after "' + toks[p] + '"\n' +
        e.top.map(x => (x.display || x.token) + '  ' + (x.prob * 100).toFixed(2) + '%').join('\n') +
        '\nfinal prediction "' + (fin[p].display || fin[p].token) + '": rank ' + e.rank + ', ' + (e.final_prob * 100).toFixed(2) + '%';
      tr.appendChild(td);
    }
    table.appendChild(tr);
  }
  const tf = Draw.el('tr');
  const fl = Draw.el('th', null, 'final');
  cellStyle(fl);
  tf.appendChild(fl);
  for (let p = 0; p < fin.length; p++) {
    const td = Draw.el('td', null, clip(shown(fin[p].display || fin[p].token), 10));
    cellStyle(td);
    td.style.fontWeight = '650';
    tf.appendChild(td);
  }
  table.appendChild(tf);
  wrap.appendChild(table);
  host.appendChild(wrap);
  return null;
}

Views.register({
  id: 'lens',
  order: 6,
  label: 'Logit lens',
  uses: { layer: false, mode: false, heads: false, merge: false, contrast: false },
  picksHead: () => false,
  draw: host => LensView(host),
  exportTitle: m => m + ' · logit lens',
  unavailable: () => (Array.isArray(Data.meta.logit_lens) && Data.meta.logit_lens.length ? null
    : 'The logit lens needs a causal model run with --logit-lens K'),
});
})();
