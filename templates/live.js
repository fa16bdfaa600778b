/* live.js — starts the page. An offline page (its meta has no "live") boots
 * once on its own payload. A live page (served by attnviz serve at GET /,
 * API: docs/serve-api.md) shows the input panel, runs the text through
 * POST /api/run (debounced; a newer edit cancels or outdates an older run),
 * and boots the page again for every run with a source that fetches the
 * attention, thumbnails and q/k from the server as the views ask. For an
 * encoder-decoder model (models[i].enc_dec) the two boxes are the source and
 * the decoder's text (sent as "decoder_text"), and the run's meta has the
 * Encoder / Decoder / Cross stacks the views switch between. A vision model
 * (models[i].image) takes a picture from the file picker instead, sent as the
 * body of POST /api/image (and, for a whole CLIP/SigLIP model, the text box
 * as its text); its meta has the "image" the Image view draws. Each boot
 * gets fresh copies of the page's elements (so the previous boot's listeners
 * go with its elements) and the reader's choices (view, layer, heads, theme).
 * Input text only ever reaches the DOM through textContent and .value. */
/* global boot */

const META0 = JSON.parse(document.getElementById('av-meta').textContent);
if (!META0.live) {
  boot(META0, null, null, new AbortController().signal);
} else {
  Live(META0.live);
}

function Live(cfg) {
  const $ = id => document.getElementById(id);
  const token = new URLSearchParams(location.search).get('token') || cfg.token || '';
  const models = Array.isArray(cfg.models) ? cfg.models : [];
  const DEBOUNCE_MS = 300;
  /* the page's elements a boot fills in, as first written (copied for every boot) */
  const SHELL = ['top', 'toolbar', 'controls', 'heads-bar', 'main', 'foot', 'tooltip', 'modal'];
  const pristine = new Map(SHELL.map(id => [id, $(id).cloneNode(true)]));
  /* what else a boot adds to <body> (the predictions card) goes with its boot */
  const own = new Set(document.body.children);

  const ta = $('live-text'), tb = $('live-text-b'), msel = $('live-model'), pk = $('live-predict'), kin = $('live-k');
  const stat = $('live-status');
  const gk = $('live-generate'), gn = $('live-gen-n'), ck = $('live-chat');
  const pick = $('live-image');
  document.body.dataset.live = 'empty';
  $('live').hidden = false;
  document.documentElement.dataset.theme =
    window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';

  models.forEach((m, i) => {
    const o = document.createElement('option');
    o.value = String(i);
    o.textContent = m.name;
    msel.appendChild(o);
  });
  $('live-model-ctl').hidden = models.length < 2;
  const model = () => models[+msel.value || 0] || null;
  function showModel() {
    const m = model();
    const info = $('live-info');
    info.textContent = '';
    if (!m) { info.textContent = 'No model is served.'; return; }
    const add = (k, v) => {
      const s = document.createElement('span');
      const b = document.createElement('b');
      b.textContent = k;
      s.append(b, document.createTextNode(' ' + v));
      info.appendChild(s);
    };
    if (models.length < 2) add('Model', m.name);
    add('Family', m.family + (m.causal ? ' (decoder)' : ''));
    add('Layers', String(m.layers));
    add('Heads', m.heads + (m.kv_heads && m.kv_heads !== m.heads ? ' (' + m.kv_heads + ' key/value)' : ''));
    add('Max tokens', Number(m.max_tokens).toLocaleString('en-US'));
    /* a vision model reads a picture (and a whole CLIP/SigLIP model a text beside it) */
    const img = !!m.image;
    $('live-lab-img').hidden = $('live-pick').hidden = !img;
    $('live-lab-a').hidden = ta.hidden = img && !m.image_text;
    $('live-lab-b').hidden = tb.hidden = img;
    if (img) add('Input', m.vlm ? 'a picture inside a text' : m.image_text ? 'a picture and a text' : 'a picture');
    /* a vision-language model's text holds the picture's place: an empty box gets the model's example */
    if (m.vlm && !ta.value.trim() && typeof m.image_example === 'string') ta.value = m.image_example;
    /* an encoder-decoder reads a source and the decoder's text (teacher-forced after its start token) */
    const labA = $('live-lab-a'), labB = $('live-lab-b');
    labA.textContent = m.enc_dec ? 'Source' : img ? 'Text' : 'Sentence A';
    labB.textContent = m.enc_dec ? 'Decoder text ' : 'Sentence B ';
    const opt = document.createElement('span');
    opt.className = 'opt';
    opt.textContent = m.enc_dec ? 'teacher-forced' : 'optional';
    labB.appendChild(opt);
    ta.placeholder = m.vlm ? 'The text, with ' + m.image_placeholder + ' where the picture goes'
      : img ? 'Compared with the picture (optional): a photo of …' : 'Type a sentence…';
    tb.placeholder = m.enc_dec ? 'The decoder\'s tokens after its start token (e.g. a translation)' : 'A second sentence (a pair)';
    if (m.enc_dec) add('Kind', 'encoder-decoder');
    $('live-generate-label').hidden = !m.enc_dec;
    tb.disabled = !!(m.enc_dec && gk.checked); /* generating: the decoder's tokens are decoded, not read */
    $('live-predict-label').hidden = !m.predict;
    /* a decoder that ships a chat template: the text can be one user message in it (one text, no pair) */
    $('live-chat-label').hidden = !m.chat;
    if (!m.chat) ck.checked = false;
    if (!m.enc_dec) tb.disabled = ck.checked;
    $('live-predict-label').title = m.causal ? 'The K most probable next tokens at every position'
      : 'The K most probable fill-ins at every [MASK] / <mask>';
  }
  showModel();
  if (typeof cfg.text === 'string') ta.value = cfg.text;
  if (typeof cfg.text_b === 'string') tb.value = cfg.text_b;

  /* ---------------------------------------------------------------- status */

  function status(kind, parts) {
    stat.textContent = '';
    stat.dataset.kind = kind;
    for (const p of parts) {
      if (stat.firstChild) stat.appendChild(document.createTextNode(' '));
      const s = document.createElement('span');
      s.className = p.cls || '';
      s.textContent = p.text;
      stat.appendChild(s);
    }
  }
  async function errorOf(r) {
    try {
      const j = await r.json();
      if (j && typeof j.error === 'string') return j.error;
    } catch (_) { /* not JSON */ }
    return 'HTTP ' + r.status;
  }
  const headers = extra => Object.assign({ 'X-Attnviz-Token': token }, extra || {});

  /* ---------------------------------------------------------------- runs */

  let seq = 0, runCtl = null, timer = null, runId = null, bootCtl = null, runs = 0;
  const seen = new Set();
  /* the source a boot's Data reads: this run's blocks, fetched with the token */
  function source(run, signal) {
    return {
      run,
      get(path) {
        const url = path + (path.includes('?') ? '&' : '?') + 'run=' + encodeURIComponent(run);
        return fetch(url, { headers: headers(), signal, cache: 'no-store' }).then(async r => {
          if (!r.ok) throw new Error(await errorOf(r));
          const shape = (r.headers.get('X-Attnviz-Shape') || '').split(',').filter(Boolean);
          return { bytes: new Uint8Array(await r.arrayBuffer()), shape };
        });
      },
    };
  }
  function reboot(meta, run, src) {
    const prev = window.attnviz && window.attnviz.dispose ? window.attnviz.dispose() : null;
    if (bootCtl) bootCtl.abort();
    bootCtl = new AbortController();
    const oldMain = $('main');
    const keepH = oldMain ? oldMain.offsetHeight : 0;
    for (const e of [...document.body.children]) if (!own.has(e) && !SHELL.includes(e.id)) e.remove();
    for (const id of SHELL) $(id).replaceWith(pristine.get(id).cloneNode(true));
    /* the new view draws after its blocks arrive: hold the height so the page does not jump */
    if (keepH) {
      $('main').style.minHeight = keepH + 'px';
      setTimeout(() => { const m = $('main'); if (m) m.style.minHeight = ''; }, 1500);
    }
    delete document.body.dataset.live;
    delete document.body.dataset.ready; /* set again once this run's first view is drawn */
    boot(meta, src || source(run, bootCtl.signal), prev, bootCtl.signal);
  }
  function fmtMs(v) { return v >= 100 ? v.toFixed(0) : v.toFixed(1); }
  async function run() {
    clearTimeout(timer);
    if (genCtl) genCtl.abort();
    const my = ++seq;
    if (runCtl) runCtl.abort();
    runCtl = null;
    const m = model();
    const text = ta.value;
    if (!m) return;
    const file = m.image && pick.files && pick.files[0];
    if (m.image && !file) {
      status('idle', [{ text: 'Choose a picture (PNG or JPEG) to run ' + m.name + '.' }]);
      document.body.dataset.busy = '';
      return;
    }
    if (m.vlm && !text.includes(m.image_placeholder)) {
      status('idle', [{ text: 'Write ' + m.image_placeholder + ' in the text where the picture goes, to run ' + m.name + '.' }]);
      document.body.dataset.busy = '';
      return;
    }
    if (!m.image && !text.trim()) {
      status('idle', [{ text: 'Type a sentence to run ' + m.name + '.' }]);
      document.body.dataset.busy = '';
      return;
    }
    const ctl = new AbortController();
    runCtl = ctl;
    const gen = m.enc_dec && gk.checked ? Math.max(1, Math.min(512, Math.round(+gn.value) || 10)) : 0;
    const body = gen ? { model: m.id, text, generate: gen } : m.enc_dec ? { model: m.id, text, decoder_text: tb.value } : {
      model: m.id, text, text_b: !ck.checked && tb.value.trim() ? tb.value : null,
      predict: m.predict && pk.checked ? Math.max(1, Math.min(100, Math.round(+kin.value) || 5)) : 0,
    };
    if (!m.enc_dec && m.chat && ck.checked) body.chat = true;
    document.body.dataset.busy = '1';
    status('busy', [{ text: 'Running ' + m.name + '…' }]);
    const t0 = performance.now();
    /* a long input's pass takes a while: the seconds it has run, so a wait is seen to move */
    const tick = setInterval(() => {
      const secs = Math.floor((performance.now() - t0) / 1000);
      if (my === seq && secs >= 1) status('busy', [{ text: 'Running ' + m.name + '…' }, { text: secs + ' s', cls: 'st-ms' }]);
    }, 1000);
    try {
      /* a picture: its file is the body, as the browser read it; its type says PNG or JPEG (the server refuses others) */
      const q = file ? '?model=' + m.id + (m.image_text && text.trim() ? '&text=' + encodeURIComponent(text) : '') +
        '&name=' + encodeURIComponent(file.name.slice(0, 120)) : '';
      const r = file
        ? await fetch('/api/image' + q, { method: 'POST', headers: headers({ 'Content-Type': file.type || 'application/octet-stream' }), body: file, signal: ctl.signal, cache: 'no-store' })
        : await fetch('/api/run', {
          method: 'POST', headers: headers({ 'Content-Type': 'application/json' }), body: JSON.stringify(body), signal: ctl.signal, cache: 'no-store',
        });
      if (!r.ok) throw new Error(await errorOf(r));
      const j = await r.json();
      if (my !== seq) return; /* a newer edit is on its way */
      if (!j || typeof j.run !== 'string' || !j.meta || !Array.isArray(j.meta.tokens)) throw new Error('the server sent no run');
      /* the server answers an input it has run before with that run (and no forward pass) */
      const again = seen.has(j.run);
      seen.add(j.run);
      if (j.run !== runId) reboot(j.meta, j.run);
      runId = j.run;
      runs++;
      document.body.dataset.run = j.run;
      document.body.dataset.runs = String(runs);
      const ms = j.ms || {};
      const total = performance.now() - t0;
      const im = j.meta.image;
      const parts = [{ text: im ? im.size[0] + ' × ' + im.size[1] + ' ' + im.mode + ' picture → ' + j.n + ' tokens (' +
          im.grid.rows + ' × ' + im.grid.cols + ' patches)'
        : j.n + (typeof j.n_decoder === 'number' ? ' source and ' + j.n_decoder + ' decoder tokens' : ' tokens'), cls: 'st-n' },
        { text: (again ? 'the same input as before (run ' + j.run + ', not computed again)'
          : 'forward ' + fmtMs(ms.forward || 0) + ' ms' + (im ? '' : ' · tokenize ' + fmtMs(ms.tokenize || 0) + ' ms') +
            (ms.queue >= 1 ? ' · queued ' + fmtMs(ms.queue) + ' ms' : '')) + ' · ' + fmtMs(total) + ' ms in all', cls: 'st-ms' }];
      for (const w of Array.isArray(j.warnings) ? j.warnings : []) parts.push({ text: String(w), cls: 'st-warn' });
      status(parts.some(p => p.cls === 'st-warn') ? 'warn' : 'ok', parts);
      $('live-download').disabled = false;
    } catch (err) {
      if (my !== seq || (err && err.name === 'AbortError')) return;
      status('error', [{ text: 'Error: ' + (err && err.message ? err.message : String(err)), cls: 'st-err' }]);
    } finally {
      clearInterval(tick);
      if (my === seq) document.body.dataset.busy = '';
    }
  }
  function later() {
    clearTimeout(timer);
    document.body.dataset.busy = '1';
    timer = setTimeout(run, DEBOUNCE_MS);
  }
  ta.addEventListener('input', later);
  tb.addEventListener('input', later);
  kin.addEventListener('input', () => { if (pk.checked) later(); });
  pk.addEventListener('change', () => run());
  gk.addEventListener('change', () => { tb.disabled = gk.checked; run(); });
  ck.addEventListener('change', () => { tb.disabled = ck.checked; run(); });
  gn.addEventListener('input', () => { if (gk.checked) later(); });
  msel.addEventListener('change', () => { showModel(); run(); });
  pick.addEventListener('change', () => {
    const f = pick.files && pick.files[0];
    $('live-image-name').textContent = f ? (f.size / 1024).toFixed(f.size < 10240 ? 1 : 0) + ' KB' : 'PNG or JPEG, decoded on the server';
    run();
  });
  /* Ctrl/Cmd+Enter runs now */
  for (const t of [ta, tb]) t.addEventListener('keydown', ev => { if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run(); } });

  /* ---------------------------------------------------------------- download */

  async function download() {
    if (!runId) return;
    const btn = $('live-download');
    btn.disabled = true;
    const old = btn.textContent;
    btn.textContent = 'Preparing…';
    try {
      let r = await fetch('/api/page?run=' + encodeURIComponent(runId), { headers: headers(), cache: 'no-store' });
      let note = null;
      if (r.status === 413 && window.attnviz && window.attnviz.data) {
        /* the whole capture is past the server's budget: the layer shown */
        const D = window.attnviz.data, L = D.layers[window.attnviz.state.layer];
        r = await fetch('/api/page?run=' + encodeURIComponent(runId) + '&layers=' + L, { headers: headers(), cache: 'no-store' });
        note = 'The page with every layer would be too large; saved layer ' + L + ' only.';
      }
      if (!r.ok) throw new Error(await errorOf(r));
      const blob = await r.blob();
      const url = URL.createObjectURL(new Blob([blob], { type: 'text/html' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = 'attnviz.html';
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 30000);
      if (note) status('warn', [{ text: note, cls: 'st-warn' }]);
    } catch (err) {
      status('error', [{ text: 'Download failed: ' + (err && err.message ? err.message : String(err)), cls: 'st-err' }]);
    } finally {
      btn.textContent = old;
      btn.disabled = false;
    }
  }
  $('live-download').addEventListener('click', download);
  $('live-download').disabled = true;

  /* ---------------------------------------------------------------- streamed generation */

  /* Generate (a decoder with a head): POST /v1/completions with stream and the
   * attention extension (every layer's and head's whole rows, the prompt's
   * first; docs/serve-api.md). Each token's rows arrive with it: the page is
   * booted again on the document so far, its attention read from those rows
   * (a source that hands the views their codes), and the generation step set
   * to the newest token, which the head and matrix views follow. Stop (or a
   * new run) aborts the request: the server frees its place at once. */
  const sBtn = $('live-stream'), sN = $('live-stream-n');
  let genCtl = null;
  function showStream() {
    const m = model();
    $('live-stream-ctl').hidden = !(m && m.causal && m.predict && !m.enc_dec);
  }
  showStream();
  msel.addEventListener('change', showStream);
  const codeOf = w => Math.min(10000, Math.round(w * 10000));
  /* the views' source over the rows received: rows[layer][head][i] is query i's row (i + 1 keys) */
  function rowSource(rows, n, cfg) {
    return {
      run: 'generation',
      get(path) {
        const u = new URL(path, location.origin), q = u.searchParams;
        if (u.pathname === '/api/attention') {
          const li = +q.get('layer'), hs = q.get('heads').split(',').map(Number), codes = new Uint16Array(hs.length * n * n);
          hs.forEach((h, k) => {
            const R = rows[li][h];
            for (let i = 0; i < n; i++) {
              const r = R[i];
              if (!r) continue;
              for (let j = 0; j < r.length; j++) codes[(k * n + i) * n + j] = codeOf(r[j]);
            }
          });
          return Promise.resolve({ codes, shape: [hs.length, n, n] });
        }
        if (u.pathname === '/api/thumbs') {
          const s = Math.min(n, 64), L = cfg.layers, H = cfg.heads, codes = new Uint16Array(L * H * s * s);
          const cnt = new Float64Array(s);
          for (let i = 0; i < n; i++) cnt[Math.floor(i * s / n)]++;
          for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) {
            const acc = new Float64Array(s * s), R = rows[l][h];
            for (let i = 0; i < n; i++) {
              const r = R[i], bi = Math.floor(i * s / n);
              if (r) for (let j = 0; j < r.length; j++) acc[bi * s + Math.floor(j * s / n)] += r[j];
            }
            const base = (l * H + h) * s * s;
            for (let c = 0; c < s * s; c++) codes[base + c] = codeOf(acc[c] / cnt[Math.floor(c / s)]);
          }
          return Promise.resolve({ codes, shape: [L, H, s, s] });
        }
        return Promise.reject(new Error('queries and keys: run the text once the generation has ended'));
      },
    };
  }
  /* the prompt's document (POST /api/run's meta) grown by the generated tokens */
  function grown(meta0, toks, finish, text) {
    const m = JSON.parse(JSON.stringify(meta0)), P = meta0.n;
    for (const t of toks) {
      m.tokens.push(t.token);
      if (m.display_tokens) m.display_tokens.push(t.text);
      m.input_ids.push(t.id);
      m.token_type_ids.push(0);
      m.special.push(0);
      m.word_start.push(/^[\s]/.test(t.text) ? 1 : 0);
    }
    m.n = P + toks.length;
    const prob = lp => (typeof lp === 'number' ? Math.exp(lp) : 0);
    m.generation = {
      prompt_tokens: P, generated_tokens: toks.length, stop_reason: finish === 'stop' ? 'eos' : 'length',
      strategy: 'greedy', text,
      steps: toks.map(t => ({ position: t.position, id: t.id, token: t.token, prob: prob(t.logprob),
        top: (t.top || []).map(o => ({ token: o.token, display: o.text, id: o.id, prob: prob(o.logprob) })) })),
    };
    return m;
  }
  async function generateStream() {
    if (genCtl) { genCtl.abort(); return; } /* Stop */
    const m = model(), text = ta.value;
    if (!m || !text.trim()) return;
    clearTimeout(timer);
    if (runCtl) runCtl.abort();
    seq++;
    const ctl = new AbortController();
    genCtl = ctl;
    sBtn.textContent = 'Stop';
    sBtn.classList.add('stop');
    document.body.dataset.generating = '1';
    const N = Math.max(1, Math.min(256, Math.round(+sN.value) || 24));
    const t0 = performance.now();
    let toks = [], out = '', finish = null, n = 0, meta0 = null, drawn = 0, timerDraw = null;
    const rows = Array.from({ length: m.layers }, () => Array.from({ length: m.heads }, () => []));
    const keep = t => {
      t.rows.forEach((byHead, l) => byHead.forEach((r, h) => { rows[l][h][t.position] = Float32Array.from(r); }));
      n = Math.max(n, t.position + 1);
    };
    /* boots again on what has arrived, at most every 120 ms, and pins the newest token */
    const draw = () => {
      timerDraw = null;
      if (!meta0 || n < meta0.n) return;
      drawn = performance.now();
      runId = null;
      reboot(grown(meta0, toks, finish, out), null, rowSource(rows, n, m));
      const follow = () => { if (window.attnviz && window.attnviz.pred && toks.length) window.attnviz.pred.setStep(toks.length); };
      if (document.body.dataset.ready) follow(); else setTimeout(follow, 0);
      document.body.dataset.generated = String(toks.length);
    };
    const later = () => { if (!timerDraw) timerDraw = setTimeout(draw, Math.max(0, 120 - (performance.now() - drawn))); };
    const say = (kind, extra) => status(kind, [{ text: toks.length + ' of up to ' + N + ' tokens', cls: 'st-n' },
      { text: (performance.now() - t0).toFixed(0) + ' ms', cls: 'st-ms' }, { text: out.replace(/\s*\n\s*/g, ' ⏎ '), cls: 'st-gen' }].concat(extra || []));
    try {
      status('busy', [{ text: 'Generating with ' + m.name + '…' }]);
      /* with Chat, the text in the model's chat template: the run renders it, and its tokens are the prompt */
      const chat = !!(m.chat && ck.checked);
      const r0 = await fetch('/api/run', { method: 'POST', headers: headers({ 'Content-Type': 'application/json' }),
        body: JSON.stringify(chat ? { model: m.id, text, chat: true } : { model: m.id, text }), signal: ctl.signal, cache: 'no-store' });
      if (!r0.ok) throw new Error(await errorOf(r0));
      meta0 = (await r0.json()).meta;
      const r = await fetch('/v1/completions', {
        method: 'POST', signal: ctl.signal, cache: 'no-store',
        headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: m.name, prompt: chat ? meta0.input_ids : text, max_tokens: N, temperature: 0, stream: true, logprobs: 5,
          attention: { rows: true, prompt: true, top_k: 0, stats: false } }),
      });
      if (!r.ok) {
        let msg = 'HTTP ' + r.status;
        try { msg = (await r.json()).error.message; } catch (_) { /* not JSON */ }
        throw new Error(msg);
      }
      const reader = r.body.getReader(), dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          if (!ev.startsWith('data: ')) continue;
          const data = ev.slice(6);
          if (data === '[DONE]') continue;
          const j = JSON.parse(data);
          if (j.error) throw new Error(j.error.message);
          const a = j.attention || {};
          if (Array.isArray(a.prompt)) a.prompt.forEach(keep);
          if (typeof a.position === 'number') {
            keep(a);
            delete a.rows;
            toks.push(a);
          }
          const c = j.choices && j.choices[0];
          if (c) {
            out += c.text || '';
            if (c.finish_reason) finish = c.finish_reason;
          }
          if (n) { later(); say('busy'); }
        }
      }
      clearTimeout(timerDraw);
      draw();
      say('ok', [{ text: finish === 'stop' ? 'the model ended it' : 'max tokens', cls: 'st-ms' }]);
    } catch (err) {
      clearTimeout(timerDraw);
      if (err && err.name === 'AbortError') {
        if (toks.length) { draw(); say('warn', [{ text: 'stopped', cls: 'st-warn' }]); }
        else status('idle', [{ text: 'Stopped.' }]);
      } else {
        status('error', [{ text: 'Error: ' + (err && err.message ? err.message : String(err)), cls: 'st-err' }]);
      }
    } finally {
      if (genCtl === ctl) genCtl = null;
      sBtn.textContent = 'Generate';
      sBtn.classList.remove('stop');
      delete document.body.dataset.generating;
    }
  }
  sBtn.addEventListener('click', generateStream);

  window.attnvizLive = { run, generate: generateStream, get runId() { return runId; }, get seq() { return seq; }, models };
  if (models.length) run(); /* a text given on the command line, or what the first model waits for */
  else status('idle', [{ text: 'No model is served.' }]);
  ta.focus();
}
