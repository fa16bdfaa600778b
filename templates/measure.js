/* measure.js — the measure switch of a page written with --measure norm, alti
 * or rollout (or of attnviz serve --measure norm's live page): which copy of
 * the attention every view draws (Data.setMeasure). Norm-weighted is
 * value-weighted attention (Kobayashi et al. 2020, "Attention is not only a
 * weight"): ||a_ij f_h(x_j)||, f_h(x_j) token j's value vector through head h's
 * slice of the output projection, shown as each query row's shares (the row
 * divided by its sum) so that the views draw it as they draw weights. ALTI
 * (Ferrando et al. 2022) and rollout (Abnar & Zuidema 2020) are one matrix per
 * layer, how much each input token makes up each token after that layer
 * (docs/measures.md): the views draw it once per layer, the heads and the
 * Heads/Mean/Max/Rollout mode set aside. Key W steps through the measures; the
 * Compare view (view_compare.js) draws them all side by side.
 * page.js calls Measure.initial, Measure.init once and Measure.refresh after
 * each draw. Uses Data (measures, measure, setMeasure, perLayer). */
/* global Data, Draw, SIGNAL */
/* exported Measure */

const Measure = (() => {
const LABEL = { attention: 'Attention', norm: 'Norm-weighted', alti: 'ALTI', rollout: 'Rollout' };
const TITLE = {
  attention: 'The attention weights a_ij: where each head looks (W)',
  norm: 'Value-weighted attention (Kobayashi et al. 2020): ||a_ij f(x_j)||, the weight times the norm of token j\'s value ' +
    'through the head\'s slice of the output projection, as each row\'s shares: how much each token moves the head\'s output (W)',
  alti: 'ALTI (Ferrando et al. 2022): how much each input token makes up each token after this layer, through every ' +
    'head, the residual connection and the layer norm, multiplied through the layers below (W)',
  rollout: 'Attention rollout (Abnar & Zuidema 2020): the heads\' mean attention with the residual as 0.5 A + 0.5 I, ' +
    'rows renormalized, multiplied through the layers up to this one (W)',
};
const NOTE = {
  norm: 'Norm-weighted: each row shows the shares of ||a·f(x)|| (weight × the key\'s value norm through the ' +
    'output projection), not the attention weights; --json\'s norm_attention holds the unnormalized norms.',
  alti: 'ALTI: row i is how much each input token contributes to token i after this layer (every head, the residual ' +
    'and the layer norm; rows sum to 1), not where a head looks; one matrix per layer, so the heads and the mode do not apply.',
  rollout: 'Rollout: row i is the attention of token i after this layer traced back to the input tokens (heads ' +
    'averaged, residual as 0.5 A + 0.5 I, multiplied through the layers); one matrix per layer, so the heads and the mode do not apply.',
};
const TAG = { norm: 'norm-weighted', alti: 'ALTI', rollout: 'rollout' };
let box = null, onChange = null, chosen = () => Data.measure;

/* The measure a (re)booted page shows: the reader's last choice, else the one the page was written with. */
function initial(prev) {
  const has = Data.measures;
  if (prev && has.includes(prev.measure)) return prev.measure;
  return has.find(k => k !== 'attention') || 'attention';
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
  seg.setAttribute('aria-label', 'Attention or ' + Data.measures.filter(k => k !== 'attention').map(k => LABEL[k] || k).join(' / ') + ' (W)');
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
    if ((ev.key === 'w' || ev.key === 'W') && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
      const ks = Data.measures;
      set(ks[(ks.indexOf(chosen()) + 1) % ks.length]);
    }
  }, { signal: SIGNAL });
}

/* After a draw of view: the switch's state (the reader's choice; disabled where the view
 * explains the attention itself), the view's title says what it draws, and a per-layer
 * measure sets the heads and the mode aside. */
function refresh(view) {
  document.body.dataset.measure = Data.measure;
  /* a view that draws every measure itself (the Compare view) keeps the heads, and says no one measure */
  const all = !!(view && view.allMeasures);
  const perLayer = Data.perLayer && !(view && view.attentionOnly) && !all;
  document.body.classList.toggle('per-layer-measure', perLayer);
  document.querySelectorAll('#mode-seg [data-mode]').forEach(b => {
    if (perLayer) b.disabled = true;
    else if (b.dataset.perLayerOff) b.disabled = false;
    if (perLayer) b.dataset.perLayerOff = '1';
    else delete b.dataset.perLayerOff;
  });
  const modeBox = document.getElementById('ctl-mode');
  if (modeBox) modeBox.title = perLayer ? LABEL[Data.measure] + ' is one matrix per layer, every head together: no mode' : '';
  if (!box) return;
  const only = !!(view && view.attentionOnly);
  box.querySelectorAll('[data-measure]').forEach(b => {
    b.setAttribute('aria-checked', b.dataset.measure === chosen() ? 'true' : 'false');
    b.disabled = only;
  });
  box.title = only ? 'The ' + (view.label || 'view').toLowerCase() + ' explains the attention itself (softmax of q·k): ' +
    'the other measures do not apply' : '';
  const m = Data.measure;
  if (m === 'attention' || !NOTE[m] || all) return;
  document.querySelectorAll('.view-title').forEach(t => {
    const h2 = t.querySelector('h2');
    if (!h2 || h2.querySelector('.measure-tag')) return;
    const tag = Draw.el('span', 'measure-tag', TAG[m]);
    tag.title = NOTE[m];
    h2.appendChild(tag);
    t.appendChild(Draw.el('span', 'sub measure-note', NOTE[m]));
  });
}

return { initial, init, refresh, set, LABEL, NOTE, TITLE };
})();
