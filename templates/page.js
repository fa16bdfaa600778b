/* page.js — state, controls and the glue between the views. Sets
 * document.body.dataset.ready = "1" once the first view is drawn and
 * dataset.loaded = "1" when every layer is decoded (a live page, booted again
 * for every run by live.js, sets ready per run and never loaded: it fetches
 * what a view shows). window.attnviz is a small scripting/testing interface
 * (state, export, view switching; dispose() for the next boot). */
/* global Data, Tok, Fmt, Rollout, Derived, Tip, Draw, Views, Pred, Heads, Tiles, Measure, Flags, Explain, PREV, SIGNAL */

/* ---------------------------------------------------------------- views */

/* This page's views in tab order (keys 1..n): each templates/view_*.js
 * registers its own (views.js says what an entry has). */
const VIEWS = Views.list();
const viewOf = id => VIEWS.find(v => v.id === id);
const unavailable = v => (v.unavailable ? v.unavailable() : null);

const $ = id => document.getElementById(id);
const meta = Data.meta;
const T0 = performance.now();

/* ---------------------------------------------------------------- state */

const S = {
  view: 'head',
  layer: 0,                         /* index into Data.layers */
  active: new Array(Data.H).fill(true),
  focus: 0,                         /* index into Data.heads, for matrix/neuron */
  mode: 'heads',
  filter: 'all',
  hide: false,
  merge: false,
  gamma: 1,
  query: 1,                         /* neuron view: raw token index */
  stack: 0,                         /* index into Data.stacks (encoder-decoder pages: encoder, decoder, cross) */
  pin: -1,                          /* generated token picked by the step control (raw index), -1: none */
};
{
  const li = meta.layers.indexOf(meta.init_layer);
  S.layer = li >= 0 ? li : 0;
  const hi = meta.heads.indexOf(meta.init_head);
  if (meta.init_head >= 0 && hi >= 0) {
    S.active.fill(false);
    S.active[hi] = true;
    S.focus = hi;
  }
  /* a long input opens on its last query (the head view shows one row at a time) */
  S.query = Tiles.on ? Data.n - 1 : Math.min(Data.n - 1, Data.n > 2 ? 1 : 0);
  /* attnviz render's --heads-shown (bertviz's heads=[...]) and --view */
  if (Array.isArray(meta.init_heads) && meta.init_heads.some(h => meta.heads.includes(h))) {
    S.active.fill(false);
    meta.init_heads.forEach(h => { const i = meta.heads.indexOf(h); if (i >= 0) S.active[i] = true; });
    S.focus = S.active.indexOf(true);
  }
  if (typeof meta.init_view === 'string' && viewOf(meta.init_view) && !unavailable(viewOf(meta.init_view))) S.view = meta.init_view;
}
/* A live page boots again for every run (live.js): the reader's choices carry
 * over where the new document has them (same layers, heads, view). */
if (PREV && PREV.state) {
  const P = PREV.state;
  if (viewOf(P.view) && !unavailable(viewOf(P.view))) S.view = P.view;
  if (P.layer < Data.L) S.layer = P.layer;
  if (P.active.length === Data.H && P.active.some(Boolean)) S.active = P.active.slice();
  if (P.focus < Data.H) S.focus = P.focus;
  S.mode = P.mode;
  S.hide = P.hide;
  S.merge = P.merge;
  S.gamma = P.gamma;
  S.query = Math.max(0, Math.min(Data.n - 1, P.query));
  if (P.filter === 'all' || (meta.sentence_b_start !== null && meta.sentence_b_start !== undefined)) S.filter = P.filter;
  $('contrast').checked = S.gamma !== 1;
}
/* A long live input: each selected head is an n x n block to fetch and draw;
 * past a budget only the focused head stays selected (the chips add others). */
const LIVE_CELLS = 24e6;
if (Data.live && S.active.filter(Boolean).length * Data.n * Data.n > LIVE_CELLS) {
  if (!S.active[S.focus]) S.focus = Math.max(0, S.active.indexOf(true));
  S.active.fill(false);
  S.active[S.focus] = true;
}
/* --measure norm: which copy of the attention the views draw (measure.js) */
S.measure = Measure.initial(PREV && PREV.state);
Data.setMeasure(S.measure);
const hasB = meta.sentence_b_start !== null && meta.sentence_b_start !== undefined;
const activeHeads = () => S.active.map((a, h) => (a ? h : -1)).filter(h => h >= 0);

/* ---------------------------------------------------------------- theme */

function setTheme(name) {
  document.documentElement.dataset.theme = name;
  $('theme-label').textContent = name === 'dark' ? 'Light' : 'Dark';
}
setTheme(PREV && PREV.theme ? PREV.theme : meta.theme === 'dark' || meta.theme === 'light' ? meta.theme
         : window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');

/* ---------------------------------------------------------------- header */

function fmtInt(v) { return Number(v).toLocaleString('en-US'); }
(function header() {
  const c = meta.config;
  $('model-name').textContent = meta.model || 'model';
  $('model-dtype').textContent = meta.dtype || '';
  if (!meta.dtype) $('model-dtype').hidden = true;
  $('model-causal').hidden = !Data.causal || Data.stacked;
  /* attention given to attnviz render: its config knows layers and heads (and q/k's size) only */
  const given = Data.stacked || c.model_type === 'external';
  const known = v => !given || (v && v !== 'unknown');
  const parts = [
    c.model_type === 'external' ? 'attention given to attnviz render' : c.model_type ? c.model_type.toUpperCase() : null,
    c.layers + ' layers', c.heads + ' heads',
    c.kv_heads ? c.kv_heads + ' key/value heads (grouped)' : null,
    known(c.hidden_size) ? 'hidden ' + c.hidden_size : null, known(c.head_dim) ? 'd_head ' + c.head_dim : null,
    known(c.intermediate_size) ? 'FFN ' + c.intermediate_size : null, known(c.hidden_act) ? c.hidden_act : null,
    /* a vision encoder reads patches: its image and patch sizes, not a vocabulary */
    c.vision ? 'image ' + c.image_size + ' px' : known(c.vocab_size) ? 'vocab ' + fmtInt(c.vocab_size) : null,
    c.vision ? 'patch ' + c.patch_size + ' px' : !given ? 'max ' + c.max_position_embeddings + ' positions' : null,
    c.positions === 'rotary' ? 'rotary positions' : null,
    c.sliding_window ? (c.sliding_window_bidirectional ? 'local window ±' + (c.sliding_window - 1) : 'sliding window ' + c.sliding_window) +
      ' (layers ' + c.sliding_layers.join(', ') + ')' : null,
    c.attn_logit_softcapping ? 'scores soft-capped at ' + c.attn_logit_softcapping : null,
  ].filter(Boolean);
  $('model-config').textContent = parts.join(' · ');
  $('model-config').title = JSON.stringify(c, null, 1);

  const il = $('input-line');
  const addRow = (tag, text, extra) => {
    const r = Draw.el('div', 'row');
    r.dataset.tag = tag;
    r.appendChild(Draw.el('span', 'tag', tag));
    r.appendChild(Draw.el('span', 'txt', text));
    if (extra) r.appendChild(Draw.el('span', 'meta', extra));
    il.appendChild(r);
  };
  if (Data.stacked) {
    /* encoder-decoder: each side's tokens as text */
    if (meta.text) addRow('Input', meta.text);
    for (const sd of Object.values(Data.sides)) {
      addRow(sd.name[0].toUpperCase() + sd.name.slice(1), sideText(sd),
        sd.n + ' tokens (' + sd.special.filter(Boolean).length + ' special)');
    }
  } else if (meta.image) {
    /* an image run: the picture (and a whole CLIP/SigLIP model's text) */
    const im = meta.image;
    addRow('Image', im.file.replace(/^.*\//, ''), im.size[0] + ' × ' + im.size[1] + ' ' + im.mode + ', preprocessed to ' +
      im.preprocessed[0] + ' × ' + im.preprocessed[1]);
    if (im.text) addRow('Text', meta.text || '', im.text.tokens.length + ' tokens');
    const nImg = im.image_tokens.length, nText = Data.n - nImg;
    /* a vision-language model: the picture's tokens inside the decoder's sequence, where the text put them */
    if (im.vision) addRow('Text', meta.text || '', nText + ' text tokens around the picture\'s ' + nImg);
    addRow('Tokens', im.vision ? Data.n + ' (' + nImg + ' image tokens: ' + im.grid.rows + ' × ' + im.grid.cols +
      ' patches from position ' + im.first_patch + '; vision tower: ' + im.vision.tokens + ' tokens × ' + im.vision.layers +
      ' layers, its hidden state ' + im.vision.feature_layer + ' projected)'
      : Data.n + ' (' + im.grid.rows + ' × ' + im.grid.cols + ' patches' +
      (Data.n > im.grid.rows * im.grid.cols ? ' after ' + (Data.n - im.grid.rows * im.grid.cols) + ' special' : '') + ')');
  } else {
    addRow(meta.text_b !== null && meta.text_b !== undefined ? 'Text A' : 'Input', meta.text || '');
    if (meta.text_b !== null && meta.text_b !== undefined) addRow('Text B', meta.text_b);
    addRow('Tokens', Data.n + ' (' + Data.special.filter(Boolean).length + ' special)' +
      (meta.truncated ? ' — ' + meta.truncated + ' tokens truncated' : ''));
  }

  const notes = $('notes');
  const note = (cls, strong, text) => {
    const d = Draw.el('div', 'note' + (cls ? ' ' + cls : ''));
    if (strong) d.appendChild(Draw.el('strong', null, strong + ' '));
    d.appendChild(document.createTextNode(text));
    notes.appendChild(d);
    if (cls === 'info') Draw.fold(d); /* one line until clicked */
    return d;
  };
  /* a page that generated shows its prompt again in the Generated row: the Input row keeps one line */
  if (Pred.gen) $('top').classList.add('has-gen');
  if (meta.demo) {
    const txt = meta.model_note || 'Its weights were built by hand so that each head shows one known pattern (named beside the head number).';
    note('', 'Constructed demo model — not trained.', txt +
      (/make weights/.test(txt) ? '' : ' For real attention, install a trained model offline: `make weights MODEL=all-MiniLM-L6-v2`, then --model weights/all-MiniLM-L6-v2.'));
    notes.lastChild.id = 'demo-note';
  } else if (meta.model_note) {
    note('info', null, meta.model_note);
  }
  if (Data.L < c.layers || Data.H < c.heads) {
    note('info', 'Selection:', 'this page holds layer' + (Data.L === 1 ? ' ' : 's ') + Data.layers.join(', ') +
      ' and head' + (Data.H === 1 ? ' ' : 's ') + Data.heads.join(', ') + ' of the model\'s ' + c.layers + ' × ' + c.heads +
      ' (numbers are the model\'s own indices).');
  }
  if (c.kv_heads) {
    note('info', 'Grouped-query attention:', c.heads + ' query heads share ' + c.kv_heads + ' key/value heads; ' +
      'head h reads key/value head ' + c.kv_head.map((g, h) => h + '→' + g).join(' ') + '. The neuron view\'s q and k ' +
      'are the vectors whose dot product is the score: after rotary positions' +
      (c.qk_norm ? ' and the per-head q/k norm' : '') + '.');
  }
  if (c.sliding_window && c.sliding_window_bidirectional) note('info', 'Local window:', 'in layers ' + c.sliding_layers.join(', ') +
    ' a token sees only the tokens at most ' + (c.sliding_window - 1) + ' before or after it (and itself); keys outside it get attention 0.');
  else if (c.sliding_window) note('info', 'Sliding window:', 'in layers ' + c.sliding_layers.join(', ') + ' a token sees only the last ' +
    c.sliding_window + ' tokens (itself included); keys outside it are masked like future ones.');
  if (c.attention_sinks && Data.hasSinks) note('info', 'Attention sinks:', 'every head has a learned sink logit that joins ' +
    'each softmax with no key, so a row\'s weights over the keys sum to 1 minus the sink\'s share. The matrix view shows that ' +
    'share in its “sink” column, the head view as the strip left of the queries.');
  if (meta.diff) {
    note('info', 'attnviz diff:', meta.diff.mode === 'models'
      ? 'one text on ' + meta.diff.models[0] + ' (A) and ' + meta.diff.models[1] + ' (B).'
      : 'A is this text; B is “' + (meta.diff.texts[1].length > 160 ? meta.diff.texts[1].slice(0, 159) + '…' : meta.diff.texts[1]) + '”.');
    notes.lastChild.appendChild(document.createTextNode(' The Diff view compares them; the other views show A\'s attention.'));
    notes.lastChild.id = 'diff-note';
  }
  if (meta.truncated) note('', 'Truncated:', meta.truncated + ' tokens did not fit the model\'s ' + c.max_position_embeddings + ' positions.');
  if (Data.stacked) {
    note('info', 'Encoder-decoder attention:', 'choose ' + Data.stacks.map(st => st.label).join(', ') + ' in the Stack control (key S). ' +
      (Data.stacks.some(st => st.name === 'cross') ? 'Cross attention: decoder tokens (queries) attend to encoder tokens (keys). ' : '') +
      'The neuron view needs queries and keys, which encoder-decoder documents (attnviz render, or a model run with --decoder-text or --generate) do not carry.');
    notes.lastChild.id = 'stack-note';
  }
  const foot = $('foot');
  foot.appendChild(document.createTextNode('Keys: '));
  [['[', ']', 'layer'], ['1', String(VIEWS.length), 'views'], ['T', '', 'theme'], ['Esc', '', 'unpin / close']]
    .concat(Pred.gen ? [['←', '→', 'generated token']] : [])
    .concat(Data.stacked ? [['S', '', Data.stacks.map(st => st.label.toLowerCase()).join(' / ')]] : []).forEach(([a, b, what], i) => {
    if (i) foot.appendChild(document.createTextNode(' · '));
    foot.appendChild(Draw.el('kbd', null, a));
    if (b) { foot.appendChild(document.createTextNode(' ')); foot.appendChild(Draw.el('kbd', null, b)); }
    foot.appendChild(document.createTextNode(' ' + what));
  });
  foot.appendChild(document.createTextNode(Data.live
    ? '. Live page of attnviz serve: it reads this run\'s attention from the local server as the views need it; "Download page" saves the self-contained offline page.'
    : '. Self-contained page written by attnviz; it loads nothing from the network.'));
})();

/* predictions strip, top-K card, generation panel (predictions.js): a step
 * pins its token's query row in the head and matrix views and the neuron view's query */
Pred.init({ onStep: pos => { S.pin = pos; if (pos >= 0) S.query = pos; return render(); } });

/* ---------------------------------------------------------------- controls */

/* Toggle labels name this model's special tokens and piece convention. A
 * decoder's first token takes most attention in most heads (the "attention
 * sink"), so for causal models the toggle hides it too. */
/* the sink rule is a decoder page's; an encoder-decoder page names its sides' specials */
const sinkPage = Data.causal && !Data.stacked;
const specialNames = (() => {
  const names = [];
  const lists = Data.stacked ? Object.values(Data.sides) : [{ tokens: meta.tokens, special: Data.special }];
  lists.forEach(sd => sd.tokens.forEach((tk, i) => { if (sd.special[i] && !names.includes(tk)) names.push(tk); }));
  if (sinkPage && !Data.special[0]) names.unshift('first token');
  return names.join('/');
})();
if (sinkPage) {
  $('hide-special-text').textContent = 'Hide sink (' + specialNames + ')';
  $('hide-special-label').title = 'Hide the first token, where decoders park attention (the attention sink)' +
    (specialNames !== 'first token' ? ', and the special tokens' : '') + '; each row is renormalized over the tokens left';
} else if (specialNames) {
  /* the names keep their case (the label is small caps otherwise) */
  const hs = $('hide-special-text');
  hs.textContent = 'Hide ';
  hs.appendChild(Draw.el('span', 'tokname', specialNames));
  $('hide-special-label').title = 'Hide ' + specialNames + '; each row is renormalized over the tokens left';
} else {
  $('hide-special-text').textContent = 'Hide special tokens';
  $('hide-special-label').title = 'This input has no special tokens';
  $('hide-special').disabled = true;
}
if (Data.hasDisplay) {
  $('merge-pieces-text').textContent = 'Merge word pieces';
  $('merge-pieces-label').title = 'Merge byte-level BPE pieces into words (a word starts at a piece with a leading space): ' +
    'attention to a word is summed over its pieces, attention from a word averaged';
}

/* tabs and view sections, one per table entry */
VIEWS.forEach(v => {
  const b = Draw.el('button', null, v.label);
  b.type = 'button';
  b.setAttribute('role', 'tab');
  b.dataset.view = v.id;
  b.id = 'tab-' + v.id;
  const why = unavailable(v);
  if (why) { b.disabled = true; b.title = why; }
  $('tabs').appendChild(b);
  const sec = Draw.el('section', 'view');
  sec.id = 'view-' + v.id;
  sec.dataset.view = v.id;
  sec.hidden = true;
  $('main').appendChild(sec);
});

const layerSel = $('layer-select');
/* the current stack's layers (an encoder-decoder's decoder may have fewer or more than its encoder) */
function fillLayers() {
  layerSel.textContent = '';
  Data.layers.forEach((l, i) => {
    const o = Draw.el('option', null, 'Layer ' + l);
    o.value = String(i);
    layerSel.appendChild(o);
  });
}
fillLayers();
layerSel.addEventListener('change', () => { S.layer = +layerSel.value; render(); });
$('layer-prev').addEventListener('click', () => stepLayer(-1));
$('layer-next').addEventListener('click', () => stepLayer(1));
function stepLayer(d) {
  const v = Math.max(0, Math.min(Data.L - 1, S.layer + d));
  if (v !== S.layer) { S.layer = v; render(); }
}
document.querySelectorAll('#tabs [data-view]').forEach(b => b.addEventListener('click', () => setView(b.dataset.view)));
document.querySelectorAll('#mode-seg [data-mode]').forEach(b => b.addEventListener('click', () => { S.mode = b.dataset.mode; render(); }));
document.querySelectorAll('#filter-seg [data-filter]').forEach(b => {
  if (!hasB && b.dataset.filter !== 'all') { b.disabled = true; b.title = 'Only for sentence pairs (give attnviz two texts)'; }
  b.addEventListener('click', () => { S.filter = b.dataset.filter; render(); });
});
$('hide-special').addEventListener('change', e => { S.hide = e.target.checked; render(); });

/* Encoder-decoder pages: which stack the views draw (bertviz's Encoder /
 * Decoder / Cross selector); key S steps through them. */
const STACK_TITLE = {
  encoder: 'The encoder\'s self-attention: encoder tokens attending to encoder tokens',
  decoder: 'The decoder\'s self-attention (causal): decoder tokens attending to themselves and earlier decoder tokens',
  cross: 'Cross attention: decoder tokens (left, rows) attending to encoder tokens (right, columns)',
};
if (Data.stacked) {
  $('ctl-stack').hidden = false;
  $('ctl-filter').hidden = true; /* sentence pairs are a self-attention page's */
  Data.stacks.forEach((st, k) => {
    const b = Draw.el('button', null, st.label);
    b.type = 'button';
    b.setAttribute('role', 'radio');
    b.dataset.stack = st.name;
    b.title = STACK_TITLE[st.name] || st.label;
    b.addEventListener('click', () => setStack(k));
    $('stack-seg').appendChild(b);
  });
}
function setStack(k) {
  if (typeof k === 'string') k = Data.stacks.findIndex(st => st.name === k);
  if (!(k >= 0 && k < Data.stacks.length)) return Promise.resolve();
  if (k === S.stack) return render();
  S.stack = k;
  const was = Data.layers[S.layer], same = Data.layers;
  Data.setStack(k);
  if (Data.layers !== same) {
    /* stacks of different depths: the same layer where the new stack has it, else its last */
    const i = Data.layers.indexOf(was);
    S.layer = i >= 0 ? i : Math.min(S.layer, Data.L - 1);
    fillLayers();
  }
  S.pin = -1;
  /* rollout multiplies a square stack through its layers: not cross attention */
  if (S.mode === 'rollout' && !Data.stack.square) S.mode = 'mean';
  if (!$('modal').hidden) closeModal();
  return render();
}
$('merge-pieces').addEventListener('change', e => { S.merge = e.target.checked; render(); });
$('contrast').addEventListener('change', e => { S.gamma = e.target.checked ? 0.5 : 1; render(); });
$('theme-btn').addEventListener('click', () => { setTheme(document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark'); buildChips(); render(); });
$('export-svg').addEventListener('click', () => doExport('svg'));
$('export-png').addEventListener('click', () => doExport('png'));

function setView(v) {
  if (!viewOf(v) || unavailable(viewOf(v))) return Promise.resolve(); /* not a view (here): nothing to draw */
  S.view = v;
  return render();
}

/* Head chips: click toggles (head/model views) or picks the head (matrix and
 * neuron views in Heads mode), double-click solos (again: all). */
const chips = $('head-chips');
function buildChips() {
  chips.textContent = '';
  for (let h = 0; h < Data.H; h++) {
    const b = Draw.el('button', 'head-chip');
    b.type = 'button';
    b.dataset.h = h;
    const real = Data.heads[h];
    b.style.setProperty('--c', Draw.headColor(real));
    const sw = Draw.el('span', 'sw');
    b.appendChild(sw);
    b.appendChild(Draw.el('span', 'num', String(real)));
    chips.appendChild(b);
    b.appendChild(Draw.el('span', 'pat'));
  }
  updateChips();
}
function updateChips() {
  const picks = pickMode();
  chips.querySelectorAll('.head-chip').forEach(b => {
    const h = +b.dataset.h;
    const pat = Data.pattern(S.layer, h), desc = Data.description(S.layer, h);
    b.querySelector('.pat').textContent = pat || '';
    b.querySelector('.pat').hidden = !pat;
    b.title = 'Head ' + Data.heads[h] + (pat ? ' — ' + pat : '') + (desc ? ': ' + desc : '') +
      (picks ? '\nClick to show this head.' : '\nClick to toggle, double-click to show only this head.');
    const on = picks ? h === S.focus : S.active[h];
    b.classList.toggle('off', !on);
    b.classList.toggle('focus', picks && h === S.focus);
    b.setAttribute('aria-pressed', on ? 'true' : 'false');
  });
  const hint = $('heads-hint');
  hint.textContent = picks
    ? 'Head — click to choose which head this view shows.'
    : S.mode === 'heads'
      ? 'Heads — click a square to toggle it, double-click to show it alone (double-click again for all).'
      : 'Heads in the ' + (S.mode === 'rollout' ? 'rollout' : S.mode) + ' — click to toggle, double-click to use one alone.';
}
function pickMode() { return viewOf(S.view).picksHead(S.mode); }
chips.addEventListener('click', ev => {
  const b = ev.target.closest('.head-chip');
  if (!b) return;
  const h = +b.dataset.h;
  if (pickMode()) { S.focus = h; S.active[h] = true; render(); return; }
  S.active[h] = !S.active[h];
  S.focus = h;
  render();
});
chips.addEventListener('dblclick', ev => {
  const b = ev.target.closest('.head-chip');
  if (!b) return;
  const h = +b.dataset.h;
  if (pickMode()) return;
  /* the two clicks before dblclick toggled h twice: state is as before */
  const solo = S.active.every((a, i) => a === (i === h));
  if (solo) S.active.fill(true);
  else { S.active.fill(false); S.active[h] = true; }
  S.focus = h;
  render();
});

/* (SIGNAL: a live page's next boot removes these document/window listeners) */
document.addEventListener('keydown', ev => {
  if (ev.target && /^(SELECT|INPUT|TEXTAREA)$/.test(ev.target.tagName) && ev.key !== 'Escape') return;
  if (ev.key === '[' || ev.key === 'ArrowLeft' && ev.altKey) stepLayer(-1);
  else if (ev.key === ']' || ev.key === 'ArrowRight' && ev.altKey) stepLayer(1);
  else if (ev.key >= '1' && ev.key <= String(VIEWS.length) && !ev.ctrlKey && !ev.metaKey) setView(VIEWS[+ev.key - 1].id);
  else if (ev.key === 't' || ev.key === 'T') $('theme-btn').click();
  else if ((ev.key === 's' || ev.key === 'S') && Data.stacked && !ev.ctrlKey && !ev.metaKey) setStack((S.stack + 1) % Data.stacks.length);
  else if (ev.key === 'Escape') {
    if (!$('modal').hidden) closeModal();
    else if (current && current.clearPin) current.clearPin();
  }
}, { signal: SIGNAL });

/* ---------------------------------------------------------------- status */

function status(text) { $('status').textContent = text || ''; }

/* ---------------------------------------------------------------- render */

let current = null;       /* controller of the drawn view */
let renderGen = PREV ? PREV.gen : 0; /* counts on across a live page's boots */
let running = null;       /* a drawn controller still working (has cancel()) */

function updateControls() {
  document.querySelectorAll('#tabs [data-view]').forEach(b => b.setAttribute('aria-selected', b.dataset.view === S.view ? 'true' : 'false'));
  document.querySelectorAll('#mode-seg [data-mode]').forEach(b => b.setAttribute('aria-checked', b.dataset.mode === S.mode ? 'true' : 'false'));
  document.querySelectorAll('#filter-seg [data-filter]').forEach(b => b.setAttribute('aria-checked', b.dataset.filter === S.filter ? 'true' : 'false'));
  layerSel.value = String(S.layer);
  $('layer-prev').disabled = S.layer === 0;
  $('layer-next').disabled = S.layer === Data.L - 1;
  if (Data.stacked) {
    document.querySelectorAll('#stack-seg [data-stack]').forEach(b => b.setAttribute('aria-checked', b.dataset.stack === Data.stack.name ? 'true' : 'false'));
    const rb = document.querySelector('#mode-seg [data-mode=rollout]');
    rb.disabled = !Data.stack.square;
    rb.title = Data.stack.square ? ROLLOUT_TITLE : 'Rollout multiplies self-attention through the layers: not for cross attention';
  }
  const u = viewOf(S.view).uses;
  $('ctl-mode').hidden = !u.mode;
  $('ctl-layer').hidden = !u.layer;
  $('ctl-contrast').hidden = !u.contrast;
  $('merge-pieces').disabled = !u.merge;
  $('heads-bar').hidden = !u.heads;
  $('hide-special').checked = S.hide;
  $('merge-pieces').checked = S.merge;
  document.querySelectorAll('main .view').forEach(v => { v.hidden = v.dataset.view !== S.view; });
  updateChips();
}

const ROLLOUT_TITLE = document.querySelector('#mode-seg [data-mode=rollout]').title;
/* an encoder-decoder side's tokens as text (display pieces joined, WordPiece spaced) */
function sideText(sd) {
  return sd.hasDisplay ? sd.tokens.map((_, i) => sd.text(i)).join('').trim() : sd.tokens.join(' ');
}
function viewTitle() {
  const L = Data.layers[S.layer];
  const hs = activeHeads();
  const headsTxt = S.mode === 'heads'
    ? (hs.length === Data.H ? 'all heads' : 'head' + (hs.length === 1 ? ' ' : 's ') + hs.map(h => Data.heads[h]).join(', '))
    : S.mode + ' of ' + hs.length + ' head' + (hs.length === 1 ? '' : 's');
  const filt = S.filter === 'all' ? '' : ' · ' + S.filter[0] + '→' + S.filter[1];
  const text = meta.text || (Data.stacked ? sideText(Data.stack.rows) : '');
  const input = text.slice(0, 60) + (text.length > 60 ? '…' : '');
  return { L, hs, headsTxt, filt, input };
}

async function render() {
  const gen = ++renderGen;
  updateControls();
  Tip.hide();
  if (running) { running.cancel(); running = null; }
  const view = viewOf(S.view);
  Data.setMeasure(view.attentionOnly ? 'attention' : S.measure); /* measure.js */
  const host = $('view-' + S.view);
  const t = Tok.build(S.merge && view.uses.merge, S.hide);
  const c = {
    li: S.layer, mode: S.mode, hs: null, t, filter: S.filter, gamma: S.gamma, focus: S.focus, query: S.query, pin: S.pin,
    vt: null, status, stale: () => gen !== renderGen, onOpen: openModal, onQuery: i => { S.query = i; },
    onPick: (li, h) => { S.layer = li; S.focus = h; S.active[h] = true; render(); },
  };
  try {
    if (view.ownsLayers) {
      c.hs = activeHeads();
      c.vt = viewTitle();
      current = view.draw(host, c);
      if (current && current.cancel) running = current;
      status('');
      return finish(gen);
    }
    /* the heads this view draws (a live page fetches only those) */
    const need = view.picksHead(S.mode) ? [S.focus] : activeHeads();
    if (!Data.loaded(S.layer, need)) status((Data.live ? 'Loading layer ' : 'Decoding layer ') + Data.layers[S.layer] + '…');
    await Data.attention(S.layer, null, need);
    if (gen !== renderGen) return;
    const hs = activeHeads();
    if (S.mode === 'rollout' && view.uses.mode) {
      const li = S.layer;
      if (!Rollout.cached(li, hs)) {
        host.textContent = '';
        host.appendChild(Draw.el('div', 'empty', 'Computing rollout…'));
        await Rollout.upTo(li, hs, (done, total) => { if (gen === renderGen) status('Computing rollout: layer ' + Math.floor(done) + ' of ' + total + '…'); });
        if (gen !== renderGen) return;
      }
    }
    status(statusLine());
    c.hs = hs;
    c.vt = viewTitle();
    let ctl = view.draw(host, c);
    /* only a view that waits for more data returns a promise; the others
     * finish in this task, as they always did */
    if (ctl && typeof ctl.then === 'function') {
      ctl = await ctl;
      if (gen !== renderGen) return;
    }
    current = ctl;
    if (current && current.cancel) running = current;
  } catch (err) {
    if (gen !== renderGen) return; /* a later render (or a live page's next run) took over */
    console.error(err);
    host.textContent = '';
    host.appendChild(Draw.el('div', 'empty', 'Could not draw this view: ' + (err && err.message ? err.message : String(err))));
  }
  return finish(gen);
}

function statusLine() {
  const parts = [];
  if (S.hide) parts.push((sinkPage ? 'sink (' + specialNames + ')' : specialNames) + ' hidden, rows renormalized');
  const view = viewOf(S.view);
  if (S.merge && view.uses.merge) parts.push((Data.hasDisplay ? 'word pieces' : '## pieces') + ' merged (to: summed, from: averaged)');
  if (S.merge && !view.uses.merge && view.mergeNote) parts.push(view.mergeNote);
  if (S.filter !== 'all') parts.push('showing ' + S.filter[0] + '→' + S.filter[1]);
  return parts.join(' · ');
}

let readyOnce = false;
let disposed = false; /* a live page's next boot replaced this one */
function finish(gen) {
  if (gen !== renderGen) return;
  Pred.refresh();
  Heads.refresh(S.view);
  Measure.refresh(viewOf(S.view));
  Flags.refresh(viewOf(S.view), S.layer);
  document.body.dataset.view = S.view;
  document.body.dataset.layer = String(Data.layers[S.layer]);
  document.body.dataset.rendered = String(gen);
  if (Data.stacked) document.body.dataset.stack = Data.stack.name;
  if (!readyOnce) {
    readyOnce = true;
    /* interactive = the first view painted: after the next frame */
    requestAnimationFrame(() => setTimeout(() => {
      if (disposed) return; /* a live page's next run took over meanwhile */
      window.attnviz.readyMs = performance.now();
      window.attnviz.scriptMs = performance.now() - T0;
      document.body.dataset.ready = '1';
      /* a live page fetches only what a view shows; a long input's page has no matrices to decode */
      if (!Data.live && !Tiles.on) loadRest();
    }, 0));
  }
}

/* Decodes the other layers (of every stack, the shown one first) in the background once the first view is up. */
async function loadRest() {
  const order = [Data.stack].concat(Data.stacks.filter(st => st !== Data.stack));
  for (const st of order) {
    for (let li = 0; li < st.L; li++) {
      await Data.attention(li, st);
      await new Promise(r => setTimeout(r, 0));
    }
  }
  document.body.dataset.loaded = '1';
}

/* ---------------------------------------------------------------- modal */

let modalCtl = null, modalAt = null;
function openModal(li, h) {
  modalAt = { li, h };
  const pat = Data.pattern(li, h), desc = Data.description(li, h);
  $('modal-title').textContent = 'Layer ' + Data.layers[li] + (Data.perLayer ? ' · ' + Measure.LABEL[Data.measure] + ' through it'
    : ' · head ' + Data.heads[h] + (pat ? ' — ' + pat : ''));
  $('modal-open-neuron').hidden = !Data.hasQK;
  const body = $('modal-body');
  body.textContent = '';
  if (desc) body.appendChild(Draw.el('p', 'hint', desc));
  const box = Draw.el('div');
  body.appendChild(box);
  $('modal').hidden = false;
  const t = Tok.build(S.merge, S.hide);
  /* a long input: the matrix view's tiles, never the head's whole matrix */
  (Tiles.on ? Promise.resolve() : Data.attention(li, null, [h])).then(() => {
    if (!modalAt || modalAt.li !== li || modalAt.h !== h) return;
    /* the head view's lines while they stay legible, else the matrix view's heat map */
    modalCtl = viewOf(Math.max(t.mr, t.mc) <= 96 && !Tiles.on ? 'head' : 'matrix').drawHead(box, { li, h, t, filter: S.filter, gamma: S.gamma });
    $('modal').dataset.drawn = '1';
  }).catch(err => {
    if (!modalAt || modalAt.li !== li || modalAt.h !== h) return;
    console.error(err);
    box.textContent = '';
    box.appendChild(Draw.el('div', 'empty', 'Could not load this head: ' + (err && err.message ? err.message : String(err))));
  });
  $('modal-close').focus();
}
function closeModal() {
  $('modal').hidden = true;
  $('modal').dataset.drawn = '';
  $('modal-body').textContent = '';
  modalCtl = null;
  modalAt = null;
  Tip.hide();
}
$('modal-close').addEventListener('click', closeModal);
$('modal').addEventListener('click', ev => { if (ev.target === $('modal')) closeModal(); });
document.querySelectorAll('#modal [data-open]').forEach(b => b.addEventListener('click', () => {
  const at = modalAt;
  closeModal();
  S.layer = at.li;
  S.focus = at.h;
  if (b.dataset.open === 'head') { S.active.fill(false); S.active[at.h] = true; S.mode = 'heads'; }
  if (b.dataset.open === 'matrix') S.mode = 'heads';
  setView(b.dataset.open);
}));

/* ---------------------------------------------------------------- export */

function exportName(ext) {
  const L = Data.layers[S.layer];
  const u = viewOf(S.view).uses;
  const base = 'attnviz-' + S.view + (Data.stacked ? '-' + Data.stack.name : '') + (u.layer ? '-layer' + L : '') +
    (pickMode() ? '-head' + Data.heads[S.focus] : '') +
    (S.mode !== 'heads' && u.mode ? '-' + S.mode : '');
  return base + '.' + ext;
}
function exportTitle() {
  const model = (meta.model || 'model') + (Data.stacked ? ' · ' + Data.stack.label.toLowerCase() + ' attention' : '');
  return viewOf(S.view).exportTitle(model, { mode: S.mode, focus: S.focus, vt: viewTitle() });
}
async function exportData(kind) {
  const ctl = modalCtl && !$('modal').hidden ? modalCtl : current;
  if (!ctl || !ctl.exportScene) throw new Error('nothing to export in this view');
  const ttl = exportTitle();
  if (kind === 'svg') return ctl.exportScene((w, h) => Draw.SvgPainter(w, h), ttl).toString();
  const p = ctl.exportScene((w, h) => Draw.CanvasPainter(w, h, 2), ttl);
  return p.toBlob();
}
async function doExport(kind) {
  try {
    const data = await exportData(kind);
    const blob = kind === 'svg' ? new Blob([data], { type: 'image/svg+xml' }) : data;
    const url = URL.createObjectURL(blob);
    const a = Draw.el('a');
    a.href = url;
    a.download = exportName(kind);
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  } catch (err) {
    console.error(err);
    status('Export failed: ' + (err && err.message ? err.message : err));
  }
}

/* ---------------------------------------------------------------- resize */

let resizeTimer = null;
let lastW = window.innerWidth;
window.addEventListener('resize', () => {
  if (Math.abs(window.innerWidth - lastW) < 40) return;
  lastW = window.innerWidth;
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(render, 200);
}, { signal: SIGNAL });

/* ---------------------------------------------------------------- scripting */

window.attnviz = {
  meta, data: Data, state: S, pred: Pred,
  /* this page's views in tab order (their ids) */
  views: VIEWS.map(v => v.id),
  /* a live page's next boot: stop what this one still draws, keep the reader's choices */
  dispose() {
    disposed = true;
    renderGen++;
    clearTimeout(resizeTimer);
    if (running) { running.cancel(); running = null; }
    if (!$('modal').hidden) closeModal();
    return { state: JSON.parse(JSON.stringify(S)), theme: document.documentElement.dataset.theme, gen: renderGen };
  },
  render, setView, setStack, setMeasure: k => Measure.set(k),
  /* the page's own Rollout mode's matrix of heads hs through layer index li (data.js's Rollout) */
  rollout: (li, hs) => Rollout.upTo(li, hs),
  /* head h of layer index li as the views draw it (the toggles' transform of the current measure) */
  derived: (li, h) => Derived.head(li, h, Tok.build(S.merge, S.hide)),
  setLayer(li) { S.layer = li; return render(); },
  exportSVG: () => exportData('svg'),
  exportPNG: () => exportData('png'),
  openModal, closeModal,
  headColor: Draw.headColor, aggColor: Draw.aggColor, fmtAtt: Fmt.att, heads: Heads,
  readyMs: null,
};

buildChips();
Heads.init($('controls'), openModal);
Measure.init($('controls'), k => { S.measure = k; return render(); }, () => S.measure);
Flags.init($('notes'), $('controls'), () => render());
Explain.init($('notes'));
render();
