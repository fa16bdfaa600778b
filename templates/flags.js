/* flags.js — what the page warns a reader of raw attention about (flags.h,
 * the document's sinks_summary and massive_activations): sink heads marked on
 * the head chips and the model view's thumbnails, a note saying what a sink
 * is (and that the Hide sink / Hide [CLS]/[SEP] toggle renormalizes without
 * it), a note on the stream's massive activations, and, for models with
 * learned sinks (gpt-oss), a toggle that renormalizes each row over the keys
 * alone (Data.renormSinks). page.js calls Flags.init once and Flags.refresh
 * after each draw. Uses Data (meta, layers, heads, perLayer, stacked). */
/* global Data, Draw, Fmt */
/* exported Flags */

const Flags = (() => {
const meta = Data.meta;
const S = !Data.stacked && meta.sinks_summary && Array.isArray(meta.sinks_summary.first) ? meta.sinks_summary : null;
const M = !Data.stacked && meta.massive_activations && Array.isArray(meta.massive_activations.entries) ? meta.massive_activations : null;

/* selected layer li, head h: the share of its weight on the sink (first token, plus a learned sink) */
function share(li, h) {
  if (!S || !S.first[li] || S.first[li][h] === undefined) return null;
  return S.first[li][h] + (Array.isArray(S.learned_share) ? S.learned_share[li][h] : 0);
}
const isSink = (li, h) => { const v = share(li, h); return v !== null && v >= S.threshold; };
const pct = x => Math.round(100 * x) + '%';
const firstName = () => (S ? Fmt.visible(S.first_token.display || S.first_token.token || '') : '');

function sinkNote(notes) {
  if (!S) return;
  const d = Draw.el('div', 'note info flags-note');
  d.id = 'sinks-note';
  /* a model with learned sinks has its own "Attention sinks" note (page.js): this one counts the heads */
  d.appendChild(Draw.el('strong', null, meta.config.attention_sinks ? 'Sink heads: ' : 'Attention sinks: '));
  const past = S.past_heads ? S.past_sink_heads + ' of the ' + S.past_heads + ' heads from layer ' + S.past_layer + ' on (' +
    pct(S.past_share) + ')' : S.count + ' of ' + S.heads + ' heads';
  const where = S.learned ? 'on the first token “' + firstName() + '” or their learned sink logit' : 'on the first token “' + firstName() + '”';
  d.appendChild(document.createTextNode(past + ' put at least ' + pct(S.threshold) + ' of their weight ' + where +
    ' (marked “sink” on the head chips and in the model view). A sink is where a head parks the attention it has no use ' +
    'for (Xiao et al. 2024): its weight there says little about that token. '));
  const hide = document.getElementById('hide-special-text');
  d.appendChild(document.createTextNode((hide ? '“' + hide.textContent.trim() + '” renormalizes each row without it' : '') +
    (S.learned ? '; “Without learned sinks” renormalizes each row over the keys alone.' : '.')));
  notes.appendChild(d);
  Draw.fold(d); /* one line until clicked, as the page's other notes */
}

function massiveNote(notes) {
  if (!M || !M.entries.length) return;
  /* per dimension and position: the layers it spans and its largest entry */
  const by = new Map();
  for (const x of M.entries) {
    const k = x.dim + ':' + x.position;
    const g = by.get(k) || { dim: x.dim, pos: x.position, text: x.display || x.token, lo: x.layer, hi: x.layer, top: x };
    g.lo = Math.min(g.lo, x.layer);
    g.hi = Math.max(g.hi, x.layer);
    if (Math.abs(x.value) > Math.abs(g.top.value)) g.top = x;
    by.set(k, g);
  }
  const groups = [...by.values()].sort((a, b) => Math.abs(b.top.value) - Math.abs(a.top.value));
  const d = Draw.el('div', 'note info flags-note');
  d.id = 'massive-note';
  d.appendChild(Draw.el('strong', null, 'Massive activations: '));
  const span = g => (g.lo === g.hi ? 'layer ' + g.lo : 'layers ' + g.lo + '–' + g.hi).replace('layer -1', 'the embeddings');
  const show = groups.slice(0, 3).map(g => 'dimension ' + g.dim + ' on token ' + g.pos + ' “' + Fmt.visible(g.text) + '” reaches ' +
    Math.round(g.top.value).toLocaleString('en-US') + ' (' + Math.round(g.top.ratio).toLocaleString('en-US') + '× the median |x|) in ' + span(g));
  d.appendChild(document.createTextNode(show.join('; ') + (groups.length > 3 ? '; and ' + (groups.length - 3) + ' more' : '') +
    '. A few entries of the residual stream 1,000× its median (Sun et al. 2024) act as fixed biases, and the tokens holding them ' +
    'tend to be the attention sinks.'));
  notes.appendChild(d);
  Draw.fold(d); /* one line until clicked, as the page's other notes */
}

/* notes: the page's notes; controls: the controls bar; redraw(): render again */
function init(notes, controls, redraw) {
  sinkNote(notes);
  massiveNote(notes);
  if (!Data.hasSinks || !controls) return;
  const lab = Draw.el('label', 'check');
  lab.id = 'renorm-sinks-label';
  lab.title = 'Learned sinks (gpt-oss) take a share of each row that no key gets: divide each row by what its keys got, ' +
    'so the keys\' weights sum to 1';
  const box = Draw.el('input');
  box.type = 'checkbox';
  box.id = 'renorm-sinks';
  box.addEventListener('change', () => { Data.renormSinks = box.checked; redraw(); });
  lab.appendChild(box);
  lab.appendChild(document.createTextNode(' Without learned sinks'));
  const hide = document.getElementById('hide-special-label');
  if (hide && hide.parentNode) hide.parentNode.insertBefore(lab, hide.nextSibling);
  else controls.appendChild(lab);
}

/* After a draw: the sink marks on the chips (of the shown layer li) and the model view's thumbnails. */
function refresh(view, li) {
  if (!S) return;
  const mark = (el, on, v) => {
    el.classList.toggle('sink', on);
    if (on) el.dataset.sinkShare = pct(v);
    else delete el.dataset.sinkShare;
  };
  const perLayer = Data.perLayer;
  document.querySelectorAll('#head-chips .head-chip').forEach(b => {
    const h = +b.dataset.h, v = share(li, h);
    mark(b, !perLayer && isSink(li, h), v);
    if (isSink(li, h) && !/sink/.test(b.title)) b.title += '\nSink head: ' + pct(v) + ' of its weight on the sink.';
  });
  if (view && view.id === 'model' && !perLayer)
    document.querySelectorAll('#view-model .thumb[data-li][data-h]').forEach(b => {
      const l = +b.dataset.li, h = +b.dataset.h;
      mark(b, isSink(l, h), share(l, h));
    });
}

return { init, refresh, isSink, share };
})();
