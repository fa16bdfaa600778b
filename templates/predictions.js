/* predictions.js — the model's predictions and its generation, over
 * Data.meta (json_out.c's write_predictions): meta.predictions (--predict K:
 * the top-K next tokens at every position of a causal model, fill-ins at the
 * masks of a masked one) and meta.generation (--generate N: the continuation,
 * each step's chosen token and the top-K it was chosen from). Builds, once:
 * a "Predictions" strip under the input line (top-1 per position), a card
 * with a position's top-K as bars when a token is hovered or pinned (head
 * view, neuron view's queries, the strip), and the generation panel (text,
 * stop reason, strategy, a step control). The step control tells page.js
 * which token to pin (init's onStep(position or -1)); the views pin it.
 * Pages without predictions or generation get none of it. Token text is
 * always set with textContent. */
/* global Data, Fmt, Draw, SIGNAL */
/* exported Pred */

const Pred = (() => {
  const meta = Data.meta;
  const preds = Array.isArray(meta.predictions) ? meta.predictions : null;
  const gen = meta.generation && Array.isArray(meta.generation.steps) ? meta.generation : null;
  const causal = Data.causal;
  const G = gen ? gen.steps.length : 0;
  const P = Data.genStart;
  const topAt = new Map();
  if (preds) for (const p of preds) topAt.set(p.position, p.top);
  const stepOf = pos => (gen && pos >= P && pos < P + G ? gen.steps[pos - P] : null);
  const ids = meta.input_ids || [];
  const $ = id => document.getElementById(id);

  /* ---------------------------------------------------------------- text */

  /* 0.772531 -> "77.3%", 0.00929913 -> "0.93%", 6.15e-05 -> "0.0062%" */
  function fmtProb(p) {
    const pc = p * 100;
    if (pc >= 99.95 && p < 1) return '>99.9%';
    if (pc >= 1) return pc.toFixed(1) + '%';
    if (pc >= 1e-4) return pc.toPrecision(2) + '%';
    return p > 0 ? '<0.0001%' : '0%';
  }
  /* A candidate's display text with its whitespace visible: leading and
   * trailing spaces as faint ␣, whitespace-only tokens as glyphs. */
  function tokenText(s) {
    const f = document.createDocumentFragment();
    if (s === '' || /^\s+$/.test(s)) { f.appendChild(Draw.el('span', 'ws', Fmt.visible(s))); return f; }
    const m = /^( *)([\s\S]*?)( *)$/.exec(s);
    if (m[1]) f.appendChild(Draw.el('span', 'ws', '␣'.repeat(m[1].length)));
    f.appendChild(document.createTextNode(Fmt.visible(m[2])));
    if (m[3]) f.appendChild(Draw.el('span', 'ws', '␣'.repeat(m[3].length)));
    return f;
  }
  const candText = c => (c.display !== undefined && c.display !== null ? c.display : c.token);
  const quoted = (parent, label) => {
    const q = Draw.el('span', 'pk-q');
    q.appendChild(tokenText(label));
    parent.appendChild(q);
  };

  /* ---------------------------------------------------------------- the bar chart */

  /* Rows of top-K candidates: text, bar (width = probability), percentage.
   * mark: {id, badge} flags one candidate (the chosen or the actual next
   * token); a marked token outside the top-K gets a row of its own below when
   * its probability is known (mark.prob), else a line naming it. */
  function chart(box, top, mark) {
    const list = Draw.el('div', 'pk-list');
    list.setAttribute('role', 'list');
    let found = false;
    const addRow = (c, prob, extra) => {
      const r = Draw.el('div', 'pk-row' + (extra ? ' extra' : ''));
      r.setAttribute('role', 'listitem');
      r.dataset.id = c.id;
      if (prob !== null) r.dataset.prob = String(prob);
      const lab = Draw.el('span', 'pk-tok');
      lab.appendChild(tokenText(candText(c)));
      lab.title = 'vocab: ' + c.token + ' · id ' + c.id;
      const track = Draw.el('span', 'pk-track');
      const bar = Draw.el('span', 'pk-bar');
      bar.style.width = (prob === null ? 0 : Math.max(0, Math.min(1, prob)) * 100) + '%';
      track.appendChild(bar);
      r.append(lab, track, Draw.el('span', 'pk-p', prob === null ? '—' : fmtProb(prob)));
      if (mark && c.id === mark.id) {
        r.classList.add('mark');
        r.appendChild(Draw.el('span', 'pk-badge', mark.badge));
        found = true;
      } else {
        r.appendChild(Draw.el('span', 'pk-badge'));
      }
      list.appendChild(r);
    };
    top.forEach(c => addRow(c, c.prob, false));
    if (mark && !found && mark.cand) {
      if (mark.prob !== undefined && mark.prob !== null) addRow(mark.cand, mark.prob, true);
      else {
        const d = Draw.el('div', 'pk-note', mark.badge + ': ');
        quoted(d, candText(mark.cand));
        d.appendChild(document.createTextNode(' — not in the top ' + top.length));
        list.appendChild(d);
      }
    }
    box.appendChild(list);
    return list;
  }

  /* The token that follows position pos in the page's sequence, as a candidate. */
  function nextCand(pos) {
    if (pos + 1 >= Data.n) return null;
    return { id: ids[pos + 1], token: Data.vocab(pos + 1), display: Data.text(pos + 1) };
  }

  /* Fills box with what is known at raw position pos (the last piece of a
   * word); label: the hovered token's shown text. Returns false when nothing is. */
  function describe(box, pos, label) {
    const top = topAt.get(pos);
    const st = stepOf(pos);
    if (!top && !st) return false;
    const head = Draw.el('div', 'pk-title');
    if (top && causal) {
      head.appendChild(document.createTextNode('Next token after '));
      quoted(head, label);
    } else if (top) {
      head.appendChild(document.createTextNode('Fill-ins for '));
      quoted(head, label);
    } else {
      head.appendChild(document.createTextNode('Chosen at step ' + (pos - P + 1) + ': '));
      quoted(head, label);
    }
    box.appendChild(head);
    const sub = [];
    sub.push('position ' + pos);
    if (st) sub.push('generated at step ' + (pos - P + 1) + ' of ' + G + ' (' + fmtProb(st.prob) + ')');
    box.appendChild(Draw.el('div', 'pk-sub', sub.join(' · ')));
    if (top) {
      let mark = null;
      const nx = causal ? nextCand(pos) : null;
      if (nx) {
        const ns = stepOf(pos + 1);
        mark = { id: nx.id, cand: nx, badge: ns ? 'generated' : 'in text', prob: ns ? ns.prob : null };
      }
      chart(box, top, mark);
    } else {
      chart(box, st.top, { id: st.id, cand: st, badge: 'chosen', prob: st.prob });
    }
    return true;
  }

  /* ---------------------------------------------------------------- the card */

  const card = Draw.el('div', 'pred-card');
  card.id = 'pred-card';
  card.hidden = true;
  card.setAttribute('role', 'tooltip');
  document.body.appendChild(card);
  let anchor = null, pinned = false;

  /* the token element under a hover: head view rows, neuron view queries, strip cells */
  const TOKSEL = '.hv-col .tok, .nv-queries .tok, .pred-cell';
  const posOf = e => +(e.dataset.last !== undefined ? e.dataset.last : e.dataset.pos);
  function labelOf(e) {
    const t = e.querySelector('.t, .pc-tok');
    return t ? t.textContent : e.textContent;
  }
  function place() {
    if (!anchor || card.hidden) return;
    if (!anchor.isConnected) { hideCard(); return; }
    const r = anchor.getBoundingClientRect();
    const cw = card.offsetWidth, ch = card.offsetHeight, W = window.innerWidth, H = window.innerHeight;
    let x, y;
    const side = anchor.closest('.hv-left') ? 'left' : anchor.closest('.hv-right, .nv-queries') ? 'right' : 'below';
    if (side === 'left') { x = r.left - cw - 10; y = r.top + r.height / 2 - 22; if (x < 6) x = r.right + 10; }
    else if (side === 'right') { x = r.right + 10; y = r.top + r.height / 2 - 22; if (x + cw > W - 6) x = r.left - cw - 10; }
    else { x = r.left; y = r.bottom + 6; if (y + ch > H - 6) y = r.top - ch - 6; }
    x = Math.max(6, Math.min(W - cw - 6, x));
    y = Math.max(6, Math.min(H - ch - 6, y));
    card.style.left = Math.round(x) + 'px';
    card.style.top = Math.round(y) + 'px';
    card.classList.toggle('off-screen', r.bottom < 0 || r.top > H);
  }
  function showCard(e, pin) {
    const pos = posOf(e);
    card.textContent = '';
    if (!describe(card, pos, labelOf(e))) { hideCard(); return; }
    if (pin) card.appendChild(Draw.el('div', 'pk-foot', 'Pinned — click the token again or press Esc to unpin.'));
    anchor = e;
    pinned = !!pin;
    card.hidden = false;
    card.dataset.pos = String(pos);
    card.classList.toggle('pinned', pinned);
    place();
  }
  function hideCard() {
    card.hidden = true;
    card.dataset.pos = '';
    anchor = null;
    pinned = false;
    const sp = document.querySelector('.pred-cell.pinned');
    if (sp) sp.classList.remove('pinned');
  }
  const any = !!(preds || gen);
  if (any) {
    document.addEventListener('mouseover', ev => {
      if (pinned) return;
      const e = ev.target.closest && ev.target.closest(TOKSEL);
      if (e && e !== anchor) showCard(e, false);
    }, { signal: SIGNAL });
    document.addEventListener('mouseout', ev => {
      if (pinned || !anchor) return;
      const e = ev.target.closest && ev.target.closest(TOKSEL);
      if (e === anchor && !(ev.relatedTarget && anchor.contains(ev.relatedTarget))) hideCard();
    }, { signal: SIGNAL });
    /* after the view's own click handler: the head view pins the token it
     * marks .pinned; strip cells pin here */
    document.addEventListener('click', ev => {
      const e = ev.target.closest && ev.target.closest(TOKSEL);
      if (!e) return;
      if (e.classList.contains('pred-cell')) {
        const again = pinned && anchor === e;
        hideCard();
        if (!again) { e.classList.add('pinned'); showCard(e, true); }
        else showCard(e, false);
      } else if (e.closest('.hv-col')) {
        hideCard();
        showCard(e, e.classList.contains('pinned'));
      }
    }, { signal: SIGNAL });
    /* (SIGNAL: a live page's next boot removes the document/window listeners) */
    document.addEventListener('keydown', ev => { if (ev.key === 'Escape' && !card.hidden) hideCard(); }, { signal: SIGNAL });
    let raf = 0;
    const onMove = () => { if (!raf) raf = requestAnimationFrame(() => { raf = 0; place(); }); };
    window.addEventListener('scroll', onMove, { passive: true, capture: true, signal: SIGNAL });
    window.addEventListener('resize', onMove, { signal: SIGNAL });
  }

  /* ---------------------------------------------------------------- the strip */

  function buildStrip() {
    if (!preds) return;
    const row = Draw.el('div', 'row pred-row');
    row.id = 'pred-row';
    const tag = Draw.el('span', 'tag', 'Predictions');
    row.appendChild(tag);
    const strip = Draw.el('div', 'pred-strip');
    strip.id = 'pred-strip';
    strip.setAttribute('role', 'list');
    const K = preds.length ? preds[0].top.length : 0;
    strip.title = (causal ? 'Each token\'s most probable next token (in the accent color when it is the token that follows)'
      : 'The most probable fill-in of each mask') + ' (top 1 of ' + K + '). Hover a cell or a token for the top ' + K + ', click to pin.';
    if (!preds.length) {
      row.appendChild(Draw.el('span', 'meta', causal ? 'No predictions.' : 'No mask token in the input: nothing to fill in.'));
      $('input-line').appendChild(row);
      return;
    }
    const frag = document.createDocumentFragment();
    for (const p of preds) {
      const c = Draw.el('div', 'pred-cell');
      c.setAttribute('role', 'listitem');
      c.dataset.pos = String(p.position);
      if (p.position >= P) c.classList.add('gen');
      if (gen && p.position === P) c.classList.add('gen-first');
      if (Data.special[p.position]) c.classList.add('special');
      c.appendChild(Draw.el('span', 'pc-tok', Data.label(p.position)));
      const t1 = p.top[0];
      const line = Draw.el('span', causal ? 'pc-line' : 'pc-line fill');
      if (t1) {
        const tt = Draw.el('span', 'pc-top');
        tt.appendChild(tokenText(candText(t1)));
        line.append(tt, Draw.el('span', 'pc-p', fmtProb(t1.prob)));
        c.dataset.prob = String(t1.prob);
        c.dataset.id = String(t1.id);
        const nx = causal ? nextCand(p.position) : null;
        if (nx && nx.id === t1.id) c.classList.add('hit');
      }
      c.appendChild(line);
      frag.appendChild(c);
    }
    strip.appendChild(frag);
    row.appendChild(strip);
    $('input-line').appendChild(row);
  }

  /* ---------------------------------------------------------------- generation */

  let step = 0; /* 0: none, 1..G: the selected generated token */
  let onStep = () => {};
  const STOPS = { length: 'reached the limit of ', eos: 'the model\'s end token', stop: 'the stop string' };
  function buildGen() {
    if (!gen) return;
    const panel = Draw.el('div', 'gen-panel');
    panel.id = 'gen-panel';
    const left = Draw.el('div', 'gen-left');
    const r1 = Draw.el('div', 'row');
    r1.appendChild(Draw.el('span', 'tag', 'Generated'));
    const txt = Draw.el('span', 'gen-text');
    txt.id = 'gen-text';
    txt.appendChild(Draw.el('span', 'gen-prompt', meta.text || ''));
    txt.appendChild(Draw.el('span', 'gen-cont', gen.text || ''));
    r1.appendChild(txt);
    left.appendChild(r1);
    /* a long prompt: the box shows its end, where the continuation is */
    requestAnimationFrame(() => { txt.scrollTop = txt.scrollHeight; });

    const r2 = Draw.el('div', 'row');
    r2.appendChild(Draw.el('span', 'tag', ''));
    const info = Draw.el('span', 'gen-info');
    info.id = 'gen-info';
    const strat = gen.strategy === 'sample'
      ? 'sampled (temperature ' + gen.temperature + ', top-p ' + gen.top_p + ', seed ' + gen.seed + ')'
      : 'greedy (the most probable token each step)';
    const stop = gen.stop_reason === 'length' ? STOPS.length + gen.generated_tokens + ' tokens'
      : STOPS[gen.stop_reason] || String(gen.stop_reason);
    info.append(Draw.el('span', 'gen-chip', G + ' token' + (G === 1 ? '' : 's') + ' after a ' + P + '-token prompt'),
      Draw.el('span', 'gen-chip', strat), Draw.el('span', 'gen-chip', 'stopped: ' + stop));
    const key = Draw.el('span', 'gen-key');
    key.append(Draw.el('span', 'gen-sample', 'generated'), document.createTextNode(' tokens are underlined in every view'));
    info.appendChild(key);
    r2.appendChild(info);
    left.appendChild(r2);

    const r3 = Draw.el('div', 'row');
    r3.appendChild(Draw.el('span', 'tag', 'Step'));
    const ctl = Draw.el('div', 'gen-step');
    const prev = Draw.el('button', 'btn icon', '‹');
    prev.type = 'button';
    prev.id = 'step-prev';
    prev.title = 'Previous generated token (←)';
    prev.setAttribute('aria-label', 'Previous generated token');
    const next = Draw.el('button', 'btn icon', '›');
    next.type = 'button';
    next.id = 'step-next';
    next.title = 'Next generated token (→)';
    next.setAttribute('aria-label', 'Next generated token');
    const range = Draw.el('input');
    range.type = 'range';
    range.id = 'step-range';
    range.min = '0';
    range.max = String(G);
    range.value = '0';
    range.setAttribute('aria-label', 'Generated token');
    const lab = Draw.el('span', 'gen-step-label');
    lab.id = 'step-label';
    ctl.append(prev, range, next, lab);
    r3.appendChild(ctl);
    left.appendChild(r3);
    panel.appendChild(left);

    const right = Draw.el('div', 'gen-chart');
    right.id = 'gen-chart';
    panel.appendChild(right);
    $('input-line').after(panel);

    prev.addEventListener('click', () => setStep(step - 1));
    next.addEventListener('click', () => setStep(step + 1));
    range.addEventListener('input', () => setStep(+range.value));
    document.addEventListener('keydown', ev => {
      const tg = ev.target && ev.target.tagName;
      if (tg === 'INPUT' || tg === 'SELECT' || tg === 'TEXTAREA' || ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
      if (ev.key === 'ArrowLeft') { ev.preventDefault(); setStep(step - 1); }
      else if (ev.key === 'ArrowRight') { ev.preventDefault(); setStep(step + 1); }
    }, { signal: SIGNAL });
    showStep();
  }

  function showStep() {
    const lab = $('step-label'), right = $('gen-chart');
    $('step-range').value = String(step);
    $('step-prev').disabled = step <= 0;
    $('step-next').disabled = step >= G;
    lab.textContent = '';
    right.textContent = '';
    document.querySelectorAll('.pred-cell.step').forEach(c => c.classList.remove('step'));
    if (!step) {
      lab.appendChild(Draw.el('span', 'muted', 'Step through the ' + G + ' generated tokens (← →): each one\'s attention and the top ' +
        (G ? gen.steps[0].top.length : 0) + ' it was chosen from.'));
      right.hidden = true;
      return;
    }
    const st = gen.steps[step - 1];
    lab.appendChild(Draw.el('strong', null, 'Step ' + step + ' of ' + G));
    lab.appendChild(document.createTextNode(' · position ' + st.position + ' · '));
    const q = Draw.el('span', 'gen-tok');
    q.appendChild(tokenText(Data.text(st.position)));
    lab.appendChild(q);
    lab.appendChild(document.createTextNode(' · p = ' + fmtProb(st.prob)));
    right.hidden = false;
    const h = Draw.el('div', 'pk-title');
    h.appendChild(document.createTextNode('Chosen from the top ' + st.top.length + ' after '));
    quoted(h, Data.label(st.position - 1));
    right.appendChild(h);
    if (gen.strategy === 'sample') right.appendChild(Draw.el('div', 'pk-sub', 'model probabilities, before temperature / top-p'));
    chart(right, st.top, { id: st.id, cand: st, badge: 'chosen', prob: st.prob });
    const cell = document.querySelector('.pred-cell[data-pos="' + st.position + '"]');
    if (cell) {
      cell.classList.add('step');
      const strip = cell.parentElement, cr = cell.offsetLeft - strip.offsetLeft;
      if (cr < strip.scrollLeft || cr + cell.offsetWidth > strip.scrollLeft + strip.clientWidth)
        strip.scrollLeft = Math.max(0, cr - strip.clientWidth / 2);
    }
  }

  function setStep(g) {
    g = Math.max(0, Math.min(G, g | 0));
    if (!gen || g === step) return Promise.resolve();
    step = g;
    showStep();
    return onStep(step ? gen.steps[step - 1].position : -1) || Promise.resolve();
  }

  /* page.js: opts.onStep(raw position or -1) when the step changes. */
  function init(opts) {
    if (opts && opts.onStep) onStep = opts.onStep;
    if (any) $('input-line').closest('.top').classList.add('wide-tags');
    buildStrip();
    buildGen();
  }

  /* after a render: a card whose token was redrawn away goes */
  function refresh() { if (anchor && !anchor.isConnected) hideCard(); }

  return {
    has: !!preds, gen: !!gen, steps: G,
    init, setStep, hideCard, refresh, fmtProb,
    get step() { return step; },
    /* the position a step pins, or -1 */
    position: () => (step ? gen.steps[step - 1].position : -1),
  };
})();
