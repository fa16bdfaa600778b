/* data.js — reads the page's payload and derives what the views draw.
 * Encoding (written by src/html.c, documented at its top): per selected layer
 * one chunk for attention (u16 codes round(a*1e4)) and one for queries/keys
 * (per-dimension offsets + zigzag residuals of round(v*10^dec)); codes split
 * into two byte planes, zlib-deflated, base-85 text. */
/* global META, SOURCE */
/* exported Fmt, Data, Tok, Derived, Rollout */

/* The file's body is one function (not indented): the other files see only
 * what it returns. */
const { Fmt, Data, Tok, Derived, Rollout } = (() => {

const B85 = '!#$%()*+,.0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{|}~';
const B85_VAL = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < B85.length; i++) t[B85.charCodeAt(i)] = i;
  return t;
})();

/* Token text made visible: a token of only whitespace shows glyphs (␣ space,
 * ↵ newline, ⇥ tab), newlines/tabs/control characters inside a token show as
 * glyphs too (never as line breaks); a leading space before a word stays a
 * space, as in bertviz's GPT-2 view. Always inserted with textContent. */
const WS_GLYPH = { ' ': '␣', '\n': '↵', '\r': '␍', '\t': '⇥', '\f': '␌', '\v': '␋' };
function visibleText(s) {
  if (s === '') return '∅';
  const ctl = c => WS_GLYPH[c] || (c === '\x7f' ? '␡' : String.fromCharCode(0x2400 + c.charCodeAt(0)));
  if (/^\s+$/.test(s)) return s.replace(/[\s]/g, c => WS_GLYPH[c] || '␣');
  return s.replace(/[\x00-\x1f\x7f]/g, ctl);
}

function b85decode(text, zlen) {
  const len = text.length;
  if (len % 5 !== 0) throw new Error('payload: base-85 text length ' + len + ' is not a multiple of 5');
  const out = new Uint8Array((len / 5) * 4);
  const T = B85_VAL;
  let o = 0;
  for (let i = 0; i < len; i += 5) {
    const c0 = text.charCodeAt(i), c1 = text.charCodeAt(i + 1), c2 = text.charCodeAt(i + 2),
      c3 = text.charCodeAt(i + 3), c4 = text.charCodeAt(i + 4);
    if ((c0 | c1 | c2 | c3 | c4) > 127) throw new Error('payload: bad character');
    const d0 = T[c0], d1 = T[c1], d2 = T[c2], d3 = T[c3], d4 = T[c4];
    if ((d0 | d1 | d2 | d3 | d4) < 0) throw new Error('payload: bad character');
    const v = (((d0 * 85 + d1) * 85 + d2) * 85 + d3) * 85 + d4;
    out[o] = v / 16777216;
    out[o + 1] = v >>> 16;
    out[o + 2] = v >>> 8;
    out[o + 3] = v;
    o += 4;
  }
  if (zlen > out.length) throw new Error('payload: truncated');
  return out.subarray(0, zlen);
}

async function inflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/* zlib bytes of two byte planes (all low bytes, then all high bytes) -> 16-bit codes. */
async function planesToCodes(zbytes) {
  const raw = await inflate(zbytes);
  const cnt = raw.length >> 1;
  const codes = new Uint16Array(cnt);
  for (let i = 0; i < cnt; i++) codes[i] = raw[i] | (raw[cnt + i] << 8);
  return codes;
}

/* Reads one chunk element into its 16-bit codes. */
async function readChunk(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error('payload: missing ' + id);
  const codes = await planesToCodes(b85decode(el.textContent, +el.dataset.z));
  el.textContent = ''; /* the decoded copy is kept; free the text */
  return codes;
}

/* ---------------------------------------------------------------- number formats */

/* Integer code with `dec` implied decimals, as text: exact, no float rounding. */
function fmtFixed(code, dec) {
  if (dec <= 0) return String(code);
  const neg = code < 0;
  let s = String(Math.abs(code));
  while (s.length <= dec) s = '0' + s;
  s = s.slice(0, s.length - dec) + '.' + s.slice(s.length - dec);
  return neg ? '-' + s : s;
}
/* Attention weight (a float from the codes, or a derived value) with 4 decimals. */
function fmtAtt(w) {
  return fmtFixed(Math.round(w * 10000), 4);
}
/* Fmt.visible (token text made visible), Fmt.fixed, Fmt.att */
const Fmt = { visible: visibleText, fixed: fmtFixed, att: fmtAtt };
/* ---------------------------------------------------------------- the data */

/* The document the page draws: META (the meta object of an offline page,
 * or a live page's run: POST /api/run's "meta") and where its numbers come
 * from. SOURCE null: this page's payload elements, decoded a layer (every
 * head) at a time. SOURCE given (live page, live.js): the attnviz serve API,
 * SOURCE.get(path) -> {bytes, shape} (docs: serve_api.md), fetched per layer
 * and head as the views ask. Either way the views see the same thing: each
 * head's codes round(a*1e4) as an n_rows x n_cols block. */
const Data = (() => {
  const meta = META;
  const live = !!SOURCE;
  const L = meta.layers.length, H = meta.heads.length;

  /* A side: the tokens a stack's rows or columns are. A self-attention page has
   * one (meta.tokens and the top-level flags); an encoder-decoder page an
   * "encoder" and/or a "decoder" side (meta.sides, as html.c writes them). */
  function makeSide(name, s, bStart, genStart) {
    const toks = s.tokens, disp = s.display_tokens || null;
    const n = toks.length;
    return {
      name, n, tokens: toks, hasDisplay: !!disp,
      /* the tokenizer's flags */
      special: s.special.map(Boolean), wordStart: s.word_start.map(Boolean),
      /* first token of sentence B, or null; first generated token (n when none were) */
      bStart: bStart === undefined ? null : bStart, genStart: genStart === undefined ? n : genStart,
      /* raw text of token i (display text, else the vocab spelling) */
      text: i => (disp ? disp[i] : toks[i]),
      /* text a continuation piece adds to its word: "##ies" adds "ies" */
      pieceText: i => (disp ? disp[i] : toks[i].startsWith('##') ? toks[i].slice(2) : toks[i]),
      label: i => visibleText(disp ? disp[i] : toks[i]),
      vocab: i => toks[i],
    };
  }
  const main = makeSide('tokens', meta, meta.sentence_b_start, meta.generation ? meta.generation.prompt_tokens : meta.n);
  const stacked = Array.isArray(meta.stacks) && meta.stacks.length > 0;
  const sides = {};
  if (stacked) for (const k of Object.keys(meta.sides)) sides[k] = makeSide(k, meta.sides[k], null, undefined);

  /* The attention stacks: one for a self-attention page; an encoder-decoder
   * page's encoder, decoder and cross attention (rows: decoder tokens, columns:
   * encoder tokens). The views read the current one (stack, n_rows, n_cols,
   * causal, attention, headMatrix...); setStack switches, and the new stack's
   * layers are decoded when first drawn. Each stack has its layers (st.layers,
   * st.L): a model whose decoder is shallower or deeper than its encoder gives
   * the decoder's and cross attention's stacks their own (meta.stacks[k].layers). */
  const STACK_LABEL = { encoder: 'Encoder', decoder: 'Decoder', cross: 'Cross' };
  const stacks = stacked
    ? meta.stacks.map(st => ({ name: st.name, label: STACK_LABEL[st.name] || st.name, chunk: 'av-' + st.name + '-',
      rows: sides[st.rows], cols: sides[st.cols], nr: st.n_rows, nc: st.n_cols, causal: !!st.causal,
      layers: Array.isArray(st.layers) ? st.layers : meta.layers }))
    : [{ name: 'self', label: 'Attention', chunk: 'av-att-', rows: main, cols: main, nr: meta.n, nc: meta.n, causal: !!meta.config.causal,
      layers: meta.layers }];
  for (const st of stacks) {
    if (!st.rows || !st.cols || st.rows.n !== st.nr || st.cols.n !== st.nc) throw new Error('meta: stack ' + st.name + ' does not match its tokens');
    st.square = st.rows === st.cols;
    st.L = st.layers.length;
    /* per layer and head: a promise of the head's block, and the block once it is there */
    st.req = Array.from({ length: st.L }, () => new Array(H).fill(null));
    st.blk = Array.from({ length: st.L }, () => new Array(H).fill(null));
  }
  /* --measure norm (meta.measures): value-weighted attention (Kobayashi et al.
   * 2020) as a copy of the self-attention stack whose blocks hold each row's
   * shares of ||a_ij f_h(x_j)|| (html.c: chunks av-natt-<i>; live: the server's
   * measure=norm). setMeasure swaps the copy the views read, so every view
   * draws it as it draws attention. */
  const listed = !stacked && Array.isArray(meta.measures) ? meta.measures : [];
  const perLayerNames = Array.isArray(meta.per_layer_measures) ? meta.per_layer_measures : [];
  const measures = { attention: stacks[0] };
  /* --measure alti|rollout (meta.per_layer_measures): one matrix per layer, every head's together (mixing.h:
   * ALTI, or attention rollout), through that layer: chunk av-NAME-<i> holds one n x n block, which every
   * head's slot of the copy shares, so the views that load heads load it; Draw.seriesFor draws it once.
   * The measures keep the page's order (--measure's), attention first. */
  for (const k of listed) {
    if (k === 'norm') {
      measures.norm = Object.assign({}, stacks[0], { measure: 'norm', chunk: 'av-natt-',
        req: Array.from({ length: L }, () => new Array(H).fill(null)), blk: Array.from({ length: L }, () => new Array(H).fill(null)) });
    } else if ((k === 'alti' || k === 'rollout') && perLayerNames.includes(k)) {
      measures[k] = Object.assign({}, stacks[0], { chunk: 'av-' + k + '-', perLayer: true,
        req: Array.from({ length: L }, () => new Array(H).fill(null)), blk: Array.from({ length: L }, () => new Array(H).fill(null)) });
    }
  }
  for (const k of Object.keys(measures)) measures[k].measure = k;
  let cur = stacks[0];
  const n = meta.n;
  const ALL = meta.heads.map((_, h) => h);

  /* Offline: layer li's chunk holds every head; one decode serves them all (a per-layer measure's one
   * block is every head's). */
  function loadChunk(li, st) {
    const nn = st.nr * st.nc, want = (st.perLayer ? 1 : H) * nn;
    const p = readChunk(st.chunk + li).then(codes => {
      if (codes.length !== want) throw new Error('payload: layer ' + li + ' has ' + codes.length + ' weights, expected ' + want);
      for (let h = 0; h < H; h++) st.blk[li][h] = st.perLayer ? codes : codes.subarray(h * nn, (h + 1) * nn);
    });
    for (let h = 0; h < H; h++) st.req[li][h] = p;
  }
  /* Live: the heads hs of layer li not asked for yet, in one request. */
  function fetchHeads(li, st, hs) {
    const nn = st.nr * st.nc;
    const p = SOURCE.get('/api/attention?layer=' + st.layers[li] + '&heads=' + hs.map(h => meta.heads[h]).join(',') +
      (stacked ? '&stack=' + st.name : '') + (st.measure === 'norm' ? '&measure=norm' : ''))
      .then(r => r.codes || planesToCodes(r.bytes)) /* a streamed generation's source hands codes (live.js) */
      .then(codes => {
        if (codes.length !== hs.length * nn) throw new Error('server: layer ' + st.layers[li] + ' sent ' + codes.length + ' weights, expected ' + hs.length * nn);
        hs.forEach((h, k) => { st.blk[li][h] = codes.subarray(k * nn, (k + 1) * nn); });
      });
    /* a failed request is asked again the next time */
    p.catch(() => { hs.forEach(h => { if (!st.blk[li][h]) st.req[li][h] = null; }); });
    hs.forEach(h => { st.req[li][h] = p; });
  }
  /* Heads hs (selection indices; default every head) of layer li of stack st
   * (default the current one), loaded once; resolves when they are there. */
  function attention(li, st, hs) {
    st = st || cur;
    const want = hs || ALL;
    const missing = want.filter(h => !st.req[li][h]);
    if (missing.length) {
      if (live) fetchHeads(li, st, missing);
      else loadChunk(li, st);
    }
    return Promise.all(want.map(h => st.req[li][h])).then(() => undefined);
  }

  /* Queries and keys of head h in layer li: {q, k} (n x head_dim, row-major)
   * with the values q[i] * 10^-decQ (offline: integer codes and their
   * decimals, html.c) or, live, float32 (decQ = decK = null). */
  const qk = new Array(L).fill(null);
  function layerQK(li) {
    if (!qk[li]) {
      qk[li] = readChunk('av-qk-' + li).then(codes => {
        const d = meta.qk.head_dim, blk = n * d, per = d + blk;
        if (codes.length !== H * 2 * per) throw new Error('payload: q/k layer ' + li + ' has the wrong size');
        const out = { q: [], k: [], decQ: [], decK: [] };
        for (let h = 0; h < H; h++) {
          for (let w = 0; w < 2; w++) {
            const base = (h * 2 + w) * per;
            const v = new Int16Array(blk);
            const off = new Int32Array(d);
            for (let j = 0; j < d; j++) { const u = codes[base + j]; off[j] = (u >>> 1) ^ -(u & 1); }
            for (let i = 0; i < blk; i++) {
              const u = codes[base + d + i];
              v[i] = ((u >>> 1) ^ -(u & 1)) + off[i % d];
            }
            (w ? out.k : out.q).push(v);
          }
          out.decQ.push(meta.qk.dec[li][h][0]);
          out.decK.push(meta.qk.dec[li][h][1]);
        }
        return out;
      });
    }
    return qk[li];
  }
  const qkHead = new Map();
  function queriesKeys(li, h) {
    if (!live) {
      if (!meta.qk) return Promise.resolve(null);
      return layerQK(li).then(o => ({ q: o.q[h], k: o.k[h], decQ: o.decQ[h], decK: o.decK[h] }));
    }
    const key = li + ':' + h;
    if (!qkHead.has(key)) {
      const p = SOURCE.get('/api/qk?layer=' + meta.layers[li] + '&head=' + meta.heads[h]).then(r => {
        const d = +r.shape[1];
        if (+r.shape[0] !== n || !(d > 0) || r.bytes.length !== 2 * n * d * 4) throw new Error('server: q/k of the wrong size');
        const f = new Float32Array(r.bytes.buffer, r.bytes.byteOffset, 2 * n * d);
        return { q: f.subarray(0, n * d), k: f.subarray(n * d), decQ: null, decK: null, d };
      });
      p.catch(() => qkHead.delete(key));
      qkHead.set(key, p);
    }
    return qkHead.get(key);
  }

  /* Live: every layer's and head's attention pooled to s x s (the server
   * picks s; s = n: the attention itself), for the model view's thumbnails:
   * {s, exact, block(li, h) -> Float32Array s*s}. */
  const thumbReqs = {};
  function thumbs() {
    /* an encoder-decoder run's stacks are kept whole: the model view draws its blocks */
    if (!live || stacked) return null;
    const ms = cur.measure || 'attention';
    let thumbReq = thumbReqs[ms];
    if (!thumbReq) {
      thumbReq = thumbReqs[ms] = SOURCE.get('/api/thumbs' + (ms === 'norm' ? '?measure=norm' : '')).then(async r => {
        const [tl, th, s] = r.shape.map(Number);
        const codes = r.codes || await planesToCodes(r.bytes);
        if (tl !== meta.config.layers || th !== meta.config.heads || !(s > 0 && s <= n) || codes.length !== tl * th * s * s) throw new Error('server: thumbnails of the wrong size');
        return {
          s, exact: s === n,
          block(li, h) {
            const base = (meta.layers[li] * th + meta.heads[h]) * s * s, out = new Float32Array(s * s);
            for (let i = 0; i < s * s; i++) out[i] = codes[base + i] * 1e-4;
            return out;
          },
        };
      });
      thumbReq.catch(() => { delete thumbReqs[ms]; });
    }
    return thumbReq;
  }

  /* Weight a[i][j] of selected head h in layer li of the current stack (the head must be loaded). */
  function weight(li, h, i, j) {
    return cur.blk[li][h][i * cur.nc + j] / 10000;
  }
  function code(li, h, i, j) {
    return cur.blk[li][h][i * cur.nc + j];
  }
  /* Head h of layer li as a Float32Array n_rows*n_cols. */
  function headMatrix(li, h) {
    const nn = cur.nr * cur.nc, c = cur.blk[li][h], out = new Float32Array(nn);
    for (let i = 0; i < nn; i++) out[i] = c[i] * 1e-4;
    return out;
  }

  /* attnviz diff pages: the second input (B): its tokens (meta.diff.side_b) and
   * attention, one chunk av-attb-<i> per layer (H x nb x nb codes), decoded once */
  const second = meta.diff ? (() => {
    const side = makeSide('B', meta.diff.side_b, null, undefined);
    const att = new Array(L).fill(null), done = new Array(L).fill(null);
    return {
      side, n: side.n, done,
      attention(li) {
        if (!att[li]) {
          att[li] = readChunk('av-attb-' + li).then(codes => {
            if (codes.length !== H * side.n * side.n) throw new Error('payload: B layer ' + li + ' has the wrong size');
            done[li] = codes;
            return codes;
          });
        }
        return att[li];
      },
    };
  })() : null;

  /* keys a sliding-window layer (index li into layers) lets a query see, 0 when unlimited; an
   * encoder's local window (sliding_window_bidirectional) reaches as far after the query: keys
   * j with |i - j| < w */
  const windowOf = li => (li !== undefined && meta.config.sliding_window &&
    (meta.config.sliding_layers || []).includes(meta.layers[li]) ? meta.config.sliding_window : 0);
  const windowBoth = !!meta.config.sliding_window_bidirectional;
  /* a vision-language page's image tokens that attend to each other both ways in a causal sequence
   * (Gemma 3: meta.image.bidirectional, [first, end)): no mask between two of them */
  const blk = meta.image && Array.isArray(meta.image.bidirectional) ? meta.image.bidirectional : null;
  const inBlock = (i, j) => !!blk && !stacked && i >= blk[0] && i < blk[1] && j >= blk[0] && j < blk[1];
  return {
    meta, H, live,
    /* the current stack's layers (a self-attention page's: meta.layers) */
    get L() { return cur.L; },
    get layers() { return cur.layers; },
    heads: meta.heads,
    /* the stacks, whether this is an encoder-decoder page, the current stack */
    stacks, stacked, sides,
    get stack() { return cur; },
    setStack(k) { cur = stacks[k]; },
    /* the measures this page has ('attention', and 'norm' with --measure norm, 'alti' or 'rollout' with
     * --measure alti|rollout), the one shown, whether it is one matrix per layer (perLayer), and a prefix
     * for caches of derived numbers ('' for attention) */
    measures: Object.keys(measures),
    get measure() { return cur.measure || 'attention'; },
    setMeasure(k) { if (measures[k] && !stacked) cur = measures[k]; },
    get measureKey() { return cur.measure && cur.measure !== 'attention' ? cur.measure + ':' : ''; },
    get perLayer() { return !!cur.perLayer; },
    /* measure k's copy of the attention (for Data.attention and Data.block), or null */
    measureStack: k => measures[k] || null,
    /* the current stack's rows (queries) and columns (keys); n: rows, which is
     * the token count of a self-attention page */
    get n() { return cur.nr; },
    get nr() { return cur.nr; },
    get nc() { return cur.nc; },
    get nn() { return cur.nr * cur.nc; },
    get causal() { return cur.causal; },
    /* the self-attention page's tokens (an encoder-decoder page's are the stacks' sides) */
    genStart: main.genStart,
    hasDisplay: main.hasDisplay,
    special: main.special, wordStart: main.wordStart, text: main.text, pieceText: main.pieceText,
    /* shown label of raw token i; vocab spelling of i */
    label: main.label,
    vocab: main.vocab,
    window: windowOf,
    windowBoth,
    /* mask on raw indices: key j after query i (causal), or (layer li with a
     * sliding window w) at least w tokens before it (or after it: windowBoth) */
    masked: (i, j, li) => {
      const w = windowOf(li);
      if (!cur.causal) return windowBoth && w > 0 && Math.abs(i - j) >= w;
      return (j > i && !inBlock(i, j)) || (w > 0 && j <= i - w);
    },
    inBlock,
    /* attnviz diff: B's side and attention, or null */
    second,
    /* a live page fetches any head's q/k; an offline one has them with --qk */
    hasQK: (live && !stacked) || !!meta.qk, /* an encoder-decoder run keeps no q/k */
    headDim: meta.qk ? meta.qk.head_dim : (meta.config.head_dim || 0),
    attention, queriesKeys, thumbs, weight, code, headMatrix,
    /* the payload's encoding (zlib of two byte planes) -> u16 codes (tiles.js) */
    decode: planesToCodes,
    /* a payload chunk by id -> its u16 codes (tiles.js: a long input's saved page) */
    readChunk,
    /* head h's block of layer li in stack st (default the current one), or null before it is loaded */
    block: (li, h, st) => (st || cur).blk[li][h],
    /* heads hs (default every head) of layer li are loaded */
    loaded: (li, hs) => (hs || ALL).every(h => !!cur.blk[li][h]),
    /* attention sinks (gpt-oss; json_out.c's "sinks" [layer][head][query]): head h of layer li's share of
     * each raw query row that went to its sink logit, which no key has; null for models without */
    hasSinks: !stacked && !meta.diff && Array.isArray(meta.sinks) && meta.sinks.length === L,
    sinkRow: (li, h) => (!stacked && !meta.diff && (cur.measure || 'attention') === 'attention' && Array.isArray(meta.sinks) &&
      meta.sinks[li] && meta.sinks[li][h]) || null,
    /* flags.js's toggle: rows divided by their weight over the keys, the learned sinks' share dropped */
    renormSinks: false,
    pattern: (li, h) => (meta.head_patterns && meta.head_patterns[li] ? meta.head_patterns[li][h] : null),
    description: (li, h) => (meta.head_descriptions && meta.head_descriptions[li] ? meta.head_descriptions[li][h] : null),
  };
})();

/* ---------------------------------------------------------------- token transforms */

/* Display tokens for the current toggles: merged word pieces and hidden specials,
 * for the current stack's rows (queries) and columns (keys): t = {key, rows,
 * cols, mr, mc, identity}, where rows and cols are side transforms (the same
 * object for a self-attention stack). A side transform has groups[g] = {label,
 * vocab, members, seg (0 A / 1 B), special, first, gen (a member was
 * generated)}; visible = indices of shown groups, m of them; its side (Data's
 * tokens). Derived matrices are mr x mc (row-major, stride mc). filterIdx
 * applies the sentence filter. A piece joins the previous group unless it
 * starts a word (word_start: "##" pieces for WordPiece, no leading space for
 * byte-level BPE). Groups are contiguous and in token order, so under a causal
 * mask group (key) c is masked for group (query) r exactly when c > r in
 * visible order: masked(r, c). */
const Tok = (() => {
  const cache = new Map(), sideCache = new Map();
  function buildSide(sd, merge, hide, sink) {
    const key = sd.name + ':' + (merge ? 'm' : '') + (hide ? 'h' : '') + (sink ? 's' : '');
    if (sideCache.has(key)) return sideCache.get(key);
    const toks = sd.tokens, bs = sd.bStart;
    const groups = [];
    const groupOf = new Int32Array(toks.length);
    for (let i = 0; i < toks.length; i++) {
      const special = sd.special[i];
      const seg = bs !== null && bs !== undefined && i >= bs ? 1 : 0;
      const prev = groups[groups.length - 1];
      if (merge && !special && !sd.wordStart[i] && prev && !prev.special && prev.seg === seg) {
        prev.members.push(i);
        prev.gen = prev.gen || i >= sd.genStart;
        prev.raw += sd.pieceText(i);
        prev.vocab += ' ' + toks[i];
      } else {
        groups.push({ raw: sd.text(i), vocab: toks[i], members: [i], seg, special, first: i, gen: i >= sd.genStart });
      }
      groupOf[i] = groups.length - 1;
    }
    for (const g of groups) g.label = visibleText(g.raw);
    const visible = [];
    /* causal models: the first token (the attention sink) hides with the specials */
    groups.forEach((g, k) => { if (!(hide && (g.special || (sink && g.first === 0)))) visible.push(k); });
    const visIndex = new Int32Array(groups.length).fill(-1);
    visible.forEach((g, k) => { visIndex[g] = k; });
    /* column (key) slot of each original token, -1 if hidden */
    const colOf = new Int32Array(toks.length);
    for (let i = 0; i < toks.length; i++) colOf[i] = visIndex[groupOf[i]];
    const identity = !hide && groups.length === toks.length;
    const t = { side: sd, groups, visible, visIndex, groupOf, colOf, identity, m: visible.length };
    sideCache.set(key, t);
    return t;
  }
  function build(merge, hide) {
    const st = Data.stack;
    const key = (Data.stacked ? st.name + ':' : '') + (merge ? 'm' : '') + (hide ? 'h' : '');
    if (cache.has(key)) return cache.get(key);
    /* a decoder page's first token hides with the specials (its stacks' specials are named) */
    const sink = st.causal && !Data.stacked;
    const rows = buildSide(st.rows, merge, hide, sink);
    const cols = st.cols === st.rows ? rows : buildSide(st.cols, merge, hide, sink);
    const t = { key, merge, hide, rows, cols, mr: rows.m, mc: cols.m, identity: rows.identity && cols.identity };
    cache.set(key, t);
    return t;
  }
  /* Indices into rows.visible / cols.visible for the rows (queries) and columns (keys) of a filter. */
  function filterIdx(t, filter) {
    const allR = t.rows.visible.map((_, k) => k), allC = t.cols.visible.map((_, k) => k);
    if (filter === 'all' || t.rows !== t.cols || t.rows.side.bStart === null) return { rows: allR, cols: allC };
    const A = allR.filter(k => t.rows.groups[t.rows.visible[k]].seg === 0);
    const B = allR.filter(k => t.rows.groups[t.rows.visible[k]].seg === 1);
    const pick = c => (c === 'A' ? A : B);
    return { rows: pick(filter[0]), cols: pick(filter[1]) };
  }
  /* n_rows x n_cols matrix (row-normalized attention-like) -> mr x mc for the transform.
   * sink (n_rows raw query rows' sink shares, or null): the result's .sink (mr) is each row
   * group's, taken as its rows are (mean over the pieces; with specials hidden, rows and
   * sink scaled together to sum 1). */
  function derive(mat, t, sink) {
    const nc = t.cols.side.n;
    if (t.identity) {
      if (sink) mat.sink = Float32Array.from(sink);
      return mat;
    }
    const R = t.rows, C = t.cols, mr = R.m, mc = C.m;
    const out = new Float32Array(mr * mc), acc = new Float64Array(mc);
    if (sink) out.sink = new Float32Array(mr);
    for (let g = 0; g < mr; g++) {
      const members = R.groups[R.visible[g]].members;
      let sk = 0;
      if (sink) for (const i of members) sk += sink[i];
      acc.fill(0);
      for (const i of members) {
        const row = i * nc;
        for (let j = 0; j < nc; j++) {
          const c = C.colOf[j];
          if (c >= 0) acc[c] += mat[row + j];
        }
      }
      let s = 0;
      for (let c = 0; c < mc; c++) s += acc[c];
      /* mean over the pieces of the query word; renormalize when specials are hidden */
      const div = t.hide ? s + sk : members.length;
      const o = g * mc;
      if (div > 0) for (let c = 0; c < mc; c++) out[o + c] = acc[c] / div;
      if (sink && div > 0) out.sink[g] = sk / div;
    }
    return out;
  }
  /* visible group c (key) is masked for visible group r (query); causal stacks are square */
  const masked = (r, c) => Data.causal && c > r;
  /* the same with the rows' and columns' raw tokens (a both-ways block of image tokens is not masked) */
  function maskedIn(t) {
    const first = (ts, g) => ts.groups[ts.visible[g]].members[0];
    return (r, c) => Data.causal && c > r && !Data.inBlock(first(t.rows, r), first(t.cols, c));
  }
  /* the same for layer li, sliding windows included: a key group is outside the
   * window when its last piece is, seen from the query group's last piece */
  function maskFor(t, li) {
    const w = Data.window(li);
    if (!Data.causal && w && Data.windowBoth) {
      /* a local window both ways: a key group is masked when no piece of it is within w - 1 of
       * any piece of the query group (its weight is exactly 0 then) */
      const span = (ts, g) => { const mem = ts.groups[ts.visible[g]].members; return [mem[0], mem[mem.length - 1]]; };
      return (r, c) => {
        const [r0, r1] = span(t.rows, r), [c0, c1] = span(t.cols, c);
        return c1 <= r0 - w || c0 >= r1 + w;
      };
    }
    const base = maskedIn(t);
    if (!Data.causal || !w) return base;
    const last = g => { const mem = t.rows.groups[t.rows.visible[g]].members; return mem[mem.length - 1]; };
    return (r, c) => base(r, c) || last(c) <= last(r) - w;
  }
  return { build, filterIdx, derive, masked, maskFor };
})();

/* ---------------------------------------------------------------- derived matrices */

/* A small LRU of derived matrices keyed by layer/head/transform. */
const MatCache = (() => {
  const map = new Map();
  let bytes = 0;
  const LIMIT = 192 * 1024 * 1024;
  return {
    get(key) {
      const v = map.get(key);
      if (v) { map.delete(key); map.set(key, v); }
      return v;
    },
    set(key, v) {
      if (map.has(key)) return;
      map.set(key, v);
      bytes += v.byteLength;
      for (const [k, old] of map) {
        if (bytes <= LIMIT) break;
        map.delete(k);
        bytes -= old.byteLength;
      }
    },
  };
})();

/* Derived (transformed) matrix of one head; layer must be loaded. */
function headDerived(li, h, t) {
  const sink = Data.sinkRow(li, h), drop = !!(sink && Data.renormSinks);
  const key = Data.measureKey + li + ':' + h + ':' + t.key + (drop ? ':nosink' : '');
  let v = MatCache.get(key);
  if (!v) {
    let m = Data.headMatrix(li, h);
    if (drop) { /* each row over the keys alone: divided by 1 - its learned sink's share */
      const nc = Data.nc;
      for (let i = 0; i < Data.nr; i++) {
        const w = 1 - sink[i];
        if (w > 0) for (let j = 0; j < nc; j++) m[i * nc + j] /= w;
      }
    }
    v = Tok.derive(m, t, drop ? null : sink);
    MatCache.set(key, v);
  }
  return v;
}

/* Mean or max over heads hs (selection indices) of the derived matrices. */
function aggregate(li, hs, kind, t) {
  const key = Data.measureKey + li + ':' + kind + ':' + hs.join(',') + ':' + t.key + (Data.renormSinks ? ':nosink' : '');
  let v = MatCache.get(key);
  if (v) return v;
  v = new Float32Array(t.mr * t.mc);
  if (hs.length) {
    for (const h of hs) {
      const d = headDerived(li, h, t);
      if (kind === 'max') for (let i = 0; i < d.length; i++) { if (d[i] > v[i]) v[i] = d[i]; }
      else for (let i = 0; i < d.length; i++) v[i] += d[i];
    }
    if (kind === 'mean') for (let i = 0; i < v.length; i++) v[i] /= hs.length;
    /* the heads' sink shares: their mean, or the largest */
    if (Data.hasSinks) {
      v.sink = new Float32Array(t.mr);
      for (const h of hs) {
        const d = headDerived(li, h, t).sink;
        if (d) for (let g = 0; g < t.mr; g++) v.sink[g] = kind === 'max' ? Math.max(v.sink[g], d[g]) : v.sink[g] + d[g] / hs.length;
      }
    }
  }
  MatCache.set(key, v);
  return v;
}

/* Attention rollout (Abnar & Zuidema 2020) through the selected layers up to li:
 * A_l = mean over heads hs, Â_l = (A_l + I) / 2 (rows renormalized), R = Â_li ... Â_0.
 * The variant of --measure rollout (mixing.h), here over the heads the reader
 * picks and the layers this page holds: with every head and layer it is the
 * measure itself (to the codes' 1e-4; tests/browser/measures.test.mjs).
 * Computed on the raw tokens, cached per layer and head set, async so the page
 * stays responsive at 512 tokens. onProgress(done, total). */
const Rollout = (() => {
  const cache = new Map(); /* key (stack,) hs -> array of Float32Array per layer */
  const cacheKey = hs => Data.measureKey + (Data.stacked ? Data.stack.name + ':' : '') + hs.join(',');
  async function upTo(li, hs, onProgress) {
    const st = Data.stack, n = st.nr, nn = n * n; /* a square stack */
    const key = cacheKey(hs);
    if (!cache.has(key)) cache.set(key, []);
    const rs = cache.get(key);
    if (rs[li]) return rs[li];
    let start = li;
    while (start > 0 && !rs[start - 1]) start--;
    for (let l = start; l <= li; l++) {
      await Data.attention(l, st, hs);
      const A = new Float32Array(nn);
      const inv = hs.length ? 1e-4 / hs.length : 0;
      for (const h of hs) {
        const codes = Data.block(l, h, st);
        for (let i = 0; i < nn; i++) A[i] += codes[i] * inv;
      }
      /* add identity, renormalize rows */
      for (let i = 0; i < n; i++) {
        let s = 1;
        for (let j = 0; j < n; j++) s += A[i * n + j];
        A[i * n + i] += 1;
        for (let j = 0; j < n; j++) A[i * n + j] /= s;
      }
      if (l === 0) { rs[0] = A; if (onProgress) onProgress(1, li + 1); continue; }
      const P = rs[l - 1], R = new Float32Array(nn);
      /* R = A · P, skipping zeros of A (rows are sparse for peaky heads) */
      const t0 = performance.now();
      let last = t0;
      for (let i = 0; i < n; i++) {
        const ro = i * n;
        for (let k = 0; k < n; k++) {
          const a = A[ro + k];
          if (a === 0) continue;
          const po = k * n;
          for (let j = 0; j < n; j++) R[ro + j] += a * P[po + j];
        }
        if (performance.now() - last > 40) {
          if (onProgress) onProgress(l + i / n, li + 1);
          await new Promise(r => setTimeout(r, 0));
          last = performance.now();
        }
      }
      rs[l] = R;
      if (onProgress) onProgress(l + 1, li + 1);
    }
    return rs[li];
  }
  function cached(li, hs) {
    const rs = cache.get(cacheKey(hs));
    return rs ? rs[li] || null : null;
  }
  return { upTo, cached };
})();

function rolloutDerived(li, hs, t) {
  const R = Rollout.cached(li, hs);
  if (!R) return null;
  const key = Data.measureKey + li + ':rollout:' + hs.join(',') + ':' + t.key;
  let v = MatCache.get(key);
  if (!v) {
    v = Tok.derive(R, t);
    MatCache.set(key, v);
  }
  return v;
}

/* the derived matrices the views draw (Draw.seriesFor) */
const Derived = { head: headDerived, aggregate, rollout: rolloutDerived };

return { Fmt, Data, Tok, Derived, Rollout };
})();
