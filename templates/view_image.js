/* view_image.js — the Image view of an image run (attnviz --image): the
 * preprocessed picture, its patch grid and one query's attention over the
 * patches as a heat overlay (a head, the mean or max of the active heads, or
 * the rollout: data.js's Rollout). The query: the class, distillation or a
 * register token, SigLIP's pooling head, every query averaged (what each patch
 * receives), or a clicked patch. Beside it the special tokens' share and the
 * most attended patches (DINOv2 without registers: a few background patches
 * take most); below, the layer's heads drawn the same way. Reads
 * Data.meta.image (image_out.c). */
/* global Data, Tok, Fmt, Draw, Tip, Views, Derived, Measure */

(() => {

const IM = () => Data.meta.image;
/* The image view's query, kept across redraws: a raw token index, or one of
 * the keywords 'pool' (SigLIP's pooling head) and 'all' (every query, averaged). */
let Q = null;
let SMOOTH = false, GRID = true;

/* the picture, decoded once from the page's own bytes (offline: a data: URL) */
let picture = null, pictureReady = null;
function loadPicture() {
  if (pictureReady) return pictureReady;
  pictureReady = new Promise(resolve => {
    const img = new Image();
    img.onload = () => { picture = img; resolve(img); };
    img.onerror = () => resolve(null);
    img.src = 'data:image/png;base64,' + IM().png;
  });
  return pictureReady;
}

/* view-local styles: the one file a view is (views.js), so its rules come with it */
function ensureStyle() {
  if (document.getElementById('iv-style')) return;
  const st = document.createElement('style');
  st.id = 'iv-style';
  st.textContent = '.iv{display:flex;gap:22px;align-items:flex-start;flex-wrap:wrap;margin-top:6px}' +
    '.iv-fig{flex:none;border-radius:8px;overflow:hidden;box-shadow:var(--shadow)}.iv-fig canvas{display:block;cursor:crosshair}' +
    '.iv-side{flex:1;min-width:260px;max-width:420px;display:flex;flex-direction:column;gap:14px}' +
    '.iv-card{background:var(--panel);border:1px solid var(--line);border-radius:10px;padding:10px 12px}' +
    '.iv-card h3{margin:0 0 8px;font-size:12px;font-weight:650;text-transform:uppercase;color:var(--muted)}' +
    '.iv-q{display:flex;flex-wrap:wrap;gap:6px}.iv-q button{font:inherit;font-size:12.5px;padding:3px 9px;' +
    'border-radius:999px;border:1px solid var(--line-2);background:var(--panel-2);color:var(--ink);cursor:pointer}' +
    '.iv-q button[aria-pressed=true]{background:var(--accent);border-color:var(--accent);color:var(--accent-ink)}' +
    '.iv-row{display:grid;grid-template-columns:74px 1fr 52px 52px;gap:8px;align-items:center;font-size:12.5px;padding:2px 0}' +
    '.iv-row.hd{color:var(--muted);font-size:11px}.iv-bar{height:8px;border-radius:4px;background:var(--bar-track);overflow:hidden}' +
    '.iv-bar>i{display:block;height:100%;background:var(--bar)}' +
    '.iv-num{text-align:right;font-variant-numeric:tabular-nums;font-family:var(--mono);font-size:11.5px}' +
    '.iv-legend{display:flex;align-items:center;gap:8px;font-size:11.5px;color:var(--muted)}' +
    '.iv-opts{display:flex;gap:14px;font-size:12.5px;color:var(--ink-2)}.iv-heads{display:grid;gap:10px;margin-top:18px}' +
    '.iv-head{font:inherit;padding:4px;border-radius:8px;border:1px solid var(--line);background:var(--panel);cursor:pointer;' +
    'display:flex;flex-direction:column;align-items:center;gap:3px;font-size:11.5px}' +
    '.iv-head.cur{outline:2px solid var(--accent);outline-offset:1px}.iv-head canvas{display:block;border-radius:4px}';
  document.head.appendChild(st);
}

/* A perceptual heat ramp (dark violet, red, orange, pale yellow) at a in [0, 1]. */
const RAMP = [[13, 8, 135], [126, 3, 168], [204, 71, 120], [248, 149, 64], [240, 249, 33]];
function ramp(a) {
  const x = Math.max(0, Math.min(1, a)) * (RAMP.length - 1), i = Math.min(RAMP.length - 2, Math.floor(x)), f = x - i;
  return RAMP[i].map((v, k) => v + (RAMP[i + 1][k] - v) * f);
}

/* The n x n matrix the view reads (raw tokens): the focused head, the mean or
 * max of the active heads, or the rollout; null until the rollout is computed. */
function matrixFor(c, t) {
  if (c.mode === 'heads') return Derived.head(c.li, c.focus, t);
  if (c.mode === 'rollout') return Derived.rollout(c.li, c.hs, t);
  return Derived.aggregate(c.li, c.hs, c.mode, t);
}

/* The query's weights over every token (n): a row of A, SigLIP's pooling head
 * (its heads as the mode says; through the rollout: its mean times R), or
 * every query averaged (what each token receives). */
function queryRow(A, n, c, q) {
  const im = IM();
  if (q === 'all') {
    const w = new Float32Array(n);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) w[j] += A[i * n + j] / n;
    return w;
  }
  if (q === 'pool') {
    const P = im.pooling_attention, H = P.length, w = new Float32Array(n);
    const heads = c.mode === 'heads' ? [Data.heads[c.focus]] : c.hs.map(h => Data.heads[h]);
    const use = heads.filter(h => h < H);
    if (!use.length) return w;
    if (c.mode === 'max') for (const h of use) for (let j = 0; j < n; j++) w[j] = Math.max(w[j], P[h][j]);
    else for (const h of use) for (let j = 0; j < n; j++) w[j] += P[h][j] / use.length;
    if (c.mode !== 'rollout') return w;
    const r = new Float32Array(n); /* the probe's mean attention through the rollout below it */
    for (let k = 0; k < n; k++) if (w[k]) for (let j = 0; j < n; j++) r[j] += w[k] * A[k * n + j];
    return r;
  }
  return A.subarray(q * n, q * n + n);
}

/* The query's weights over the patches as a rows x cols grid, and its largest. */
function patchGrid(w) {
  const im = IM(), R = im.grid.rows, C = im.grid.cols, g = new Float32Array(R * C);
  let mx = 0;
  for (let p = 0; p < R * C; p++) {
    g[p] = w[im.first_patch + p];
    if (g[p] > mx) mx = g[p];
  }
  return { g, mx, R, C };
}

/* The picture with the grid's heat over it, into canvas cv of W x H CSS pixels. */
function paintOverlay(cv, W, H, grid, gamma, opts) {
  const ctx = Draw.sizeCanvas(cv, W, H);
  ctx.clearRect(0, 0, W, H);
  if (picture) {
    /* the picture in grey, so that the heat's colors read as weights */
    ctx.imageSmoothingEnabled = true;
    ctx.filter = opts.color ? 'none' : 'grayscale(1) contrast(0.9)';
    ctx.drawImage(picture, 0, 0, W, H);
    ctx.filter = 'none';
  }
  const { g, mx, R, C } = grid;
  const heat = document.createElement('canvas');
  heat.width = C;
  heat.height = R;
  const hx = heat.getContext('2d'), img = hx.createImageData(C, R);
  for (let p = 0; p < R * C; p++) {
    let a = mx > 0 ? g[p] / mx : 0;
    if (gamma !== 1) a = Math.pow(a, gamma);
    const rgb = ramp(a);
    img.data[4 * p] = rgb[0];
    img.data[4 * p + 1] = rgb[1];
    img.data[4 * p + 2] = rgb[2];
    img.data[4 * p + 3] = Math.round(255 * (a < 0.03 ? 0 : 0.12 + 0.7 * a)); /* nothing over the unattended */
  }
  hx.putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = !!opts.smooth;
  ctx.drawImage(heat, 0, 0, W, H);
  ctx.imageSmoothingEnabled = true;
  const cw = W / C, ch = H / R;
  if (opts.grid && cw >= 6) {
    ctx.strokeStyle = 'rgba(255,255,255,0.22)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let x = 1; x < C; x++) { ctx.moveTo(Math.round(x * cw) + 0.5, 0); ctx.lineTo(Math.round(x * cw) + 0.5, H); }
    for (let y = 1; y < R; y++) { ctx.moveTo(0, Math.round(y * ch) + 0.5); ctx.lineTo(W, Math.round(y * ch) + 0.5); }
    ctx.stroke();
  }
  for (const p of opts.marked || []) { /* the most attended patches: dashed */
    ctx.setLineDash([4, 3]);
    ctx.strokeStyle = '#ffffff';
    ctx.lineWidth = 1.5;
    ctx.strokeRect((p % C) * cw + 1, Math.floor(p / C) * ch + 1, cw - 2, ch - 2);
    ctx.setLineDash([]);
  }
  if (opts.query >= 0) { /* the query patch itself */
    ctx.strokeStyle = '#00e5ff';
    ctx.lineWidth = 2.5;
    ctx.strokeRect((opts.query % C) * cw + 1.25, Math.floor(opts.query / C) * ch + 1.25, cw - 2.5, ch - 2.5);
  }
}

function legend(gamma) {
  const box = Draw.el('div', 'iv-legend');
  const cv = Draw.el('canvas');
  const ctx = Draw.sizeCanvas(cv, 140, 10);
  for (let x = 0; x < 140; x++) {
    const rgb = ramp(x / 139);
    ctx.fillStyle = 'rgb(' + rgb.map(Math.round).join(',') + ')';
    ctx.fillRect(x, 0, 1, 10);
  }
  box.appendChild(Draw.el('span', null, '0'));
  box.appendChild(cv);
  box.appendChild(Draw.el('span', null, gamma !== 1 ? 'largest (square root)' : 'largest patch weight'));
  return box;
}

const kindName = k => (k === 'cls' ? 'class token' : k === 'distillation' ? 'distillation token' : k === 'register' ? 'register'
  : k === 'text' ? 'text token' : 'patch');

function ImageView(host, c) {
  ensureStyle();
  const im = IM(), n = Data.n, kinds = im.token_kinds, R = im.grid.rows, C = im.grid.cols;
  const specials = kinds.map((k, i) => (k === 'patch' || k === 'text' ? -1 : i)).filter(i => i >= 0);
  /* a vision-language model's text: the tokens after the picture read it (a causal decoder's before it cannot) */
  const texts = kinds.map((k, i) => (k === 'text' ? i : -1)).filter(i => i >= 0);
  const lastPatch = im.first_patch + R * C - 1, after = texts.filter(i => i > lastPatch);
  if (Q === null || (typeof Q === 'number' && Q >= n))
    Q = after.length ? after[after.length - 1] : specials.length ? specials[0] : im.pooling_attention ? 'pool' : 'all';
  const t = Tok.build(false, false);
  const A = matrixFor(c, t);
  host.textContent = '';
  const title = Draw.el('div', 'view-title');
  /* a per-layer measure (--measure alti|rollout) is every head together, through the layer */
  const what = Data.perLayer ? Measure.LABEL[Data.measure] + ' through it, every head'
    : c.mode === 'heads' ? 'head ' + Data.heads[c.focus] : c.mode === 'rollout' ? 'rollout through layer ' + c.vt.L
    : c.mode + ' of ' + c.hs.length + ' head' + (c.hs.length === 1 ? '' : 's');
  title.appendChild(Draw.el('h2', null, 'Image view · layer ' + c.vt.L + ' · ' + what));
  title.appendChild(Draw.el('span', 'sub', 'The ' + im.preprocessed[0] + ' × ' + im.preprocessed[1] + ' picture the model saw (' +
    R + ' × ' + C + ' patches of ' + im.patch_size + ' px' + (im.size ? '; from ' + im.size[0] + ' × ' + im.size[1] : '') +
    '), colored by the query\'s attention to each patch, scaled to the largest. Pick the query at the right, or click a patch.'));
  host.appendChild(title);
  if (!A) { host.appendChild(Draw.el('div', 'empty', 'Computing rollout…')); return null; }

  const w = queryRow(A, n, c, Q);
  const grid = patchGrid(w);
  /* what every query gives each token: the special tokens' share and the most attended patches */
  const recv = queryRow(A, n, c, 'all');
  const patchRank = Array.from({ length: R * C }, (_, p) => p).sort((a, b) => recv[im.first_patch + b] - recv[im.first_patch + a]);
  const top = patchRank.slice(0, Math.min(5, R * C));

  const wrap = Draw.el('div', 'iv');
  const fig = Draw.el('div', 'iv-fig');
  const avail = Math.max(320, Math.min(560, (host.clientWidth || 1000) - 470));
  const aspect = im.preprocessed[1] / im.preprocessed[0];
  const W = Math.round(aspect <= 1 ? avail : avail / aspect), H = Math.round(aspect <= 1 ? avail * aspect : avail);
  const cv = Draw.el('canvas');
  cv.setAttribute('role', 'img');
  fig.appendChild(cv);
  wrap.appendChild(fig);
  const queryPatch = typeof Q === 'number' && kinds[Q] === 'patch' ? Q - im.first_patch : -1;
  const opts = () => ({ smooth: SMOOTH, grid: GRID, marked: Q === 'all' ? top : [], query: queryPatch });
  const paint = () => paintOverlay(cv, W, H, grid, c.gamma, opts());
  cv.setAttribute('aria-label', 'Attention of ' + qLabel(Q) + ' over the image patches');
  paint();
  if (!picture) loadPicture().then(() => { if (cv.isConnected) paint(); });
  cv.addEventListener('mousemove', ev => {
    const rc = cv.getBoundingClientRect();
    const px = Math.floor(((ev.clientX - rc.left) / rc.width) * C), py = Math.floor(((ev.clientY - rc.top) / rc.height) * R);
    if (px < 0 || py < 0 || px >= C || py >= R) { Tip.hide(); return; }
    const p = py * C + px;
    Tip.show(ev.clientX, ev.clientY, box => {
      Tip.title(box, 'Patch ' + py + ',' + px + ' (token ' + (im.first_patch + p) + ')');
      Tip.row(box, qLabel(Q) + ' →', Fmt.att(grid.g[p]));
      Tip.row(box, 'every query (mean) →', Fmt.att(recv[im.first_patch + p]));
      Tip.sub(box, 'click to make this patch the query');
    });
  });
  cv.addEventListener('mouseleave', () => Tip.hide());
  cv.addEventListener('click', ev => {
    const rc = cv.getBoundingClientRect();
    const px = Math.floor(((ev.clientX - rc.left) / rc.width) * C), py = Math.floor(((ev.clientY - rc.top) / rc.height) * R);
    if (px < 0 || py < 0 || px >= C || py >= R) return;
    setQuery(im.first_patch + py * C + px);
  });

  function qLabel(q) {
    if (q === 'pool') return 'pooling head';
    if (q === 'all') return 'every query';
    return kinds[q] === 'patch' ? (texts.length ? 'image token ' : 'patch ') + Data.vocab(q)
      : kinds[q] === 'text' ? '"' + Data.vocab(q) + '" (' + q + ')' : Data.vocab(q);
  }
  function setQuery(q) {
    Q = q;
    if (typeof q === 'number') c.onQuery(q);
    ImageView(host, c);
    host.dataset.query = String(q);
  }

  /* the side panel */
  const side = Draw.el('div', 'iv-side');
  const qc = Draw.el('div', 'iv-card');
  qc.appendChild(Draw.el('h3', null, 'Query'));
  const qb = Draw.el('div', 'iv-q');
  const qbtn = (label, q, tip) => {
    const b = Draw.el('button', null, label);
    b.type = 'button';
    b.setAttribute('aria-pressed', Q === q ? 'true' : 'false');
    if (tip) b.title = tip;
    b.addEventListener('click', () => setQuery(q));
    qb.appendChild(b);
  };
  for (const i of specials) qbtn(Data.vocab(i), i, 'the ' + kindName(kinds[i]) + ' (token ' + i + ')');
  for (const i of after) qbtn(Data.vocab(i), i, 'the text token at ' + i + ', after the picture: what it reads of it');
  if (im.pooling_attention) qbtn('pooling head', 'pool', 'SigLIP\'s attention-pooling head: its learned query over the last layer\'s tokens');
  qbtn('every query', 'all', 'the attention each patch receives, averaged over every query; the most attended patches dashed');
  if (queryPatch >= 0) qbtn('patch ' + Data.vocab(Q), Q, 'the patch clicked on the picture');
  qc.appendChild(qb);
  if (Q === 'pool' && c.mode === 'rollout')
    qc.appendChild(Draw.el('div', 'hint', 'The pooling head reads the last layer: its attention times the rollout up to this layer.'));
  else if (Q === 'pool') qc.appendChild(Draw.el('div', 'hint', 'The pooling head reads the last layer\'s tokens, whatever layer is shown.'));
  qc.appendChild(legend(c.gamma));
  const op = Draw.el('div', 'iv-opts');
  const toggle = (label, get, set) => {
    const l = Draw.el('label');
    const x = Draw.el('input');
    x.type = 'checkbox';
    x.checked = get();
    x.addEventListener('change', () => { set(x.checked); paint(); });
    l.appendChild(x);
    l.appendChild(document.createTextNode(' ' + label));
    op.appendChild(l);
  };
  toggle('patch grid', () => GRID, v => { GRID = v; });
  toggle('smooth', () => SMOOTH, v => { SMOOTH = v; });
  qc.appendChild(op);
  side.appendChild(qc);

  /* the special tokens' share: from this query, and from every query (mean) */
  const sc = Draw.el('div', 'iv-card');
  sc.appendChild(Draw.el('h3', null, texts.length ? 'Attention to the text and the picture' : 'Attention to the special tokens'));
  const hd = Draw.el('div', 'iv-row hd');
  ['token', '', 'query', 'mean'].forEach(s => hd.appendChild(Draw.el('span', s === 'query' || s === 'mean' ? 'iv-num' : null, s)));
  sc.appendChild(hd);
  const shareRow = (label, a, b, tip) => {
    const r = Draw.el('div', 'iv-row');
    if (tip) r.title = tip;
    r.appendChild(Draw.el('span', null, label));
    const bar = Draw.el('div', 'iv-bar'), fill = Draw.el('i');
    fill.style.width = (100 * Math.min(1, a)).toFixed(1) + '%';
    bar.appendChild(fill);
    r.appendChild(bar);
    r.appendChild(Draw.el('span', 'iv-num', (100 * a).toFixed(1) + '%'));
    r.appendChild(Draw.el('span', 'iv-num', (100 * b).toFixed(1) + '%'));
    sc.appendChild(r);
  };
  let ps = 0, pr = 0;
  for (let p = 0; p < R * C; p++) { ps += w[im.first_patch + p]; pr += recv[im.first_patch + p]; }
  for (const i of specials) shareRow(Data.vocab(i), w[i], recv[i], 'the ' + kindName(kinds[i]));
  if (texts.length) {
    /* the sequence's first token (a decoder's attention sink), the rest of the text, the picture */
    const first = texts[0];
    let ts = 0, tr = 0;
    for (const i of texts) if (i !== first) { ts += w[i]; tr += recv[i]; }
    shareRow(Data.vocab(first), w[first], recv[first], 'the sequence\'s first token (token ' + first + ')');
    shareRow('other text', ts, tr, 'the other ' + (texts.length - 1) + ' text tokens together');
  }
  shareRow(texts.length ? 'the picture' : 'patches', ps, pr, 'all ' + R * C + ' ' + (texts.length ? 'image tokens' : 'patches') + ' together');
  sc.appendChild(Draw.el('div', 'hint', 'query: the share of ' + qLabel(Q) + '\'s attention; mean: over every query.'));
  side.appendChild(sc);

  /* the patches every query attends to most */
  const tc = Draw.el('div', 'iv-card');
  tc.appendChild(Draw.el('h3', null, 'Most attended patches'));
  for (const p of top) {
    const r = Draw.el('div', 'iv-row');
    r.appendChild(Draw.el('span', null, Math.floor(p / C) + ',' + (p % C)));
    const bar = Draw.el('div', 'iv-bar'), fill = Draw.el('i');
    fill.style.width = (100 * Math.min(1, recv[im.first_patch + p] / (recv[im.first_patch + top[0]] || 1))).toFixed(1) + '%';
    bar.appendChild(fill);
    r.appendChild(bar);
    r.appendChild(Draw.el('span', 'iv-num', (100 * recv[im.first_patch + p]).toFixed(2) + '%'));
    r.appendChild(Draw.el('span', 'iv-num', ''));
    r.style.cursor = 'pointer';
    r.title = 'click: make this patch the query';
    r.addEventListener('click', () => setQuery(im.first_patch + p));
    tc.appendChild(r);
  }
  const uniform = 1 / n;
  tc.appendChild(Draw.el('div', 'hint', 'The mean attention each patch receives (uniform: ' + (100 * uniform).toFixed(2) +
    '%); "every query" dashes them on the picture. Background patches far above the rest would be the high-norm ' +
    'tokens of "Vision Transformers Need Registers" (DINOv2 without registers).'));
  side.appendChild(tc);

  /* the other tower's own page, which the command line writes beside this one (FILE.text.html, FILE.vision.html) */
  if (im.tower && location.protocol === 'file:') {
    const oc = Draw.el('div', 'iv-card');
    oc.appendChild(Draw.el('h3', null, 'The ' + im.tower.label));
    const a = Draw.el('a', null, 'Open the ' + im.tower.label + '\'s page');
    const here = location.pathname.replace(/^.*\//, '');
    a.href = encodeURIComponent(here.replace(/\.html$/, '') + im.tower.suffix);
    oc.appendChild(a);
    oc.appendChild(Draw.el('div', 'hint', im.tower.label === 'text tower'
      ? 'Every layer and head of the text tower over the text\'s tokens, in the head, model and matrix views.'
      : 'Every layer and head of the vision tower over its own tokens (its class token and patches), on the picture.'));
    side.appendChild(oc);
  }

  if (im.text) { /* a whole CLIP/SigLIP model: the text and the similarity */
    const xc = Draw.el('div', 'iv-card iv-text');
    xc.appendChild(Draw.el('h3', null, 'Image and text'));
    xc.appendChild(Draw.el('div', null, '"' + (Data.meta.text || '') + '"'));
    const s = Draw.el('div');
    s.appendChild(document.createTextNode('logit '));
    s.appendChild(Draw.el('b', null, im.text.logit.toFixed(4)));
    if (typeof im.text.probability === 'number') {
      s.appendChild(document.createTextNode(' · probability '));
      s.appendChild(Draw.el('b', null, im.text.probability.toFixed(4)));
    }
    xc.appendChild(s);
    xc.appendChild(Draw.el('div', 'hint', typeof im.text.probability === 'number'
      ? 'SigLIP: sigmoid(exp(logit_scale) · cos + logit_bias) for this pair alone.'
      : 'CLIP: exp(logit_scale) · the cosine of the two embeddings (a softmax needs several texts).'));
    side.appendChild(xc);
  }
  wrap.appendChild(side);
  host.appendChild(wrap);

  /* the layer's heads, each drawn the same way for the same query */
  const heads = Draw.el('div');
  heads.appendChild(Draw.el('h3', 'iv-sub', 'Heads of layer ' + c.vt.L + ' for ' + qLabel(Q) + ' — click one to focus it'));
  const hg = Draw.el('div', 'iv-heads');
  const S = Math.max(72, Math.min(120, Math.floor(((host.clientWidth || 1000) - 20) / Math.min(Data.H, 8)) - 18));
  hg.style.gridTemplateColumns = 'repeat(auto-fill, minmax(' + (S + 10) + 'px, 1fr))';
  const hS = Math.round(aspect <= 1 ? S : S / aspect), vS = Math.round(aspect <= 1 ? S * aspect : S);
  for (let hi = 0; hi < Data.H; hi++) {
    const b = Draw.el('button', 'iv-head' + (c.mode === 'heads' && hi === c.focus ? ' cur' : ''));
    b.type = 'button';
    b.title = 'Layer ' + c.vt.L + ', head ' + Data.heads[hi];
    const hc = Draw.el('canvas');
    const hw = Q === 'pool' ? queryRow(null, n, Object.assign({}, c, { mode: 'heads', focus: hi }), 'pool')
      : queryRow(Derived.head(c.li, hi, t), n, c, Q);
    paintOverlay(hc, hS, vS, patchGrid(hw), c.gamma, { smooth: SMOOTH, grid: false, marked: [], query: queryPatch });
    b.appendChild(hc);
    const lab = Draw.el('span', null, 'H' + Data.heads[hi]);
    lab.style.color = Draw.headColor(Data.heads[hi]);
    b.appendChild(lab);
    b.addEventListener('click', () => c.onPick(c.li, hi));
    hg.appendChild(b);
  }
  heads.appendChild(hg);
  if (!Data.perLayer) host.appendChild(heads); /* one matrix per layer: no heads to tell apart */
  host.dataset.drawn = '1';
  host.dataset.query = String(Q);

  function exportScene(P, ttl) {
    const pad = 20, top0 = 44, Wt = pad + W + pad, Ht = top0 + H + pad;
    const p = P(Wt, Ht);
    const th = Draw.theme();
    p.rect(0, 0, Wt, Ht, th.bg, 1);
    p.text(pad, 24, ttl, { size: 14, color: th.ink, weight: 650 });
    p.image(cv, pad, top0, W, H, true);
    return p;
  }
  return { exportScene };
}

Views.register({
  id: 'image',
  order: 10,
  needs: 'image',
  label: 'Image view',
  uses: { layer: true, mode: true, heads: true, merge: false, contrast: true },
  picksHead: mode => mode === 'heads',
  unavailable: () => (IM() && IM().png ? null : 'Only on pages of an image run (attnviz --image FILE with a vision model)'),
  mergeNote: 'the Image view shows single tokens (patches)',
  draw(host, c) {
    /* the picture decodes once, before the first drawing; the head grid draws every head of the
     * layer, which a live page fetches (the page loads only the heads it shows) */
    const wait = [picture ? null : loadPicture(), Data.loaded(c.li) ? null : Data.attention(c.li)].filter(Boolean);
    if (!wait.length) return ImageView(host, c);
    return Promise.all(wait).then(() => (host.isConnected && !c.stale() ? ImageView(host, c) : null));
  },
  exportTitle: (m, c) => m + ' · image · layer ' + c.vt.L + ' · ' + c.vt.headsTxt,
});
})();
