/* views.js — head, model, neuron and matrix views, tooltip, and the painters
 * used for export. Heavy drawing goes to <canvas>; tokens are always inserted
 * with textContent (never as HTML). */
/* global Data, Tok, headDerived, aggregate, rolloutDerived, fmtAtt, fmtFixed */
/* Causal (decoder) pages: keys after the query are masked. Views never draw a
 * line, bar or value for a masked pair; the matrix view hatches the masked
 * triangle (distinct from a computed 0) and the neuron view lists only the keys
 * the query can see. */
/* exported HeadView, ModelView, NeuronView, MatrixView, Tip, headColor, aggColor, el, CanvasPainter, SvgPainter, theme */

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
    maskBg: cssVar('--masked-bg'), maskLine: cssVar('--masked-line'),
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

function tokLabel(t, g) { return t.groups[t.visible[g]].label; }
/* Vocab spelling(s) and position, for a title attribute (byte-level BPE pages,
 * where the shown text differs from convert_ids_to_tokens' "Ġflies"). */
function tokTitle(t, g) {
  const grp = t.groups[t.visible[g]];
  if (!Data.hasDisplay) return null;
  return 'vocab: ' + grp.vocab + '\nposition ' + grp.first + (grp.members.length > 1 ? '–' + grp.members[grp.members.length - 1] : '');
}
const MASKED_TEXT = 'masked: the key comes after the query (causal model), attention 0';
function tokSeg(t, g) { return t.groups[t.visible[g]].seg; }
function tokSpecial(t, g) { return t.groups[t.visible[g]].special; }
function tokPos(t, g) { return t.groups[t.visible[g]].first; }

/* The series a head/matrix view draws: [{mat, color, name, h}] for spec
 * {li, mode, hs, t}; null when rollout is not computed yet. */
function seriesFor(spec) {
  const { li, mode, hs, t } = spec;
  if (mode === 'heads') {
    return hs.map(h => ({ mat: headDerived(li, h, t), color: headColor(Data.heads[h]), name: 'Head ' + Data.heads[h], h }));
  }
  if (mode === 'rollout') {
    const m = rolloutDerived(li, hs, t);
    return m ? [{ mat: m, color: aggColor(), name: 'Rollout', h: -1 }] : null;
  }
  return [{ mat: aggregate(li, hs, mode, t), color: aggColor(), name: mode === 'max' ? 'Max' : 'Mean', h: -1 }];
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
 * {minW, total, drawn}. */
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
 * {side:'L'|'R', k}. Opacity = weight, batched by 64 opacity levels. */
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
    for (let b = 0; b < 64; b++) {
      const arr = buckets[b];
      if (!arr.length) continue;
      ctx.globalAlpha = Math.min(1, (b + 0.5) / 64);
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

/* ---------------------------------------------------------------- head view */

/* Builds a head view into host. spec {li, mode, hs, t, filter, compact}. Returns
 * {iso(), exportScene(painterFactory)}. */
function HeadView(host, spec) {
  const { t } = spec;
  const m = t.m;
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  const series = seriesFor(spec);
  host.textContent = '';
  if (!series) { host.appendChild(el('div', 'empty', 'Computing rollout…')); return null; }
  const nmax = Math.max(rows.length, cols.length);
  const rh = nmax <= 24 ? 28 : nmax <= 48 ? 23 : nmax <= 128 ? 19 : 15;
  const fs = nmax <= 24 ? 15 : nmax <= 48 ? 14 : nmax <= 128 ? 12.5 : 11;
  const linesW = spec.compact ? 260 : nmax <= 24 ? 340 : Math.min(420, 300 + nmax / 4);
  const single = series.length === 1;
  const stripW = single ? 56 : Math.min(6 * series.length + 4, 100);
  const lineW = nmax <= 48 ? 2 : nmax <= 128 ? 1.5 : 1;

  const wrap = el('div', 'hv');
  wrap.style.fontSize = fs + 'px';
  const stripL = el('canvas', 'hv-strip');
  const colL = el('div', 'hv-col hv-left');
  const lines = el('canvas', 'hv-lines');
  const colR = el('div', 'hv-col hv-right');
  const stripR = el('canvas', 'hv-strip');
  const H = nmax * rh;
  const mkRow = (g, side, k) => {
    const d = el('div', 'tok');
    d.style.height = rh + 'px';
    d.dataset.side = side;
    d.dataset.k = k;
    d.dataset.pos = tokPos(t, g);
    if (tokSpecial(t, g)) d.classList.add('special');
    if (tokSeg(t, g) === 1) d.classList.add('seg-b');
    const tt = el('span', 't', tokLabel(t, g));
    const ttl = tokTitle(t, g);
    if (ttl) d.title = ttl;
    const v = el('span', 'v');
    if (side === 'L') { d.appendChild(v); d.appendChild(tt); } else { d.appendChild(tt); d.appendChild(v); }
    return d;
  };
  const rowEls = rows.map((g, k) => mkRow(g, 'L', k));
  const colEls = cols.map((g, k) => mkRow(g, 'R', k));
  rowEls.forEach(d => colL.appendChild(d));
  colEls.forEach(d => colR.appendChild(d));
  wrap.append(stripL, colL, lines, colR, stripR);
  const thinNote = el('div', 'hint thin-note');
  host.appendChild(thinNote);
  host.appendChild(wrap);

  const ctx = sizeCanvas(lines, linesW, H, 40e6);
  const sctxL = sizeCanvas(stripL, stripW, H, 20e6);
  const sctxR = sizeCanvas(stripR, stripW, H, 20e6);
  const geo = { x0: 0, x1: linesW, yL: r => r * rh + rh / 2, yR: c => c * rh + rh / 2 };
  let iso = null, pinned = null;

  function drawStrips() {
    sctxL.clearRect(0, 0, stripW, H);
    sctxR.clearRect(0, 0, stripW, H);
    for (const d of rowEls) { d.lastChild.previousSibling.textContent = ''; d.classList.remove('masked'); }
    for (const d of colEls) { d.lastChild.textContent = ''; d.classList.remove('masked'); }
    if (!iso) return;
    const other = iso.side === 'L' ? colEls : rowEls;
    const sctx = iso.side === 'L' ? sctxR : sctxL;
    const count = iso.side === 'L' ? cols.length : rows.length;
    for (let k = 0; k < count; k++) {
      const ri = iso.side === 'L' ? rows[iso.k] : rows[k];
      const ci = iso.side === 'L' ? cols[k] : cols[iso.k];
      /* masked pair: no bar, no value, the token dimmed */
      if (Tok.masked(ri, ci)) { other[k].classList.add('masked'); continue; }
      const y = k * rh;
      let best = -1, bestS = null;
      series.forEach((s, si) => {
        const w = s.mat[ri * m + ci];
        if (w > best) { best = w; bestS = s; }
        sctx.fillStyle = s.color;
        if (single) {
          const bw = Math.max(w > 0 ? 1 : 0, w * (stripW - 6));
          const x = iso.side === 'L' ? 4 : stripW - 4 - bw;
          sctx.globalAlpha = 0.9;
          sctx.fillRect(x, y + rh * 0.25, bw, rh * 0.5);
        } else {
          const bh = Math.max(w > 0.0005 ? 1 : 0, w * (rh - 4));
          const x = iso.side === 'L' ? 3 + si * 6 : stripW - 3 - (series.length - si) * 6;
          sctx.globalAlpha = 0.92;
          sctx.fillRect(x, y + rh - 2 - bh, 5, bh);
          sctx.globalAlpha = 0.1;
          sctx.fillRect(x, y + 2, 5, rh - 4);
        }
      });
      sctx.globalAlpha = 1;
      const v = iso.side === 'L' ? other[k].lastChild : other[k].firstChild;
      v.textContent = single ? fmtAtt(best) : fmtAtt(best) + ' ' + (bestS.h >= 0 ? 'H' + Data.heads[bestS.h] : '');
      v.style.color = single ? '' : bestS.color;
    }
  }
  function draw() {
    ctx.clearRect(0, 0, linesW, H);
    const lt = lineThreshold(series, m, rows, cols, iso);
    drawLines(ctx, series, m, rows, cols, geo, iso, lineW, lt.minW);
    thinNote.textContent = lt.drawn < lt.total
      ? 'Showing the ' + lt.drawn.toLocaleString('en-US') + ' strongest of ' + lt.total.toLocaleString('en-US') +
        ' lines (weight ≥ ' + lt.minW.toFixed(4) + '). Hover a token to see all of its lines.'
      : '';
    for (const d of rowEls) d.classList.toggle('hot', !!iso && iso.side === 'L' && +d.dataset.k === iso.k);
    for (const d of colEls) d.classList.toggle('hot', !!iso && iso.side === 'R' && +d.dataset.k === iso.k);
    for (const d of rowEls) d.classList.toggle('pinned', !!pinned && pinned.side === 'L' && +d.dataset.k === pinned.k);
    for (const d of colEls) d.classList.toggle('pinned', !!pinned && pinned.side === 'R' && +d.dataset.k === pinned.k);
    drawStrips();
    wrap.dataset.iso = iso ? iso.side + iso.k : '';
    wrap.dataset.lines = String(lt.drawn);
  }
  function setIso(x) {
    const same = (x === iso) || (x && iso && x.side === iso.side && x.k === iso.k);
    if (same) return;
    iso = x;
    draw();
  }
  function tipFor(ev, d) {
    /* pinned on one side, hovering the other: per-head values of that pair */
    if (!pinned || d.dataset.side === pinned.side) { Tip.hide(); return; }
    const k = +d.dataset.k;
    const r = pinned.side === 'L' ? rows[pinned.k] : rows[k];
    const c = pinned.side === 'L' ? cols[k] : cols[pinned.k];
    Tip.show(ev.clientX, ev.clientY, box => {
      Tip.title(box, tokLabel(t, r) + '  →  ' + tokLabel(t, c));
      if (Tok.masked(r, c)) { Tip.sub(box, MASKED_TEXT); return; }
      for (const s of series) {
        const pat = s.h >= 0 ? Data.pattern(spec.li, s.h) : null;
        Tip.row(box, s.name + (pat ? ' · ' + pat : ''), fmtAtt(s.mat[r * m + c]), s.color);
      }
    });
  }
  wrap.addEventListener('mouseover', ev => {
    const d = ev.target.closest('.tok');
    if (!d || !wrap.contains(d)) return;
    if (!pinned) setIso({ side: d.dataset.side, k: +d.dataset.k });
    tipFor(ev, d);
  });
  wrap.addEventListener('mousemove', ev => {
    const d = ev.target.closest('.tok');
    if (d && pinned && d.dataset.side !== pinned.side) tipFor(ev, d);
  });
  wrap.addEventListener('mouseleave', () => { Tip.hide(); if (!pinned) setIso(null); });
  wrap.addEventListener('click', ev => {
    const d = ev.target.closest('.tok');
    if (!d) return;
    const x = { side: d.dataset.side, k: +d.dataset.k };
    if (pinned && pinned.side === x.side && pinned.k === x.k) pinned = null;
    else pinned = x;
    iso = pinned || x;
    Tip.hide();
    draw();
  });
  draw();

  /* Export: the same picture laid out for a standalone image. */
  function exportScene(P, title) {
    const th = theme();
    const measure = document.createElement('canvas').getContext('2d');
    measure.font = fs + 'px ' + th.sans;
    const tw = k => measure.measureText(k).width;
    let lw = 0, rw = 0;
    rows.forEach(g => { lw = Math.max(lw, tw(tokLabel(t, g))); });
    cols.forEach(g => { rw = Math.max(rw, tw(tokLabel(t, g))); });
    lw = Math.min(240, Math.ceil(lw)) + 12;
    rw = Math.min(240, Math.ceil(rw)) + 12;
    const pad = 20, top = 50, W = pad + lw + linesW + rw + pad, Ht = top + H + pad;
    const p = P(W, Ht);
    p.rect(0, 0, W, Ht, th.bg, 1);
    p.text(pad, 22, title, { size: 14, color: th.ink, weight: 650 });
    let lx = pad + 4;
    series.slice(0, 24).forEach(s => {
      p.rect(lx, 32, 10, 10, s.color, 1);
      p.text(lx + 14, 37, s.name.replace('Head ', 'H'), { size: 11, color: th.muted, baseline: 'middle' });
      lx += 22 + measure.measureText(s.name).width * 0.8;
    });
    const x0 = pad + lw, x1 = x0 + linesW;
    const g2 = { x0, x1, yL: r => top + r * rh + rh / 2, yR: c => top + c * rh + rh / 2 };
    const lt = lineThreshold(series, m, rows, cols, iso);
    if (p.vector && lt.drawn <= 15000) {
      p.lines(series, m, rows, cols, g2, iso, lineW, lt.minW);
    } else {
      const raster = document.createElement('canvas');
      const rctx = sizeCanvasRaw(raster, linesW, H, 2, 60e6);
      drawLines(rctx, series, m, rows, cols, { x0: 0, x1: linesW, yL: geo.yL, yR: geo.yR }, iso, lineW, lt.minW);
      p.image(raster, x0, top, linesW, H, true);
    }
    const hot = iso;
    rows.forEach((g, k) => {
      const c = tokSpecial(t, g) ? th.muted : th.ink;
      p.text(x0 - 8, top + k * rh + rh / 2, tokLabel(t, g), { size: fs, color: c, anchor: 'end', baseline: 'middle', weight: hot && hot.side === 'L' && hot.k === k ? 700 : 400 });
    });
    cols.forEach((g, k) => {
      const c = tokSpecial(t, g) ? th.muted : th.ink;
      p.text(x1 + 8, top + k * rh + rh / 2, tokLabel(t, g), { size: fs, color: c, baseline: 'middle', weight: hot && hot.side === 'R' && hot.k === k ? 700 : 400 });
    });
    return p;
  }
  return {
    exportScene,
    clearPin() { pinned = null; iso = null; Tip.hide(); draw(); },
    hover(side, k) { setIso({ side, k }); },
    get iso() { return iso; },
  };
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
 * maskRgb (causal pages): the color of masked cells, else null. */
function heatCanvas(mat, m, rows, cols, rgb, bgRgb, gamma, vmax, maskRgb) {
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
      if (maskRgb && Tok.masked(rows[r], cols[c])) {
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

/* Max-pooled thumbnail, S x S pixels, scaled to its own largest weight. A
 * pixel all of whose cells are masked gets maskRgb (when given). */
function heatThumb(mat, m, rows, cols, rgb, bgRgb, gamma, S, maskRgb) {
  const R = rows.length, C = cols.length;
  if (R <= S && C <= S) {
    let mx = 0;
    for (const r of rows) for (const c of cols) if (mat[r * m + c] > mx) mx = mat[r * m + c];
    return heatCanvas(mat, m, rows, cols, rgb, bgRgb, gamma, mx || 1, maskRgb);
  }
  const cv = document.createElement('canvas');
  cv.width = S;
  cv.height = S;
  const buf = new Float32Array(S * S);
  const open = new Uint8Array(S * S); /* some cell of the pixel is not masked */
  for (let r = 0; r < R; r++) {
    const py = ((r * S) / R) | 0, ro = rows[r] * m;
    for (let c = 0; c < C; c++) {
      const px = ((c * S) / C) | 0;
      const o = py * S + px;
      if (maskRgb && Tok.masked(rows[r], cols[c])) continue;
      open[o] = 1;
      const w = mat[ro + cols[c]];
      if (w > buf[o]) buf[o] = w;
    }
  }
  const ctx = cv.getContext('2d');
  const img = ctx.createImageData(S, S);
  const d = img.data;
  let mx = 0;
  for (let i = 0; i < S * S; i++) if (buf[i] > mx) mx = buf[i];
  const inv = mx > 0 ? 1 / mx : 0;
  for (let i = 0; i < S * S; i++) {
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

/* ---------------------------------------------------------------- model view */

/* Grid of every layer x head. spec {t, filter, gamma, cur:{li,h}, onOpen(li,h)}. */
function ModelView(host, spec) {
  const { t } = spec;
  const m = t.m;
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  host.textContent = '';
  const title = el('div', 'view-title');
  title.appendChild(el('h2', null, 'Model view'));
  const lineThumbs = Math.max(rows.length, cols.length) <= 40;
  title.appendChild(el('span', 'sub', 'Every layer × head' + (lineThumbs ? ' (lines, opacity = weight)' : ' (heat maps, max-pooled, each scaled to its own largest weight; rows = queries, columns = keys)') + '. Click a thumbnail to open it large.' +
    (Data.causal ? (lineThumbs ? ' Causal model: no line goes to a later token.' : ' Causal model: the masked upper triangle is grey.') : '')));
  host.appendChild(title);
  /* grid: 36px labels + H columns of S + 8 (thumb padding and border), 6px gaps */
  const avail = Math.max(480, host.clientWidth - 42);
  const S = Math.max(56, Math.min(128, Math.floor((avail - 42 - 6 * (Data.H - 1)) / Data.H) - 8));
  const grid = el('div', 'mv');
  grid.style.gridTemplateColumns = '36px repeat(' + Data.H + ', ' + (S + 8) + 'px)';
  grid.appendChild(el('div', 'lab', ''));
  for (let h = 0; h < Data.H; h++) {
    const lab = el('div', 'lab', 'H' + Data.heads[h]);
    lab.style.color = headColor(Data.heads[h]);
    grid.appendChild(lab);
  }
  const cells = [];
  for (let li = 0; li < Data.L; li++) {
    grid.appendChild(el('div', 'lab rowlab', 'L' + Data.layers[li]));
    cells.push([]);
    for (let h = 0; h < Data.H; h++) {
      const b = el('button', 'thumb');
      b.type = 'button';
      b.dataset.li = li;
      b.dataset.h = h;
      b.style.setProperty('--c', headColor(Data.heads[h]));
      const pat = Data.pattern(li, h);
      b.title = 'Layer ' + Data.layers[li] + ', head ' + Data.heads[h] + (pat ? ' — ' + pat : '');
      b.setAttribute('aria-label', b.title);
      const cv = el('canvas');
      sizeCanvas(cv, S, S);
      b.appendChild(cv);
      if (pat) b.appendChild(el('span', 'cap', pat));
      if (spec.cur && spec.cur.li === li && spec.cur.h === h) b.classList.add('cur');
      grid.appendChild(b);
      cells[li].push(cv);
    }
  }
  host.appendChild(grid);
  grid.addEventListener('click', ev => {
    const b = ev.target.closest('.thumb');
    if (b) spec.onOpen(+b.dataset.li, +b.dataset.h);
  });
  const th = theme();
  const bgRgb = hexRgb(th.bg);
  const maskRgb = Data.causal ? hexRgb(th.maskBg) : null;
  function drawLayer(li) {
    for (let h = 0; h < Data.H; h++) {
      const cv = cells[li][h];
      const ctx = cv.getContext('2d');
      ctx.clearRect(0, 0, S, S);
      const mat = Tok.derive(Data.headMatrix(li, h), t);
      const color = headColor(Data.heads[h]);
      if (lineThumbs) {
        const nmax = Math.max(rows.length, cols.length, 2);
        const step = (S - 8) / nmax;
        const g = { x0: S * 0.2, x1: S * 0.8, yL: r => 4 + (r + 0.5) * step, yR: c => 4 + (c + 0.5) * step };
        ctx.fillStyle = th.muted;
        ctx.globalAlpha = 0.55;
        for (let r = 0; r < rows.length; r++) ctx.fillRect(g.x0 - 9, g.yL(r) - 0.75, 7, 1.5);
        for (let c = 0; c < cols.length; c++) ctx.fillRect(g.x1 + 2, g.yR(c) - 0.75, 7, 1.5);
        ctx.globalAlpha = 1;
        drawLines(ctx, [{ mat, color }], m, rows, cols, g, null, 1.2);
      } else {
        const hc = heatThumb(mat, m, rows, cols, colorRgb(color), bgRgb, spec.gamma, S * dpr() | 0, maskRgb);
        ctx.imageSmoothingEnabled = hc.width < S;
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(hc, 0, 0, S, S);
      }
    }
  }
  let cancelled = false;
  (async () => {
    for (let li = 0; li < Data.L && !cancelled; li++) {
      await Data.attention(li);
      if (cancelled || !host.isConnected) return;
      drawLayer(li);
      await new Promise(r => setTimeout(r, 0));
    }
    if (!cancelled) host.dataset.drawn = '1';
  })().catch(err => { console.error(err); });

  function exportScene(P, ttl) {
    const pad = 20, top = 46, lab = 36, cap = Data.meta.head_patterns ? 14 : 0;
    const cw = S + 8, chh = S + 8 + cap;
    const W = pad + lab + Data.H * cw + pad, Ht = top + 18 + Data.L * chh + pad;
    const p = P(W, Ht);
    p.rect(0, 0, W, Ht, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    for (let h = 0; h < Data.H; h++)
      p.text(pad + lab + h * cw + cw / 2, top + 6, 'H' + Data.heads[h], { size: 11, color: headColor(Data.heads[h]), anchor: 'middle', baseline: 'middle', weight: 600 });
    for (let li = 0; li < Data.L; li++) {
      const y = top + 18 + li * chh;
      p.text(pad + lab - 6, y + S / 2, 'L' + Data.layers[li], { size: 11, color: th.muted, anchor: 'end', baseline: 'middle', weight: 600 });
      for (let h = 0; h < Data.H; h++) {
        const x = pad + lab + h * cw + 4;
        p.rect(x - 2, y - 2, S + 4, S + 4, th.line, 1);
        p.image(cells[li][h], x, y, S, S, false);
        const pat = Data.pattern(li, h);
        if (pat) p.text(x + S / 2, y + S + 10, pat.length > 18 ? pat.slice(0, 17) + '…' : pat, { size: 9, color: th.muted, anchor: 'middle', baseline: 'middle' });
      }
    }
    return p;
  }
  return { exportScene, cancel() { cancelled = true; } };
}

/* ---------------------------------------------------------------- neuron view */

/* q, k, q×k, q·k/√d and softmax for one head and query. spec {li, h, t (no
 * merge), filter, qi (raw token index), onQuery(i)}. Needs queries/keys. */
function NeuronView(host, spec, qk) {
  const { li, h, t } = spec;
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  host.textContent = '';
  const d = Data.headDim;
  const n = Data.n;
  const q = qk.q[h], k = qk.k[h], dq = qk.decQ[h], dk = qk.decK[h];
  const sq = Math.pow(10, -dq), sk = Math.pow(10, -dk);
  let qi = spec.qi;
  const rawRows = rows.map(g => tokPos(t, g));
  const rawCols = cols.map(g => tokPos(t, g));
  if (!rawRows.includes(qi)) qi = rawRows.length ? rawRows[0] : 0;
  /* the keys the query sees: every key, or (causal) those up to the query; a
   * prefix of rawCols, which is ascending. Masked keys are not listed. */
  const keysFor = i => (Data.causal ? rawCols.filter(j => !Data.masked(i, j)) : rawCols);
  let keys = keysFor(qi);

  const title = el('div', 'view-title');
  const pat = Data.pattern(li, h);
  title.appendChild(el('h2', null, 'Neuron view · layer ' + Data.layers[li] + ', head ' + Data.heads[h] + (pat ? ' (' + pat + ')' : '')));
  title.appendChild(el('span', 'sub', 'Hover or click a query token on the left. Cells: blue positive, orange negative; hover a cell for its value.' +
    (Data.causal ? ' Causal model: only the keys up to the query are listed (later keys are masked; the softmax runs over these).' : '')));
  host.appendChild(title);

  const nmax = Math.max(cols.length, 1);
  const rh = nmax <= 40 ? 22 : nmax <= 128 ? 18 : 15;
  const avail = Math.max(600, host.clientWidth - 40 - 170 - 130 - 78 - 132 - 40);
  const cw = Math.max(2, Math.min(11, Math.floor(avail / (2 * d + 3))));
  const gap = cw * 3;
  const cellsW = 2 * d * cw + gap;

  const wrap = el('div', 'nv');
  const qcol = el('div', 'nv-queries');
  qcol.appendChild(el('div', 'qh', 'Query'));
  const qEls = rows.map(g => {
    const e = el('div', 'tok', tokLabel(t, g));
    const ttl = tokTitle(t, g);
    if (ttl) e.title = ttl;
    e.style.height = rh + 'px';
    e.style.lineHeight = rh + 'px';
    e.dataset.pos = tokPos(t, g);
    if (tokSpecial(t, g)) e.classList.add('special');
    if (tokPos(t, g) === qi) e.classList.add('cur');
    qcol.appendChild(e);
    return e;
  });
  const main = el('div', 'nv-main');
  const head = el('div', 'nv-head');
  head.appendChild(el('div', 'nv-lab', 'Key'));
  const hk = el('div', 'nv-cells');
  hk.style.width = cellsW + 'px';
  hk.style.display = 'flex';
  const l1 = el('span', null, 'k (key vector)');
  l1.style.width = d * cw + gap + 'px';
  hk.append(l1, el('span', null, 'q × k (elementwise)'));
  head.appendChild(hk);
  const nh = el('div', 'nv-num', 'q·k/√d');
  head.appendChild(nh);
  head.appendChild(el('div', 'nv-sm', 'softmax'));
  const qrow = el('div', 'nv-qrow');
  const qlab = el('div', 'nv-lab', 'q · ' + Data.label(qi));
  qlab.style.fontWeight = '650';
  qrow.appendChild(qlab);
  const qcv = el('canvas', 'nv-cells');
  qrow.appendChild(qcv);
  qrow.style.height = rh + 4 + 'px';
  main.append(head, qrow);
  const body = el('div');
  body.style.position = 'relative';
  const rowEls = cols.map(g => {
    const r = el('div', 'nv-row');
    r.style.height = rh + 'px';
    r.dataset.pos = tokPos(t, g);
    const lab = el('div', 'nv-lab', tokLabel(t, g));
    const ttl = tokTitle(t, g);
    if (ttl) lab.title = ttl;
    if (tokSpecial(t, g)) lab.classList.add('special');
    const sp = el('div', 'nv-cells');
    sp.style.width = cellsW + 'px';
    const num = el('div', 'nv-num');
    const sm = el('div', 'nv-sm');
    const bar = el('span', 'bar');
    const val = el('span', 'val');
    sm.append(bar, val);
    r.append(lab, sp, num, sm);
    return { r, num, bar, val };
  });
  const cv = el('canvas', 'nv-canvas');
  cv.style.left = '130px';
  cv.style.top = '0px';
  main.appendChild(body);
  const maskNote = el('div', 'nv-masked');
  main.appendChild(maskNote);
  /* lists the rows of the keys the current query sees (all but under a mask) */
  let shown = -1;
  function showRows() {
    if (shown === keys.length) return false;
    shown = keys.length;
    body.replaceChildren(...rowEls.slice(0, keys.length).map(e => e.r), cv);
    const hidden = rawCols.length - keys.length;
    maskNote.textContent = hidden ? hidden + ' later key' + (hidden === 1 ? ' is' : 's are') + ' masked (causal model) and not listed.' : '';
    maskNote.hidden = !hidden;
    return true;
  }
  const legend = el('div', 'nv-legend');
  const addSw = (color, text) => {
    const s = el('span');
    const sw = el('span', 'sw');
    sw.style.background = color;
    s.append(sw, document.createTextNode(text));
    legend.appendChild(s);
  };
  addSw('#2f6fd0', 'positive');
  addSw('#e8710a', 'negative');
  legend.appendChild(el('span', null, 'Shades are relative to the largest |q|, |k| and |q × k| here. ' +
    'Values: q and k rounded to ' + (dq === dk ? dq : dq + ' and ' + dk) + ' decimals; q × k and q·k/√d computed from those; softmax is the captured attention weight.'));
  main.appendChild(legend);
  wrap.append(qcol, main);
  host.appendChild(wrap);

  const th = theme();
  const bgRgb = hexRgb(th.bg);
  const POS = hexRgb(th.dark ? '#6e9cf5' : '#2f6fd0'), NEG = hexRgb(th.dark ? '#f59a4a' : '#e8710a');
  let H = 0, ctx = null;
  const qctx = sizeCanvas(qcv, cellsW, rh, 4e6);
  cv.dataset.cw = cw;
  cv.dataset.rh = rh;
  cv.dataset.gap = gap;
  cv.dataset.d = d;
  qcv.dataset.cw = cw;

  /* zero is a faint neutral cell (so the grid shows), then toward blue / orange */
  const ZERO = hexRgb(cssVar('--panel-2'));
  function cellColor(v, scale) {
    let a = scale > 0 ? Math.min(1, Math.abs(v) / scale) : 0;
    a = Math.pow(a, 0.75);
    const c = v >= 0 ? POS : NEG;
    return 'rgb(' + Math.round(ZERO[0] + (c[0] - ZERO[0]) * a) + ',' + Math.round(ZERO[1] + (c[1] - ZERO[1]) * a) + ',' + Math.round(ZERO[2] + (c[2] - ZERO[2]) * a) + ')';
  }
  const scores = new Float64Array(n);
  /* colors are relative: q, the keys and the products each to their own largest magnitude */
  let qscale = 1, kscale = 1, pscale = 1;
  function compute() {
    const qo = qi * d;
    let mq = 0, mk = 0, mp = 0;
    for (let x = 0; x < d; x++) mq = Math.max(mq, Math.abs(q[qo + x] * sq));
    for (const j of keys) {
      let s = 0;
      for (let x = 0; x < d; x++) {
        const kv = k[j * d + x] * sk, pv = q[qo + x] * sq * kv;
        s += pv;
        mk = Math.max(mk, Math.abs(kv));
        mp = Math.max(mp, Math.abs(pv));
      }
      scores[j] = s / Math.sqrt(d);
    }
    qscale = mq; kscale = mk; pscale = mp;
  }
  function paint(c2, q2, ox, oy) {
    /* q row */
    const qo = qi * d;
    for (let x = 0; x < d; x++) {
      q2.fillStyle = cellColor(q[qo + x] * sq, qscale);
      q2.fillRect(ox + x * cw, oy.q + 2, Math.max(1, cw - (cw > 3 ? 1 : 0)), rh - 4);
    }
    keys.forEach((j, r) => {
      const y = oy.k + r * rh + 2;
      for (let x = 0; x < d; x++) {
        const kv = k[j * d + x] * sk;
        c2.fillStyle = cellColor(kv, kscale);
        c2.fillRect(ox + x * cw, y, Math.max(1, cw - (cw > 3 ? 1 : 0)), rh - 4);
        c2.fillStyle = cellColor(q[qo + x] * sq * kv, pscale);
        c2.fillRect(ox + d * cw + gap + x * cw, y, Math.max(1, cw - (cw > 3 ? 1 : 0)), rh - 4);
      }
    });
  }
  function draw() {
    keys = keysFor(qi);
    if (showRows() || !ctx) {
      H = keys.length * rh;
      ctx = sizeCanvas(cv, cellsW, H, 40e6);
    }
    compute();
    ctx.clearRect(0, 0, cellsW, H);
    qctx.clearRect(0, 0, cellsW, rh);
    paint(ctx, qctx, 0, { q: 0, k: 0 });
    qlab.textContent = 'q · ' + Data.label(qi);
    keys.forEach((j, r) => {
      const e = rowEls[r];
      e.num.textContent = scores[j].toFixed(3);
      const w = Data.code(li, h, qi, j);
      e.val.textContent = fmtFixed(w, 4);
      e.bar.style.width = Math.max(w > 0 ? 1 : 0, (w / 10000) * 60) + 'px';
      e.bar.style.background = headColor(Data.heads[h]);
    });
    qEls.forEach(e => e.classList.toggle('cur', +e.dataset.pos === qi));
    host.dataset.query = qi;
  }
  function setQuery(i) {
    if (i === qi) return;
    qi = i;
    spec.onQuery(i);
    draw();
  }
  qcol.addEventListener('mouseover', ev => {
    const e = ev.target.closest('.tok');
    if (e) setQuery(+e.dataset.pos);
  });
  qcol.addEventListener('click', ev => {
    const e = ev.target.closest('.tok');
    if (e) setQuery(+e.dataset.pos);
  });
  function cellTip(ev, isQ) {
    const r = ev.target.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    let dim = Math.floor(x / cw), part = 'k';
    if (dim >= d) {
      const x2 = x - d * cw - gap;
      if (x2 < 0) { Tip.hide(); return; }
      dim = Math.floor(x2 / cw);
      part = 'p';
    }
    if (dim < 0 || dim >= d) { Tip.hide(); return; }
    const qc = q[qi * d + dim];
    if (isQ) {
      if (part !== 'k') { Tip.hide(); return; }
      Tip.show(ev.clientX, ev.clientY, box => {
        Tip.title(box, 'q[' + dim + ']  ·  query ' + JSON.stringify(Data.text(qi)) + ' (' + qi + ')');
        Tip.row(box, 'q', fmtFixed(qc, dq));
      });
      return;
    }
    const row = Math.floor(y / rh);
    if (row < 0 || row >= keys.length) { Tip.hide(); return; }
    const j = keys[row];
    const kc = k[j * d + dim];
    Tip.show(ev.clientX, ev.clientY, box => {
      Tip.title(box, (part === 'k' ? 'k' : 'q × k') + '[' + dim + ']  ·  key ' + JSON.stringify(Data.text(j)) + ' (' + j + ')');
      Tip.row(box, 'q', fmtFixed(qc, dq));
      Tip.row(box, 'k', fmtFixed(kc, dk));
      Tip.row(box, 'q × k', fmtFixed(qc * kc, dq + dk));
    });
  }
  cv.addEventListener('mousemove', ev => cellTip(ev, false));
  cv.addEventListener('mouseleave', () => Tip.hide());
  qcv.addEventListener('mousemove', ev => cellTip(ev, true));
  qcv.addEventListener('mouseleave', () => Tip.hide());
  draw();

  function exportScene(P, ttl) {
    const pad = 20, top = 64, lab = 130, numW = 78, smW = 140;
    const note = maskNote.hidden ? '' : maskNote.textContent;
    const W = pad + lab + cellsW + numW + smW + pad, Ht = top + rh + 8 + H + (note ? 22 : 0) + pad;
    const p = P(W, Ht);
    p.rect(0, 0, W, Ht, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    const hx = pad + lab;
    p.text(hx, 50, 'k (key vector)', { size: 11, color: th.muted, weight: 600 });
    p.text(hx + d * cw + gap, 50, 'q × k', { size: 11, color: th.muted, weight: 600 });
    p.text(hx + cellsW + numW - 4, 50, 'q·k/√d', { size: 11, color: th.muted, weight: 600, anchor: 'end' });
    p.text(hx + cellsW + numW + 10, 50, 'softmax', { size: 11, color: th.muted, weight: 600 });
    p.text(hx - 10, top + rh / 2, 'q · ' + Data.label(qi), { size: 12, color: th.ink, anchor: 'end', baseline: 'middle', weight: 650 });
    const ky = top + rh + 8;
    const cells = (1 + keys.length) * 2 * d;
    if (p.vector && cells <= 30000) {
      const tmp = { fillStyle: '', fillRect: (x, y, w, hh) => p.rect(x, y, w, hh, tmp.fillStyle, 1) };
      paint(tmp, tmp, hx, { q: top, k: ky });
    } else {
      const rc = document.createElement('canvas');
      const rcx = sizeCanvasRaw(rc, cellsW, H, 2, 60e6);
      const qc = document.createElement('canvas');
      const qcx = sizeCanvasRaw(qc, cellsW, rh, 2, 4e6);
      paint(rcx, qcx, 0, { q: 0, k: 0 });
      p.image(qc, hx, top, cellsW, rh, true);
      p.image(rc, hx, ky, cellsW, H, true);
    }
    keys.forEach((j, r) => {
      const y = ky + r * rh + rh / 2;
      p.text(hx - 10, y, Data.label(j), { size: 12, color: th.ink, anchor: 'end', baseline: 'middle' });
      p.text(hx + cellsW + numW - 4, y, scores[j].toFixed(3), { size: 12, color: th.ink, anchor: 'end', baseline: 'middle' });
      const w = Data.code(li, h, qi, j);
      p.rect(hx + cellsW + numW + 10, y - 4, Math.max(w > 0 ? 1 : 0, (w / 10000) * 60), 8, headColor(Data.heads[h]), 1);
      p.text(hx + cellsW + numW + 76, y, fmtFixed(w, 4), { size: 12, color: th.ink, baseline: 'middle' });
    });
    if (note) p.text(hx, ky + H + 16, note, { size: 11, color: th.muted, baseline: 'middle' });
    return p;
  }
  return { exportScene, get query() { return qi; } };
}

/* ---------------------------------------------------------------- matrix view */

/* The selected head (or aggregate) as a heat map, queries down, keys across.
 * spec {li, mode, hs, focus, t, filter, gamma}. */
function MatrixView(host, spec) {
  const { t } = spec;
  const m = t.m;
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  host.textContent = '';
  const sspec = Object.assign({}, spec, { hs: spec.mode === 'heads' ? [spec.focus] : spec.hs });
  const series = seriesFor(sspec);
  if (!series) { host.appendChild(el('div', 'empty', 'Computing rollout…')); return null; }
  const s = series[0];
  const th = theme();
  const title = el('div', 'view-title');
  const pat = s.h >= 0 ? Data.pattern(spec.li, s.h) : null;
  const what = s.h >= 0 ? 'head ' + Data.heads[s.h] + (pat ? ' (' + pat + ')' : '') :
    s.name.toLowerCase() + (spec.mode === 'rollout' ? ' through layer ' + Data.layers[spec.li] : ' of ' + spec.hs.length + ' head' + (spec.hs.length === 1 ? '' : 's'));
  title.appendChild(el('h2', null, 'Matrix view · layer ' + Data.layers[spec.li] + ', ' + what));
  title.appendChild(el('span', 'sub', 'Rows: queries (attending), columns: keys (attended to). Hover a cell for its weight.' +
    (Data.causal ? ' Hatched: masked (a key after its query; causal model).' : '')));
  host.appendChild(title);

  const R = rows.length, C = cols.length;
  const avail = Math.max(360, Math.min(host.clientWidth - 60, 1400));
  const measure = document.createElement('canvas').getContext('2d');
  const big = Math.max(R, C);
  const fs = big <= 40 ? 13 : 11;
  measure.font = fs + 'px ' + th.sans;
  let labW = 0;
  const labels = [];
  for (let g = 0; g < m; g++) labels.push(tokLabel(t, g));
  for (const g of rows) labW = Math.max(labW, measure.measureText(labels[g]).width);
  let labH = 0;
  for (const g of cols) labH = Math.max(labH, measure.measureText(labels[g]).width);
  labW = Math.min(150, Math.ceil(labW)) + 10;
  labH = Math.min(150, Math.ceil(labH)) + 10;
  let cell = Math.floor((avail - labW) / Math.max(C, 1));
  cell = Math.max(1, Math.min(34, cell));
  if (cell * C < 200 && C > 0) cell = Math.max(cell, Math.min(34, Math.floor(200 / C)));
  const showLabels = cell >= 9;
  if (!showLabels) { labW = 44; labH = 26; }
  const gw = cell * C, gh = cell * R;
  const W = labW + gw + 8, Ht = labH + gh + 8;
  const wrap = el('div', 'mx-wrap');
  const stack = el('div');
  stack.style.position = 'relative';
  const cv = el('canvas');
  const ov = el('canvas');
  ov.style.position = 'absolute';
  ov.style.left = '0';
  ov.style.top = '0';
  stack.append(cv, ov);
  wrap.appendChild(stack);
  let vmax = 0;
  for (const r of rows) for (const c of cols) vmax = Math.max(vmax, s.mat[r * m + c]);
  if (spec.mode !== 'rollout' && spec.mode !== 'max' && vmax < 1e-9) vmax = 1;
  const scaleMax = spec.mode === 'heads' || spec.mode === 'max' ? 1 : vmax;
  const legend = el('div', 'mx-legend');
  const lg = el('canvas');
  legend.append(el('span', null, '0'), lg, el('span', null, fmtAtt(scaleMax) + (spec.gamma !== 1 ? ' (√ scale)' : '')));
  if (Data.causal) {
    const ms = el('span', 'mx-masked');
    ms.append(el('span', 'sw-masked'), document.createTextNode('masked (key after the query)'));
    legend.appendChild(ms);
  }
  wrap.appendChild(legend);
  host.appendChild(wrap);

  const ctx = sizeCanvas(cv, W, Ht, 30e6);
  const octx = sizeCanvas(ov, W, Ht, 30e6);
  const rgb = colorRgb(s.color), bgRgb = hexRgb(th.bg);
  const heat = heatCanvas(s.mat, m, rows, cols, rgb, bgRgb, spec.gamma, scaleMax, Data.causal ? hexRgb(th.maskBg) : null);
  /* sentence boundary (first B token) on each axis */
  const bRow = rows.findIndex(g => tokSeg(t, g) === 1), bCol = cols.findIndex(g => tokSeg(t, g) === 1);
  /* the masked cells as row runs [r0, r1) x [c0, C): each row's masked keys are
   * a suffix of the columns (groups are in token order) */
  const maskRuns = [];
  if (Data.causal) {
    let c0 = 0;
    rows.forEach((g, r) => {
      while (c0 < C && cols[c0] <= g) c0++;
      const last = maskRuns[maskRuns.length - 1];
      if (c0 >= C) return;
      if (last && last.c0 === c0 && last.r1 === r) last.r1 = r + 1;
      else maskRuns.push({ r0: r, r1: r + 1, c0 });
    });
  }
  /* rows are ascending too, so c0 only grows: the loop above is linear */
  function paintMask(p, ox, oy) {
    if (!maskRuns.length) return;
    p.hatch(maskRuns.map(u => [ox + labW + u.c0 * cell, oy + labH + u.r0 * cell, (C - u.c0) * cell, (u.r1 - u.r0) * cell]), th.maskBg, th.maskLine);
  }
  function paintAll(p, ox, oy, labelsToo) {
    p.image(heat, ox + labW, oy + labH, gw, gh, false);
    paintMask(p, ox, oy);
    if (bRow > 0) p.rect(ox + labW, oy + labH + bRow * cell - 0.5, gw, 1, th.muted, 0.7);
    if (bCol > 0) p.rect(ox + labW + bCol * cell - 0.5, oy + labH, 1, gh, th.muted, 0.7);
    if (!labelsToo) return;
    if (showLabels) {
      rows.forEach((g, r) => p.text(ox + labW - 6, oy + labH + r * cell + cell / 2, fitText(measure, labels[g], labW - 10), { size: fs, color: tokSpecial(t, g) ? th.muted : th.ink, anchor: 'end', baseline: 'middle' }));
      cols.forEach((g, c) => p.text(ox + labW + c * cell + cell / 2, oy + labH - 6, fitText(measure, labels[g], labH - 10), { size: fs, color: tokSpecial(t, g) ? th.muted : th.ink, baseline: 'middle', rotate: -90 }));
    } else {
      const step = Math.ceil(40 / cell);
      for (let r = 0; r < R; r += step * 2) p.text(ox + labW - 6, oy + labH + r * cell + cell / 2, String(tokPos(t, rows[r])), { size: 10, color: th.muted, anchor: 'end', baseline: 'middle' });
      for (let c = 0; c < C; c += step * 2) p.text(ox + labW + c * cell + cell / 2, oy + labH - 8, String(tokPos(t, cols[c])), { size: 10, color: th.muted, anchor: 'middle', baseline: 'middle' });
    }
  }
  const screenPainter = canvasPainterOn(ctx);
  screenPainter.rect(0, 0, W, Ht, th.bg, 1);
  paintAll(screenPainter, 0, 0, true);
  /* legend gradient */
  const lctx = sizeCanvas(lg, 160, 10);
  for (let x = 0; x < 160; x++) {
    let a = x / 159;
    if (spec.gamma !== 1) a = Math.pow(a, spec.gamma);
    lctx.fillStyle = 'rgb(' + Math.round(bgRgb[0] + (rgb[0] - bgRgb[0]) * a) + ',' + Math.round(bgRgb[1] + (rgb[1] - bgRgb[1]) * a) + ',' + Math.round(bgRgb[2] + (rgb[2] - bgRgb[2]) * a) + ')';
    lctx.fillRect(x, 0, 1, 10);
  }
  ov.dataset.labw = labW;
  ov.dataset.labh = labH;
  ov.dataset.cell = cell;
  ov.addEventListener('mousemove', ev => {
    const r0 = ov.getBoundingClientRect();
    const x = ev.clientX - r0.left - labW, y = ev.clientY - r0.top - labH;
    octx.clearRect(0, 0, W, Ht);
    const c = Math.floor(x / cell), r = Math.floor(y / cell);
    if (x < 0 || y < 0 || c >= C || r >= R) { Tip.hide(); return; }
    octx.strokeStyle = th.ink;
    octx.globalAlpha = 0.35;
    octx.lineWidth = 1;
    octx.strokeRect(labW + 0.5, labH + r * cell + 0.5, gw - 1, Math.max(1, cell - 1));
    octx.strokeRect(labW + c * cell + 0.5, labH + 0.5, Math.max(1, cell - 1), gh - 1);
    octx.globalAlpha = 1;
    const gr = rows[r], gc = cols[c];
    Tip.show(ev.clientX, ev.clientY, box => {
      Tip.title(box, labels[gr] + '  →  ' + labels[gc]);
      if (Tok.masked(gr, gc)) Tip.sub(box, MASKED_TEXT);
      else Tip.row(box, s.name + (pat ? ' · ' + pat : ''), fmtAtt(s.mat[gr * m + gc]), s.color);
      Tip.sub(box, 'query ' + tokPos(t, gr) + ', key ' + tokPos(t, gc));
      if (Data.hasDisplay) Tip.sub(box, 'vocab: ' + t.groups[t.visible[gr]].vocab + '  →  ' + t.groups[t.visible[gc]].vocab);
    });
  });
  ov.addEventListener('mouseleave', () => { octx.clearRect(0, 0, W, Ht); Tip.hide(); });

  function exportScene(P, ttl) {
    const pad = 20, top = 40;
    const p = P(W + 2 * pad, Ht + top + pad);
    p.rect(0, 0, W + 2 * pad, Ht + top + pad, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    if (p.vector && R * C <= 4096) {
      /* cells as rectangles (weight = opacity of the head color), then labels */
      const inv = scaleMax > 0 ? 1 / scaleMax : 0;
      rows.forEach((g, r) => cols.forEach((gc, c) => {
        if (Tok.masked(g, gc)) return;
        let a = Math.min(1, s.mat[g * m + gc] * inv);
        if (spec.gamma !== 1) a = Math.pow(a, spec.gamma);
        if (a > 0.002) p.rect(pad + labW + c * cell, top + labH + r * cell, cell, cell, s.color, a);
      }));
      paintAll({ image() {}, text: p.text.bind(p), rect: p.rect.bind(p), hatch: p.hatch.bind(p) }, pad, top, true);
    } else {
      paintAll(p, pad, top, true);
    }
    return p;
  }
  return { exportScene };
}

/* s, cut with an ellipsis to at most maxW pixels in measure's font (whole code points). */
function fitText(measure, s, maxW) {
  if (measure.measureText(s).width <= maxW) return s;
  const cps = Array.from(s);
  let lo = 0, hi = cps.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure.measureText(cps.slice(0, mid).join('') + '…').width <= maxW) lo = mid;
    else hi = mid - 1;
  }
  return cps.slice(0, lo).join('') + '…';
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
          mk('line', { x1: f(g.x0), y1: f(g.yL(r)), x2: f(g.x1), y2: f(g.yR(c)), 'stroke-opacity': String(Math.round(wgt * 1000) / 1000) }, grp);
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
