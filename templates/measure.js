/* measure.js — the Attention / Norm-weighted switch of a page written with
 * --measure norm (or of attnviz serve --measure norm's live page): which copy of
 * the attention every view draws (Data.setMeasure). Norm-weighted is
 * value-weighted attention (Kobayashi et al. 2020, "Attention is not only a
 * weight"): ||a_ij f_h(x_j)||, f_h(x_j) token j's value vector through head h's
 * slice of the output projection, shown as each query row's shares (the row
 * divided by its sum) so that the views draw it as they draw weights. Key W
 * flips it. page.js calls Measure.initial, Measure.init once and
 * Measure.refresh after each draw. Uses Data (measures, measure, setMeasure). */
/* global Data, Draw, SIGNAL */
/* exported Measure */

const Measure = (() => {
const LABEL = { attention: 'Attention', norm: 'Norm-weighted' };
const TITLE = {
  attention: 'The attention weights a_ij: where each head looks (W)',
  norm: 'Value-weighted attention (Kobayashi et al. 2020): ||a_ij f(x_j)||, the weight times the norm of token j\'s value ' +
    'through the head\'s slice of the output projection, as each row\'s shares: how much each token moves the head\'s output (W)',
};
const NOTE = 'Norm-weighted: each row shows the shares of ||a·f(x)|| (weight × the key\'s value norm through the ' +
  'output projection), not the attention weights; --json\'s norm_attention holds the unnormalized norms.';
let box = null, onChange = null, chosen = () => Data.measure;

/* The measure a (re)booted page shows: the reader's last choice, else norm when the page has it. */
function initial(prev) {
  const has = Data.measures;
  if (prev && has.includes(prev.measure)) return prev.measure;
  return has.includes('norm') ? 'norm' : 'attention';
}

function set(k) {
  if (!Data.measures.includes(k) || k === chosen()) return Promise.resolve();
  return onChange(k);
}

/* host: the controls bar; change(k) switches (sets the state and redraws; page.js's render
 * hands the views the chosen measure unless the view is attentionOnly); now() the chosen one. */
function init(host, change, now) {
  onChange = change;
  chosen = now;
  if (Data.measures.length < 2) return;
  box = Draw.el('div', 'ctl');
  box.id = 'ctl-measure';
  box.appendChild(Draw.el('span', 'ctl-label', 'Measure'));
  const seg = Draw.el('div', 'seg');
  seg.id = 'measure-seg';
  seg.setAttribute('role', 'radiogroup');
  seg.setAttribute('aria-label', 'Attention or value-weighted (norm) attention (W)');
  for (const k of Data.measures) {
    const b = Draw.el('button', null, LABEL[k] || k);
    b.type = 'button';
    b.setAttribute('role', 'radio');
    b.dataset.measure = k;
    b.title = TITLE[k] || k;
    b.addEventListener('click', () => set(k));
    seg.appendChild(b);
  }
  box.appendChild(seg);
  host.insertBefore(box, host.firstChild);
  document.addEventListener('keydown', ev => {
    if (ev.target && /^(SELECT|INPUT|TEXTAREA)$/.test(ev.target.tagName)) return;
    if ((ev.key === 'w' || ev.key === 'W') && !ev.ctrlKey && !ev.metaKey && !ev.altKey)
      set(chosen() === 'norm' ? 'attention' : 'norm');
  }, { signal: SIGNAL });
}

/* After a draw of view: the switch's state (the reader's choice; disabled where the view
 * explains the attention itself), and the view's title says what it draws. */
function refresh(view) {
  document.body.dataset.measure = Data.measure;
  if (!box) return;
  const only = !!(view && view.attentionOnly);
  box.querySelectorAll('[data-measure]').forEach(b => {
    b.setAttribute('aria-checked', b.dataset.measure === chosen() ? 'true' : 'false');
    b.disabled = only;
  });
  box.title = only ? 'The ' + (view.label || 'view').toLowerCase() + ' explains the attention itself (softmax of q·k): ' +
    'norm weighting does not apply' : '';
  if (Data.measure !== 'norm') return;
  document.querySelectorAll('.view-title').forEach(t => {
    const h2 = t.querySelector('h2');
    if (!h2 || h2.querySelector('.measure-tag')) return;
    const tag = Draw.el('span', 'measure-tag', 'norm-weighted');
    tag.title = NOTE;
    h2.appendChild(tag);
    t.appendChild(Draw.el('span', 'sub measure-note', NOTE));
  });
}

return { initial, init, refresh, set, LABEL, NOTE };
})();
