/* view_head.js — the head view: queries on the left, keys on the right, one
 * line per pair with opacity = weight, for every active head in its color (or
 * their mean, max or rollout); hovering a token isolates its lines, clicking
 * pins it. Needs from data.js: Tok (groups, filterIdx, masked) and the
 * derived matrices behind Draw.seriesFor (Derived.head, .aggregate, .rollout);
 * Data.pattern for the tooltip. */
/* global Data, Tok, Fmt, Draw, Tip, Views, Tiles */

/* The file's body is one function (not indented): it registers the view
 * and leaves no names behind. */
(() => {

/* ---------------------------------------------------------------- head view */

/* Builds a head view into host. spec {li, mode, hs, t, filter, compact, pin}
 * (pin: a raw token index whose query row starts pinned, or -1). Returns
 * {iso(), exportScene(painterFactory)}. */
function HeadView(host, spec) {
  const { t } = spec;
  const masked = Tok.maskFor(t, spec.li);
  const m = t.mc; /* row stride of the derived matrices */
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  const series = Draw.seriesFor(spec);
  host.textContent = '';
  if (!series) { host.appendChild(Draw.el('div', 'empty', 'Computing rollout…')); return null; }
  const nmax = Math.max(rows.length, cols.length);
  const long = nmax > 512;
  const rh = nmax <= 24 ? 28 : nmax <= 48 ? 23 : nmax <= 128 ? 19 : 15;
  const fs = nmax <= 24 ? 15 : nmax <= 48 ? 14 : nmax <= 128 ? 12.5 : 11;
  const linesW = spec.compact ? 260 : nmax <= 24 ? 340 : Math.min(420, 300 + nmax / 4);
  const single = series.length === 1;
  const stripW = single ? 56 : Math.min(6 * series.length + 4, 100);
  const lineW = nmax <= 48 ? 2 : nmax <= 128 ? 1.5 : 1;

  /* thousands of tokens (a live page's long input): fixed-width columns whose
   * rows off screen are not laid out or painted (content-visibility) */
  const wrap = Draw.el('div', long ? 'hv long' : 'hv');
  wrap.style.fontSize = fs + 'px';
  const stripL = Draw.el('canvas', 'hv-strip');
  const colL = Draw.el('div', 'hv-col hv-left');
  const lines = Draw.el('canvas', 'hv-lines');
  const colR = Draw.el('div', 'hv-col hv-right');
  const stripR = Draw.el('canvas', 'hv-strip');
  /* attention sinks (gpt-oss): a strip left of the queries, each query row's share of its
   * softmax that went to the head's sink logit (no key), per series (s.mat.sink) */
  const sinkSeries = spec.mode === 'rollout' ? [] : series.filter(s => s.mat.sink);
  const sinkW = sinkSeries.length ? (single ? 44 : Math.min(6 * sinkSeries.length + 6, 100)) : 0;
  const sinkStrip = sinkW ? Draw.el('canvas', 'hv-strip hv-sink') : null;
  const H = nmax * rh;
  const mkRow = (g, side, k) => {
    const ts = side === 'L' ? t.rows : t.cols;
    const d = Draw.el('div', 'tok');
    d.style.height = rh + 'px';
    d.dataset.side = side;
    d.dataset.k = k;
    d.dataset.pos = Draw.tokPos(ts, g);
    d.dataset.last = Draw.tokLast(ts, g);
    if (Draw.tokSpecial(ts, g)) d.classList.add('special');
    if (Draw.tokGen(ts, g)) d.classList.add('gen');
    if (Draw.tokSeg(ts, g) === 1) d.classList.add('seg-b');
    const tt = Draw.el('span', 't', Draw.tokLabel(ts, g));
    const thumb = Draw.tokThumb(ts, g, Math.max(10, rh - 3)); /* an image run: the patch itself */
    if (thumb) tt.prepend(thumb);
    const ttl = Draw.tokTitle(ts, g);
    if (ttl) d.title = ttl;
    const v = Draw.el('span', 'v');
    if (side === 'L') { d.appendChild(v); d.appendChild(tt); } else { d.appendChild(tt); d.appendChild(v); }
    return d;
  };
  const rowEls = rows.map((g, k) => mkRow(g, 'L', k));
  const colEls = cols.map((g, k) => mkRow(g, 'R', k));
  rowEls.forEach(d => colL.appendChild(d));
  colEls.forEach(d => colR.appendChild(d));
  if (sinkStrip) {
    sinkStrip.setAttribute('role', 'img');
    sinkStrip.setAttribute('aria-label', 'Sink: each query\'s share of its softmax that went to the head\'s sink logit');
    wrap.appendChild(sinkStrip);
  }
  wrap.append(stripL, colL, lines, colR, stripR);
  const thinNote = Draw.el('div', 'hint thin-note');
  host.appendChild(thinNote);
  host.appendChild(wrap);

  /* a canvas tens of thousands of pixels tall takes the browser seconds to
   * raster: long views' canvases get fewer pixels than CSS pixels */
  const ctx = Draw.sizeCanvas(lines, linesW, H, long ? 8e6 : 40e6);
  const sctxL = Draw.sizeCanvas(stripL, stripW, H, long ? 2e6 : 20e6);
  const sctxR = Draw.sizeCanvas(stripR, stripW, H, long ? 2e6 : 20e6);
  if (sinkStrip) {
    /* drawn once: it does not depend on the hovered token */
    const kctx = Draw.sizeCanvas(sinkStrip, sinkW, H, long ? 2e6 : 20e6);
    const th = Draw.theme();
    kctx.fillStyle = th.muted;
    kctx.globalAlpha = 0.35;
    kctx.fillRect(sinkW - 2, 0, 1, H);
    rows.forEach((g, k) => {
      const y = k * rh;
      sinkSeries.forEach((s, si) => {
        const w = s.mat.sink[g];
        kctx.fillStyle = s.color;
        if (single) {
          const bw = Math.max(w > 0 ? 1 : 0, w * (sinkW - 8));
          kctx.globalAlpha = 0.55;
          kctx.fillRect(sinkW - 5 - bw, y + rh * 0.3, bw, rh * 0.4);
        } else {
          const bh = Math.max(w > 0.0005 ? 1 : 0, w * (rh - 4));
          kctx.globalAlpha = 0.7;
          kctx.fillRect(3 + si * 6, y + rh - 2 - bh, 5, bh);
        }
      });
    });
    kctx.globalAlpha = 1;
    Object.assign(sinkStrip.dataset, { rh: String(rh), rows: String(rows.length), series: String(sinkSeries.length) });
    sinkStrip.addEventListener('mousemove', ev => {
      const k = Math.floor((ev.clientY - sinkStrip.getBoundingClientRect().top) / rh);
      if (k < 0 || k >= rows.length) { Tip.hide(); return; }
      const g = rows[k];
      Tip.show(ev.clientX, ev.clientY, box => {
        Tip.title(box, Draw.tokLabel(t.rows, g) + '  →  sink');
        for (const s of sinkSeries) Tip.row(box, s.name, Fmt.att(s.mat.sink[g]), s.color);
        Tip.sub(box, 'the share of this query\'s softmax that went to the head\'s sink logit (no key)');
      });
    });
    sinkStrip.addEventListener('mouseleave', () => Tip.hide());
  }
  const geo = { x0: 0, x1: linesW, yL: r => r * rh + rh / 2, yR: c => c * rh + rh / 2 };
  let iso = null, pinned = null;
  if (spec.pin >= 0) {
    const k = rows.indexOf(t.rows.visIndex[t.rows.groupOf[spec.pin]]);
    if (k >= 0) iso = pinned = { side: 'L', k };
  }

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
      if (masked(ri, ci)) { other[k].classList.add('masked'); continue; }
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
      v.textContent = single ? Fmt.att(best) : Fmt.att(best) + ' ' + (bestS.h >= 0 ? 'H' + Data.heads[bestS.h] : '');
      v.style.color = single ? '' : bestS.color;
    }
  }
  function draw() {
    ctx.clearRect(0, 0, linesW, H);
    const lt = Draw.lineThreshold(series, m, rows, cols, iso);
    Draw.drawLines(ctx, series, m, rows, cols, geo, iso, lineW, lt.minW);
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
      Tip.title(box, Draw.tokLabel(t.rows, r) + '  →  ' + Draw.tokLabel(t.cols, c));
      if (masked(r, c)) { Tip.sub(box, Draw.MASKED_TEXT); return; }
      for (const s of series) {
        const pat = s.h >= 0 ? Data.pattern(spec.li, s.h) : null;
        Tip.row(box, s.name + (pat ? ' · ' + pat : ''), Fmt.att(s.mat[r * m + c]), s.color);
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
    const th = Draw.theme();
    const measure = document.createElement('canvas').getContext('2d');
    measure.font = fs + 'px ' + th.sans;
    const tw = k => measure.measureText(k).width;
    let lw = 0, rw = 0;
    rows.forEach(g => { lw = Math.max(lw, tw(Draw.tokLabel(t.rows, g))); });
    cols.forEach(g => { rw = Math.max(rw, tw(Draw.tokLabel(t.cols, g))); });
    lw = Math.min(240, Math.ceil(lw)) + 12;
    rw = Math.min(240, Math.ceil(rw)) + 12;
    /* the sink strip (attention sinks), left of the query labels as on screen */
    const sk = sinkW ? sinkW + 8 : 0;
    const pad = 20, top = 50, W = pad + sk + lw + linesW + rw + pad, Ht = top + H + pad;
    const p = P(W, Ht);
    p.rect(0, 0, W, Ht, th.bg, 1);
    p.text(pad, 22, title, { size: 14, color: th.ink, weight: 650 });
    let lx = pad + 4;
    series.slice(0, 24).forEach(s => {
      p.rect(lx, 32, 10, 10, s.color, 1);
      p.text(lx + 14, 37, s.name.replace('Head ', 'H'), { size: 11, color: th.muted, baseline: 'middle' });
      lx += 22 + measure.measureText(s.name).width * 0.8;
    });
    const x0 = pad + sk + lw, x1 = x0 + linesW;
    rows.forEach((g, k) => sinkSeries.forEach((s, si) => {
      const w = s.mat.sink[g], y = top + k * rh;
      if (single) p.rect(pad + sinkW - 5 - w * (sinkW - 8), y + rh * 0.3, w * (sinkW - 8), rh * 0.4, s.color, 0.55);
      else p.rect(pad + 3 + si * 6, y + rh - 2 - w * (rh - 4), 5, w * (rh - 4), s.color, 0.7);
    }));
    const g2 = { x0, x1, yL: r => top + r * rh + rh / 2, yR: c => top + c * rh + rh / 2 };
    const lt = Draw.lineThreshold(series, m, rows, cols, iso);
    if (p.vector && lt.drawn <= 15000) {
      p.lines(series, m, rows, cols, g2, iso, lineW, lt.minW);
    } else {
      const raster = document.createElement('canvas');
      const rctx = Draw.sizeCanvasRaw(raster, linesW, H, 2, 60e6);
      Draw.drawLines(rctx, series, m, rows, cols, { x0: 0, x1: linesW, yL: geo.yL, yR: geo.yR }, iso, lineW, lt.minW);
      p.image(raster, x0, top, linesW, H, true);
    }
    const hot = iso;
    rows.forEach((g, k) => {
      const c = Draw.tokSpecial(t.rows, g) ? th.muted : th.ink;
      p.text(x0 - 8, top + k * rh + rh / 2, Draw.tokLabel(t.rows, g), { size: fs, color: c, anchor: 'end', baseline: 'middle', weight: hot && hot.side === 'L' && hot.k === k ? 700 : 400 });
    });
    cols.forEach((g, k) => {
      const c = Draw.tokSpecial(t.cols, g) ? th.muted : th.ink;
      p.text(x1 + 8, top + k * rh + rh / 2, Draw.tokLabel(t.cols, g), { size: fs, color: c, baseline: 'middle', weight: hot && hot.side === 'R' && hot.k === k ? 700 : 400 });
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

/* The view's entry (views.js). c: the render context page.js builds. */
Views.register({
  id: 'head',
  order: 1,
  label: 'Head view',
  uses: { layer: true, mode: true, heads: true, merge: true, contrast: false },
  /* a long input (tiles.js): one head, one query's exact row, fetched by the view */
  picksHead: () => Tiles.on,
  get ownsLayers() { return Tiles.on; },
  draw(host, c) {
    if (Tiles.on) return Tiles.headView(host, c);
    host.textContent = '';
    const ttl = Draw.el('div', 'view-title');
    ttl.appendChild(Draw.el('h2', null, 'Head view · ' + (Data.stacked ? Data.stack.label.toLowerCase() + ' attention, ' : '') + 'layer ' + c.vt.L));
    ttl.appendChild(Draw.el('span', 'sub', (Data.stacked ? 'Left: ' + Draw.stackAxes().rows + ' (queries), right: ' + Draw.stackAxes().cols + ' (keys)' : 'Left: queries, right: keys') +
      '; line opacity = ' + (Data.perLayer ? 'weight' : 'attention weight') + (c.mode === 'heads' && c.hs.length > 1 && !Data.perLayer ? ' ÷ √' + c.hs.length + ' (the heads shown share the ink)' : '') +
      '. Hover a token to isolate its lines, click to pin it.' +
      (Data.hasSinks && c.mode !== 'rollout' && !Data.perLayer ? ' The bars left of the queries: each one\'s share that went to its head\'s sink logit (no key).' : '') +
      (Data.causal ? (Data.stacked ? ' Decoder self-attention is causal: a token attends only to itself and earlier tokens (later keys are masked and dimmed).'
        : ' Causal model: a token attends only to itself and earlier tokens (later keys are masked and dimmed).') : '')));
    host.appendChild(ttl);
    const box = Draw.el('div');
    host.appendChild(box);
    if (!c.hs.length && c.mode !== 'rollout') {
      box.appendChild(Draw.el('div', 'empty', 'No head selected — click a head square above.'));
      return null;
    }
    const ctl = HeadView(box, { li: c.li, mode: c.mode, hs: c.hs, t: c.t, filter: c.filter, pin: c.pin });
    if (c.mode === 'rollout' && Data.L < Data.meta.config.layers) host.appendChild(Draw.el('div', 'hint', 'Rollout runs through the layers in this page only (' + Data.layers.slice(0, c.li + 1).join(', ') + ').'));
    return ctl;
  },
  exportTitle: (m, c) => m + ' · layer ' + c.vt.L + ' · ' + c.vt.headsTxt + c.vt.filt,
  drawHead: (host, s) => HeadView(host, { li: s.li, mode: 'heads', hs: [s.h], t: s.t, filter: s.filter, compact: false }),
});
})();
