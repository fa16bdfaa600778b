/* heads.js — the "Find heads" panel of the model view: per-head scores of this
 * input computed from the attention the page holds, with the definitions of
 * `attnviz heads` (docs/heads.md: share of all attention on a pattern, as
 * TransformerLens's detect_head; distance and entropy as row means). A picked
 * score shades the model view's thumbnails (dim = low), badges each with its
 * score and rank, and lists the best heads; a click on either opens the head.
 * The page's weights are the captured floats rounded to 4 decimals, so its
 * scores differ from the command's by about that much. Needs from data.js:
 * Data (attention, headMatrix, meta.input_ids, special, vocab, stacked). */
/* global Data, Draw, Tiles */
/* exported Heads */

const Heads = (() => {
  const SCORES = [
    ['previous', 'Previous token', 'attention on token i−1'],
    ['next', 'Next token', 'attention on token i+1'],
    ['self', 'Self', 'attention on the token itself'],
    ['first', 'First token (sink)', 'attention on position 0: [CLS] or BOS'],
    ['sep', '[SEP]', 'attention on [SEP] / </s>'],
    ['duplicate', 'Duplicate token', 'attention on earlier copies of the same token'],
    ['induction', 'Induction', 'attention on the token after an earlier copy of the same token (in this input)'],
    ['distance', 'Mean distance', 'mean over rows of Σ a·|i−j| (tokens)'],
    ['entropy', 'Entropy', 'mean over rows of −Σ a·ln a (nats)'],
  ];
  const TOP = 5;
  const cache = {};        /* score name -> Promise of Float64Array (L*H) */
  let picked = '', openHead = null;

  /* One head's score: A is n*n row-major, ids the input ids, sep[j] 1 for a [SEP]. */
  function score(k, A, n, ids, sep) {
    if (k === 'distance' || k === 'entropy') {
      let acc = 0;
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++) {
          const p = A[i * n + j];
          if (k === 'distance') acc += p * Math.abs(i - j);
          else if (p > 0) acc -= p * Math.log(p);
        }
      return acc / n;
    }
    let total = 0, hit = 0;
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        const p = A[i * n + j];
        total += p;
        let on = false;
        switch (k) {
          case 'previous': on = j === i - 1; break;
          case 'next': on = j === i + 1; break;
          case 'self': on = j === i; break;
          case 'first': on = j === 0; break;
          case 'sep': on = sep[j] === 1; break;
          case 'duplicate': on = j < i && ids[j] === ids[i]; break;
          case 'induction': on = j >= 1 && j <= i && ids[j - 1] === ids[i]; break;
          default: break;
        }
        if (on) hit += p;
      }
    return total > 0 ? hit / total : NaN;
  }

  /* A long input (tiles.js) keeps no matrices: its scores are the means of
   * the statistics the forward pass streamed per query row (--telemetry's,
   * GET /api/headstats), the same definitions (a row's weights sum to 1, so
   * the share of all attention is the mean of the rows' shares). */
  const FROM_STATS = { previous: 'prev', self: 'self', first: 'sink', duplicate: 'dup', distance: 'distance', entropy: 'entropy' };
  const fromStats = () => Tiles.hasStats;

  /* Every selected head's score k (layer index li, head index h at li*H+h). */
  function scores(k0) {
    const k = Data.measureKey + k0; /* value-weighted shares (--measure norm) are scored apart */
    if (!cache[k] && fromStats()) {
      cache[k] = Tiles.stats().then(st => {
        const f = st.fields.indexOf(FROM_STATS[k0]), out = new Float64Array(Data.L * Data.H).fill(NaN);
        if (f < 0) return out;
        for (let li = 0; li < Data.L; li++)
          for (let h = 0; h < Data.H; h++) out[li * Data.H + h] = st.mean[Data.layers[li]][Data.heads[h]][f];
        return out;
      });
      cache[k].catch(() => { delete cache[k]; });
    }
    if (!cache[k]) {
      cache[k] = (async () => {
        const n = Data.n, ids = Data.meta.input_ids || [], out = new Float64Array(Data.L * Data.H);
        const sep = new Uint8Array(n);
        for (let j = 0; j < n; j++) sep[j] = Data.special[j] && /^(\[SEP\]|<\/s>)$/.test(Data.vocab(j)) ? 1 : 0;
        for (let li = 0; li < Data.L; li++) {
          await Data.attention(li);
          for (let h = 0; h < Data.H; h++) out[li * Data.H + h] = score(k0, Data.headMatrix(li, h), n, ids, sep);
          await new Promise(r => setTimeout(r, 0));
        }
        return out;
      })();
    }
    return cache[k];
  }

  /* The heads ordered by score k, highest first: [{li, h, layer, head, score}]. */
  async function ranking(k) {
    const s = await scores(k), r = [];
    for (let li = 0; li < Data.L; li++)
      for (let h = 0; h < Data.H; h++) r.push({ li, h, layer: Data.layers[li], head: Data.heads[h], score: s[li * Data.H + h] });
    r.sort((a, b) => (isNaN(a.score) - isNaN(b.score)) || (b.score - a.score) || (a.li - b.li) || (a.h - b.h));
    return r;
  }

  const fmt = (k, v) => (isNaN(v) ? '–' : k === 'distance' || k === 'entropy' ? v.toFixed(2) : v.toFixed(3));

  /* the panel: a score picker and the best heads */
  const box = Draw.el('div', 'ctl find-heads');
  box.id = 'ctl-find';
  const lab = Draw.el('label', null, 'Find heads');
  lab.htmlFor = 'find-select';
  const sel = Draw.el('select');
  sel.id = 'find-select';
  sel.title = 'Shade the thumbnails by a score of this input (attnviz heads computes them over a corpus)';
  sel.appendChild(new Option('—', ''));
  for (const [k, label, what] of SCORES) {
    const o = new Option(label, k);
    o.title = what;
    sel.appendChild(o);
  }
  /* a long input: the streamed statistics' scores only */
  if (fromStats()) {
    sel.title = 'Shade the thumbnails by a score of this input, from the statistics the forward pass streamed per query row (no matrices kept)';
    for (const o of sel.options) if (o.value && !FROM_STATS[o.value]) { o.disabled = true; o.title += ' (not among the streamed statistics of a long input)'; }
  } else if (Data.live && Data.L * Data.H * Data.n * Data.n > 64e6) {
    /* a live page would fetch every head's n x n block to score them: not past a budget */
    sel.disabled = true;
    sel.title = 'Scoring every head here would fetch every head\'s ' + Data.n + ' × ' + Data.n + ' attention from the server; attnviz heads computes the scores';
  }
  const list = Draw.el('div', 'find-list');
  box.append(lab, sel, list);

  async function decorate() {
    const host = document.getElementById('view-model');
    const grid = host && host.querySelector('.mv');
    const k = picked;
    list.textContent = '';
    if (grid) {
      grid.classList.toggle('scored', !!k);
      grid.querySelectorAll('.thumb').forEach(b => {
        b.style.removeProperty('--score');
        b.removeAttribute('data-rank');
        const old = b.querySelector('.score');
        if (old) old.remove();
      });
    }
    if (!k) { box.dataset.ready = ''; return; }
    const r = await ranking(k);
    if (k !== picked) return;
    const vals = r.map(x => x.score).filter(v => !isNaN(v));
    const lo = Math.min(...vals), hi = Math.max(...vals), span = hi - lo || 1;
    r.forEach((x, rank) => {
      if (rank < TOP) {
        const b = Draw.el('button', 'btn find-pick', 'L' + x.layer + '·H' + x.head + ' ' + fmt(k, x.score));
        b.type = 'button';
        b.dataset.li = x.li;
        b.dataset.h = x.h;
        b.title = 'Open layer ' + x.layer + ', head ' + x.head;
        b.addEventListener('click', () => openHead(x.li, x.h));
        list.appendChild(b);
      }
      const th = grid && grid.querySelector('.thumb[data-li="' + x.li + '"][data-h="' + x.h + '"]');
      if (!th) return;
      th.style.setProperty('--score', isNaN(x.score) ? '0' : String((x.score - lo) / span));
      th.dataset.rank = String(rank + 1);
      const badge = Draw.el('span', 'score' + (rank < TOP ? ' best' : ''), (rank < TOP ? '#' + (rank + 1) + ' · ' : '') + fmt(k, x.score));
      th.appendChild(badge);
      th.title = th.title.replace(/ · .*$/, '') + ' · ' + sel.selectedOptions[0].textContent + ' ' + fmt(k, x.score) + ' (rank ' + (rank + 1) + ')';
    });
    box.dataset.ready = k;
  }

  sel.addEventListener('change', () => { picked = sel.value; decorate(); });

  return {
    SCORES: SCORES.map(s => s[0]),
    score, scores, ranking,
    /* page.js: once, with the controls row and the function that opens a head */
    init(controls, open) {
      openHead = open;
      if (!Data.stacked) controls.appendChild(box);
    },
    /* page.js: after every draw; the panel belongs to the model view */
    refresh(view) {
      box.hidden = view !== 'model' || Data.stacked;
      if (!box.hidden) decorate();
    },
    pick(k) { sel.value = k; picked = sel.value; return decorate(); },
  };
})();
