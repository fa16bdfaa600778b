/* draw.js — what the views share: DOM and canvas helpers, the head palette,
 * the tooltip, token-group accessors, the series a view draws, attention
 * lines, heat maps and the painters used for export. Heavy drawing goes to
 * <canvas>; tokens are always inserted with textContent (never as HTML). */
/* global Data, Tok, Derived */
/* Causal (decoder) pages: keys after the query are masked. Views never draw a
 * line, bar or value for a masked pair; the matrix view hatches the masked
 * triangle (distinct from a computed 0) and the neuron view lists only the keys
 * the query can see. */
/* exported Draw, Tip */

/* The file's body is one function (not indented): the other files see only
 * Draw (the helpers, as Draw.el, Draw.theme, ...: listed at its end) and Tip. */
const { Draw, Tip } = (() => {

/* ---------------------------------------------------------------- helpers */

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}
function dpr() { return Math.min(3, window.devicePixelRatio || 1); }
function sizeCanvas(cv, w, h, maxPixels) {
  let r = dpr();
  if (maxPixels && w * h * r * r > maxPixels) r = Math.max(0.25, Math.sqrt(maxPixels / (w * h)));
  cv.width = Math.max(1, Math.round(w * r));
  cv.height = Math.max(1, Math.round(h * r));
  cv.style.width = w + 'px';
  cv.style.height = h + 'px';
  const ctx = cv.getContext('2d');
  ctx.setTransform(r, 0, 0, r, 0, 0);
  return ctx;
}
function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
function theme() {
  return {
    dark: document.documentElement.dataset.theme === 'dark',
    bg: cssVar('--panel'), ink: cssVar('--ink'), ink2: cssVar('--ink-2'), muted: cssVar('--muted'),
    line: cssVar('--line'), accent: cssVar('--accent'), sans: cssVar('--sans'), mono: cssVar('--mono'),
    maskBg: cssVar('--masked-bg'), maskLine: cssVar('--masked-line'), gen: cssVar('--gen'),
  };
}
function hexRgb(hex) {
  const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex.trim());
  if (m) return [parseInt(m[1], 16), parseInt(m[2], 16), parseInt(m[3], 16)];
  const r = /rgba?\((\d+)[, ]+(\d+)[, ]+(\d+)/.exec(hex);
  return r ? [+r[1], +r[2], +r[3]] : [128, 128, 128];
}

/* 16 hand-picked head colors per theme (distinct hue and lightness steps; the
 * first 12 are the most separable), then golden-angle hues beyond. */
const PALETTE = {
  light: ['#2f6fd0', '#f08a24', '#2e9e44', '#d63b3b', '#8b5cc9', '#8d5a3b', '#d658b0', '#129cae',
    '#8f9c12', '#27367f', '#e0a500', '#707782', '#139e84', '#a0204c', '#5cb3ef', '#b892e8'],
  dark: ['#5d95ef', '#f59c45', '#4cc262', '#f26464', '#aa86ea', '#c69066', '#f07ccb', '#2ec6d8',
    '#a7d13a', '#e9ebf0', '#f5cf33', '#8c96a8', '#1fb59a', '#e8668f', '#80c8f7', '#d2b8f4'],
};
function headColor(realHead) {
  const dark = document.documentElement.dataset.theme === 'dark';
  const p = dark ? PALETTE.dark : PALETTE.light;
  if (realHead < p.length) return p[realHead];
  const hue = (realHead * 137.508) % 360;
  return 'hsl(' + hue.toFixed(1) + ',' + (dark ? '70%,64%' : '68%,44%') + ')';
}
function aggColor() { return document.documentElement.dataset.theme === 'dark' ? '#e2e6ee' : '#2b3445'; }
function colorRgb(c) {
  if (c.startsWith('#')) return hexRgb(c);
  const cv = document.createElement('canvas');
  cv.width = cv.height = 1;
  const x = cv.getContext('2d');
  x.fillStyle = c;
  x.fillRect(0, 0, 1, 1);
  const d = x.getImageData(0, 0, 1, 1).data;
  return [d[0], d[1], d[2]];
}

/* ---------------------------------------------------------------- tooltip */

const Tip = (() => {
  const box = document.getElementById('tooltip');
  function show(x, y, build) {
    box.textContent = '';
    build(box);
    box.hidden = false;
    const r = box.getBoundingClientRect();
    let left = x + 14, top = y + 14;
    if (left + r.width > window.innerWidth - 6) left = Math.max(6, x - r.width - 14);
    if (top + r.height > window.innerHeight - 6) top = Math.max(6, y - r.height - 14);
    box.style.left = left + 'px';
    box.style.top = top + 'px';
  }
  function hide() { box.hidden = true; }
  function title(box_, text) { box_.appendChild(el('div', 'tt-title', text)); }
  function row(box_, label, value, color) {
    const r = el('div', 'tt-row');
    const k = el('span', 'k');
    if (color) { const sw = el('span', 'sw'); sw.style.background = color; k.appendChild(sw); }
    k.appendChild(document.createTextNode(label));
    r.appendChild(k);
    r.appendChild(el('span', 'tt-val', value));
    box_.appendChild(r);
  }
  function sub(box_, text) { box_.appendChild(el('div', 'tt-sub', text)); }
  return { show, hide, title, row, sub, box };
})();

/* Token-group accessors: s is a side transform (Tok.build's t.rows or t.cols),
 * g an index into its visible groups. */
function tokLabel(s, g) { return s.groups[s.visible[g]].label; }
/* Vocab spelling(s) and position, for a title attribute (byte-level BPE pages,
 * where the shown text differs from convert_ids_to_tokens' "Ġflies"). */
function tokTitle(s, g) {
  const grp = s.groups[s.visible[g]];
  if (!s.side.hasDisplay) return null;
  return 'vocab: ' + grp.vocab + '\nposition ' + grp.first + (grp.members.length > 1 ? '–' + grp.members[grp.members.length - 1] : '');
}
const MASKED_TEXT = 'masked: the query cannot see this key (it comes after the query, or outside a sliding window), attention 0';
function tokSeg(s, g) { return s.groups[s.visible[g]].seg; }
function tokSpecial(s, g) { return s.groups[s.visible[g]].special; }
function tokPos(s, g) { return s.groups[s.visible[g]].first; }
/* last raw token of the group (a word's prediction is its last piece's); generated (--generate) */
function tokLast(s, g) { const mem = s.groups[s.visible[g]].members; return mem[mem.length - 1]; }
function tokGen(s, g) { return s.groups[s.visible[g]].gen; }

/* An image run's patch tokens as small pictures of their patch (the text views' labels):
 * a canvas of px CSS pixels, or null for a token that is no patch (or a page with no image).
 * The picture decodes once (the page's own PNG); canvases made before that are drawn after. */
let patchImg = null, patchWait = null;
function tokThumb(s, g, px) {
  const im = Data.meta.image;
  if (!im || !im.png) return null;
  const i = s.groups[s.visible[g]].first;
  if (im.token_kinds[i] !== 'patch' || s.groups[s.visible[g]].members.length !== 1) return null;
  const p = i - im.first_patch, P = im.patch_size, r = Math.floor(p / im.grid.cols), c = p % im.grid.cols;
  const cv = el('canvas', 'tok-thumb');
  const ctx = sizeCanvas(cv, px, px);
  cv.style.verticalAlign = 'middle';
  cv.style.marginRight = '4px';
  cv.style.borderRadius = '2px';
  const paint = img => ctx.drawImage(img, c * P, r * P, P, P, 0, 0, px, px);
  if (patchImg) paint(patchImg);
  else {
    if (!patchWait) {
      patchWait = [];
      const img = new Image();
      img.onload = () => { patchImg = img; patchWait.forEach(f => f(img)); patchWait = []; };
      img.src = 'data:image/png;base64,' + im.png;
    }
    patchWait.push(paint);
  }
  return cv;
}

/* An encoder-decoder page's current stack in words: its rows and columns
 * ("decoder tokens", "encoder tokens") and their sides' names. */
function stackAxes() {
  const st = Data.stack;
  return { rows: st.rows.name + ' tokens', cols: st.cols.name + ' tokens', rowSide: st.rows.name, colSide: st.cols.name };
}

/* The series a head/matrix view draws: [{mat, color, name, h}] for spec
 * {li, mode, hs, t}; null when rollout is not computed yet. */
function seriesFor(spec) {
  const { li, mode, hs, t } = spec;
  /* ALTI or rollout (--measure alti|rollout): one matrix per layer, whatever the heads and the mode */
  if (Data.perLayer) return [{ mat: Derived.head(li, 0, t), color: aggColor(), name: Data.measure === 'alti' ? 'ALTI' : 'Rollout', h: -1 }];
  if (mode === 'heads') {
    /* several heads overlaid share the ink, as in bertviz's head view (which divides a line's opacity by
     * the heads drawn): where heads agree their lines add up, one head alone stays fainter. By the
     * square root here, so that a dark page's lines stay visible with a dozen heads */
    const share = 1 / Math.sqrt(Math.max(1, hs.length));
    return hs.map(h => ({ mat: Derived.head(li, h, t), color: headColor(Data.heads[h]), name: 'Head ' + Data.heads[h], h, share }));
  }
  if (mode === 'rollout') {
    const m = Derived.rollout(li, hs, t);
    return m ? [{ mat: m, color: aggColor(), name: 'Rollout', h: -1 }] : null;
  }
  return [{ mat: Derived.aggregate(li, hs, mode, t), color: aggColor(), name: mode === 'max' ? 'Max' : 'Mean', h: -1 }];
}

/* ---------------------------------------------------------------- line drawing */

/* Lines drawn at most when no token is isolated: past this the picture is a
 * wall of color anyway, and software rasterization of 100k+ antialiased lines
 * takes seconds (512 tokens x 12 heads: ~120k lines above 1/255). */
const LINE_LIMIT = 20000;

function lineLists(rows, cols, iso) {
  return {
    rList: iso && iso.side === 'L' ? [iso.k] : rows.map((_, k) => k),
    cList: iso && iso.side === 'R' ? [iso.k] : cols.map((_, k) => k),
  };
}

/* The weight threshold for drawing: 1/255 (0.0015 when one token is
 * isolated), raised so at most LINE_LIMIT lines are drawn. Returns
 * {minW, total, drawn}. Here and below m is the matrices' row stride (their
 * visible columns: Tok.build's t.mc), rows and cols index its rows and columns. */
function lineThreshold(series, m, rows, cols, iso) {
  const base = iso ? 0.0015 : 0.004;
  const { rList, cList } = lineLists(rows, cols, iso);
  const hist = new Uint32Array(1025);
  let total = 0;
  for (const s of series) {
    const mat = s.mat;
    for (const r of rList) {
      const ro = rows[r] * m;
      for (const c of cList) {
        const w = mat[ro + cols[c]];
        if (w >= base) { hist[Math.min(1024, (w * 1024) | 0)]++; total++; }
      }
    }
  }
  if (iso || total <= LINE_LIMIT) return { minW: base, total, drawn: total };
  let acc = 0, b = 1024;
  for (; b > 0; b--) {
    if (acc + hist[b] > LINE_LIMIT) break;
    acc += hist[b];
  }
  return { minW: Math.max(base, (b + 1) / 1024), total, drawn: acc };
}

/* Draws attention lines onto a 2D context (screen or export). g: geometry
 * {x0, x1, yL(r), yR(c)}; rows/cols: visible-token indices; iso: null or
 * {side:'L'|'R', k}. Opacity = weight (times the series' share, when heads are overlaid), batched by 64
 * opacity levels. */
function drawLines(ctx, series, m, rows, cols, g, iso, lineW, minW) {
  if (minW === undefined) minW = lineThreshold(series, m, rows, cols, iso).minW;
  ctx.lineWidth = lineW;
  ctx.lineCap = 'butt';
  const { rList, cList } = lineLists(rows, cols, iso);
  const buckets = [];
  for (let b = 0; b < 64; b++) buckets.push([]);
  for (const s of series) {
    for (const b of buckets) b.length = 0;
    const mat = s.mat;
    for (const r of rList) {
      const ro = rows[r] * m, y0 = g.yL(r);
      for (const c of cList) {
        const w = mat[ro + cols[c]];
        if (w < minW) continue;
        const b = Math.min(63, (w * 64) | 0);
        buckets[b].push(y0, g.yR(c));
      }
    }
    ctx.strokeStyle = s.color;
    const share = s.share || 1;
    for (let b = 0; b < 64; b++) {
      const arr = buckets[b];
      if (!arr.length) continue;
      ctx.globalAlpha = Math.min(1, (b + 0.5) / 64) * share;
      ctx.beginPath();
      for (let i = 0; i < arr.length; i += 2) {
        ctx.moveTo(g.x0, arr[i]);
        ctx.lineTo(g.x1, arr[i + 1]);
      }
      ctx.stroke();
    }
  }
  ctx.globalAlpha = 1;
}

function sizeCanvasRaw(cv, w, h, scale, maxPixels) {
  let r = scale;
  if (maxPixels && w * h * r * r > maxPixels) r = Math.max(0.25, Math.sqrt(maxPixels / (w * h)));
  cv.width = Math.max(1, Math.round(w * r));
  cv.height = Math.max(1, Math.round(h * r));
  const ctx = cv.getContext('2d');
  ctx.setTransform(r, 0, 0, r, 0, 0);
  return ctx;
}

/* ---------------------------------------------------------------- heat maps */

/* Paints mat (rows x cols of visible indices) into an ImageData-backed canvas,
 * one pixel per cell, in color rgb over bg. gamma 1 (linear) or 0.5 (sqrt).
 * maskRgb (causal pages): the color of masked cells, else null; maskFn(r, c)
 * says which are (default Tok.masked; Tok.maskFor gives a layer's with its window). */
function heatCanvas(mat, m, rows, cols, rgb, bgRgb, gamma, vmax, maskRgb, maskFn) {
  const isMasked = maskFn || Tok.masked;
  const cv = document.createElement('canvas');
  cv.width = Math.max(1, cols.length);
  cv.height = Math.max(1, rows.length);
  const ctx = cv.getContext('2d');
  const img = ctx.createImageData(cv.width, cv.height);
  const d = img.data;
  const inv = vmax > 0 ? 1 / vmax : 0;
  let o = 0;
  for (let r = 0; r < rows.length; r++) {
    const ro = rows[r] * m;
    for (let c = 0; c < cols.length; c++) {
      if (maskRgb && isMasked(rows[r], cols[c])) {
        d[o] = maskRgb[0]; d[o + 1] = maskRgb[1]; d[o + 2] = maskRgb[2]; d[o + 3] = 255;
        o += 4;
        continue;
      }
      let a = mat[ro + cols[c]] * inv;
      if (a > 1) a = 1;
      if (gamma !== 1) a = Math.pow(a, gamma);
      d[o] = bgRgb[0] + (rgb[0] - bgRgb[0]) * a;
      d[o + 1] = bgRgb[1] + (rgb[1] - bgRgb[1]) * a;
      d[o + 2] = bgRgb[2] + (rgb[2] - bgRgb[2]) * a;
      d[o + 3] = 255;
      o += 4;
    }
  }
  ctx.putImageData(img, 0, 0);
  return cv;
}

/* Max-pooled thumbnail, S x S pixels (keepShape: a rectangular matrix keeps
 * its shape, the longer side S pixels), scaled to its own largest weight. A
 * pixel all of whose cells are masked gets maskRgb (when given). */
function heatThumb(mat, m, rows, cols, rgb, bgRgb, gamma, S, maskRgb, maskFn, keepShape) {
  const isMasked = maskFn || Tok.masked;
  const R = rows.length, C = cols.length;
  if (R <= S && C <= S) {
    let mx = 0;
    for (const r of rows) for (const c of cols) if (mat[r * m + c] > mx) mx = mat[r * m + c];
    return heatCanvas(mat, m, rows, cols, rgb, bgRgb, gamma, mx || 1, maskRgb, isMasked);
  }
  const SW = !keepShape || C >= R ? S : Math.max(1, Math.round((S * C) / R));
  const SH = !keepShape || R >= C ? S : Math.max(1, Math.round((S * R) / C));
  return heatPooled(mat, m, rows, cols, rgb, bgRgb, gamma, 0, SW, SH, maskRgb, isMasked);
}

/* mat (rows x cols of visible indices) max-pooled to SW x SH pixels, colored
 * against vmax (0: its own largest weight). A pixel all of whose cells are
 * masked gets maskRgb (when given). */
function heatPooled(mat, m, rows, cols, rgb, bgRgb, gamma, vmax, SW, SH, maskRgb, maskFn) {
  const isMasked = maskFn || Tok.masked;
  const R = rows.length, C = cols.length;
  const cv = document.createElement('canvas');
  cv.width = SW;
  cv.height = SH;
  const buf = new Float32Array(SW * SH);
  const open = new Uint8Array(SW * SH); /* some cell of the pixel is not masked */
  const pxOf = new Int32Array(C);
  for (let c = 0; c < C; c++) pxOf[c] = Math.min(SW - 1, ((c * SW) / C) | 0);
  for (let r = 0; r < R; r++) {
    const py = Math.min(SH - 1, ((r * SH) / R) | 0), ro = rows[r] * m, rr = rows[r], po = py * SW;
    for (let c = 0; c < C; c++) {
      const o = po + pxOf[c];
      if (maskRgb && isMasked(rr, cols[c])) continue;
      open[o] = 1;
      const w = mat[ro + cols[c]];
      if (w > buf[o]) buf[o] = w;
    }
  }
  const ctx = cv.getContext('2d');
  const img = ctx.createImageData(SW, SH);
  const d = img.data;
  let mx = vmax;
  if (!(mx > 0)) for (let i = 0; i < SW * SH; i++) if (buf[i] > mx) mx = buf[i];
  const inv = mx > 0 ? 1 / mx : 0;
  for (let i = 0; i < SW * SH; i++) {
    if (maskRgb && !open[i]) {
      d[i * 4] = maskRgb[0]; d[i * 4 + 1] = maskRgb[1]; d[i * 4 + 2] = maskRgb[2]; d[i * 4 + 3] = 255;
      continue;
    }
    let a = buf[i] * inv;
    if (a > 1) a = 1;
    if (gamma !== 1) a = Math.pow(a, gamma);
    d[i * 4] = bgRgb[0] + (rgb[0] - bgRgb[0]) * a;
    d[i * 4 + 1] = bgRgb[1] + (rgb[1] - bgRgb[1]) * a;
    d[i * 4 + 2] = bgRgb[2] + (rgb[2] - bgRgb[2]) * a;
    d[i * 4 + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
  return cv;
}

/* The hover of a heat map drawn on canvas ov's context octx (w x h CSS pixels):
 * a grid of rows x cols cells of `cell` pixels whose top-left corner is at
 * (x0, y0). Over a cell, its row and column are outlined in color ink and the
 * tooltip is built by tip(box, r, c); off the grid, and on leaving, the
 * outline and the tooltip go. */
function heatHover(ov, octx, g, ink, tip) {
  const { x0, y0, cell, rows, cols, w, h } = g;
  ov.addEventListener('mousemove', ev => {
    const b = ov.getBoundingClientRect();
    const x = ev.clientX - b.left - x0, y = ev.clientY - b.top - y0;
    octx.clearRect(0, 0, w, h);
    const c = Math.floor(x / cell), r = Math.floor(y / cell);
    if (x < 0 || y < 0 || c >= cols || r >= rows) { Tip.hide(); return; }
    octx.strokeStyle = ink;
    octx.globalAlpha = 0.35;
    octx.lineWidth = 1;
    octx.strokeRect(x0 + 0.5, y0 + r * cell + 0.5, cell * cols - 1, Math.max(1, cell - 1));
    octx.strokeRect(x0 + c * cell + 0.5, y0 + 0.5, Math.max(1, cell - 1), cell * rows - 1);
    octx.globalAlpha = 1;
    Tip.show(ev.clientX, ev.clientY, box => tip(box, r, c));
  });
  ov.addEventListener('mouseleave', () => { octx.clearRect(0, 0, w, h); Tip.hide(); });
}

/* ---------------------------------------------------------------- painters */

function canvasPainterOn(ctx) {
  return {
    vector: false,
    rect(x, y, w, h, fill, alpha) {
      ctx.globalAlpha = alpha;
      ctx.fillStyle = fill;
      ctx.fillRect(x, y, w, h);
      ctx.globalAlpha = 1;
    },
    text(x, y, s, o) {
      ctx.save();
      ctx.font = (o.weight || 400) + ' ' + (o.size || 12) + 'px ' + (cssVar('--sans') || 'sans-serif');
      ctx.fillStyle = o.color || '#000';
      ctx.textAlign = o.anchor === 'end' ? 'right' : o.anchor === 'middle' ? 'center' : 'left';
      ctx.textBaseline = o.baseline === 'middle' ? 'middle' : 'alphabetic';
      ctx.translate(x, y);
      if (o.rotate) ctx.rotate((o.rotate * Math.PI) / 180);
      ctx.fillText(s, 0, 0);
      ctx.restore();
    },
    image(src, x, y, w, h, smooth) {
      ctx.imageSmoothingEnabled = !!smooth;
      ctx.drawImage(src, x, y, w, h);
      ctx.imageSmoothingEnabled = true;
    },
    lines(series, m, rows, cols, g, iso, lw, minW) { drawLines(ctx, series, m, rows, cols, g, iso, lw, minW); },
    /* rects [[x, y, w, h]] filled with bg and 45° hatch lines (masked cells) */
    hatch(rects, bg, line) {
      ctx.save();
      ctx.beginPath();
      let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      for (const [x, y, w, h] of rects) {
        ctx.rect(x, y, w, h);
        x0 = Math.min(x0, x); y0 = Math.min(y0, y); x1 = Math.max(x1, x + w); y1 = Math.max(y1, y + h);
      }
      ctx.fillStyle = bg;
      ctx.fill();
      ctx.clip();
      ctx.beginPath();
      const hh = y1 - y0;
      for (let x = x0 - hh; x < x1; x += HATCH_STEP) { ctx.moveTo(x, y1); ctx.lineTo(x + hh, y0); }
      ctx.strokeStyle = line;
      ctx.lineWidth = 1;
      ctx.stroke();
      ctx.restore();
    },
  };
}
const HATCH_STEP = 6;

function CanvasPainter(w, h, scale) {
  const cv = document.createElement('canvas');
  const ctx = sizeCanvasRaw(cv, w, h, scale || 2, 120e6);
  const p = canvasPainterOn(ctx);
  p.canvas = cv;
  p.width = w;
  p.height = h;
  p.toBlob = () => new Promise((res, rej) => cv.toBlob(b => (b ? res(b) : rej(new Error('PNG encoding failed'))), 'image/png'));
  return p;
}

/* Builds an SVG document with DOM calls (so every string is escaped by the
 * serializer), then serializes it. */
function SvgPainter(w, h) {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('xmlns', NS);
  svg.setAttribute('width', String(Math.ceil(w)));
  svg.setAttribute('height', String(Math.ceil(h)));
  svg.setAttribute('viewBox', '0 0 ' + Math.ceil(w) + ' ' + Math.ceil(h));
  svg.setAttribute('font-family', 'system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif');
  const f = v => String(Math.round(v * 100) / 100);
  const mk = (tag, attrs, parent) => {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    (parent || svg).appendChild(e);
    return e;
  };
  return {
    vector: true,
    rect(x, y, ww, hh, fill, alpha) {
      const a = { x: f(x), y: f(y), width: f(ww), height: f(hh), fill };
      if (alpha < 1) a['fill-opacity'] = f(alpha);
      mk('rect', a);
    },
    text(x, y, s, o) {
      const a = { x: f(x), y: f(y), 'font-size': String(o.size || 12), fill: o.color || '#000' };
      if (o.weight && o.weight !== 400) a['font-weight'] = String(o.weight);
      if (o.anchor) a['text-anchor'] = o.anchor;
      if (o.baseline === 'middle') a['dominant-baseline'] = 'central';
      if (o.rotate) a.transform = 'rotate(' + o.rotate + ' ' + f(x) + ' ' + f(y) + ')';
      const e = mk('text', a);
      e.setAttribute('xml:space', 'preserve');
      e.textContent = s;
    },
    image(src, x, y, ww, hh, smooth) {
      const a = { x: f(x), y: f(y), width: f(ww), height: f(hh), href: src.toDataURL('image/png'), preserveAspectRatio: 'none' };
      if (!smooth) a['image-rendering'] = 'pixelated';
      mk('image', a);
    },
    lines(series, m, rows, cols, g, iso, lw, minW) {
      const { rList, cList } = lineLists(rows, cols, iso);
      for (const s of series) {
        const grp = mk('g', { stroke: s.color, 'stroke-width': String(lw) });
        for (const r of rList) for (const c of cList) {
          const wgt = s.mat[rows[r] * m + cols[c]];
          if (wgt < minW) continue;
          mk('line', { x1: f(g.x0), y1: f(g.yL(r)), x2: f(g.x1), y2: f(g.yR(c)), 'stroke-opacity': String(Math.round(wgt * (s.share || 1) * 1000) / 1000) }, grp);
        }
      }
    },
    hatch(rects, bg, line) {
      if (!svg.querySelector('#av-hatch')) {
        const defs = mk('defs', {});
        const pt = mk('pattern', { id: 'av-hatch', patternUnits: 'userSpaceOnUse', width: String(HATCH_STEP), height: String(HATCH_STEP), patternTransform: 'rotate(45)' }, defs);
        mk('rect', { width: String(HATCH_STEP), height: String(HATCH_STEP), fill: bg }, pt);
        mk('line', { x1: '0', y1: '0', x2: '0', y2: String(HATCH_STEP), stroke: line, 'stroke-width': '1' }, pt);
      }
      const d = rects.map(([x, y, w, h]) => 'M' + f(x) + ' ' + f(y) + 'h' + f(w) + 'v' + f(h) + 'h' + f(-w) + 'z').join('');
      mk('path', { d, fill: 'url(#av-hatch)', class: 'masked' });
    },
    toString() { return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(svg); },
  };
}

/* an informational note keeps one line until clicked (the header stays short, so the view starts within
 * the first screen); warnings stay whole */
function fold(d) {
  d.classList.add('fold');
  d.tabIndex = 0;
  d.setAttribute('role', 'button');
  d.setAttribute('aria-expanded', 'false');
  d.title = 'Click to read it all';
  const flip = () => d.setAttribute('aria-expanded', String(d.classList.toggle('open')));
  d.addEventListener('click', flip);
  d.addEventListener('keydown', ev => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); flip(); } });
}

const Draw = {
  el, fold, dpr, sizeCanvas, sizeCanvasRaw, cssVar, theme, hexRgb, headColor, aggColor, colorRgb,
  tokLabel, tokTitle, tokSeg, tokSpecial, tokPos, tokGen, tokLast, tokThumb, MASKED_TEXT, stackAxes,
  seriesFor, lineThreshold, drawLines, heatCanvas, heatThumb, heatPooled, heatHover,
  canvasPainterOn, CanvasPainter, SvgPainter,
};
return { Draw, Tip };
})();
