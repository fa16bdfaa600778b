/* experts.js — a mixture-of-experts model's routing, over Data.meta.experts
 * (json_out.c's write_experts: the sparse layers, and per layer and token the
 * k chosen experts with their weights, most weight first). Builds, once, an
 * "Experts" strip under the input line's rows (the tokens, the predictions): one row per sparse layer, one column
 * per token (the tokens as the run has them, like the predictions strip);
 * a cell's k bars are its experts in their colors, each as wide as its weight
 * (a family that does not renormalize leaves the rest of the cell empty).
 * Hovering a cell lists its experts. Redrawn when the theme changes. Pages of
 * dense models get none of it. Token text only reaches the canvas and the
 * tooltip as text. */
/* global Data, Draw, Tip, SIGNAL */
/* exported Experts */

const Experts = (() => {
  const x = Data.meta.experts;
  const ok = x && Array.isArray(x.layers) && Array.isArray(x.ids) && Array.isArray(x.weights) && x.ids.length &&
    x.ids.length === x.layers.length && x.weights.length === x.layers.length;
  if (!ok) return { has: false };
  const L = x.layers.length, n = x.ids[0].length, K = x.k;
  const LABEL_W = 34, HEAD_H = 16;
  /* whole canvases stay under the browsers' width limit at any length */
  const CW = Math.max(6, Math.min(40, Math.floor(30000 / Math.max(1, n))));
  const RH = Math.max(5, Math.min(14, Math.floor(280 / L)));
  const W = LABEL_W + n * CW, H = HEAD_H + L * RH;

  const row = Draw.el('div', 'row experts-row');
  row.id = 'experts-row';
  row.appendChild(Draw.el('span', 'tag', 'Experts'));
  const box = Draw.el('div', 'experts-box');
  box.title = '';
  const cv = document.createElement('canvas');
  cv.id = 'experts-canvas';
  cv.setAttribute('role', 'img');
  cv.setAttribute('aria-label', 'The router\'s choice: ' + K + ' of ' + x.num_experts + ' experts per token in each of ' +
    L + ' mixture-of-experts layers');
  /* the geometry, for tests and tools reading the page */
  Object.assign(cv.dataset, { layers: String(L), tokens: String(n), cw: String(CW), rh: String(RH),
    left: String(LABEL_W), top: String(HEAD_H) });
  box.appendChild(cv);
  row.append(box, Draw.el('span', 'meta experts-note', 'top-' + K + ' of ' + x.num_experts + ' · bar width = weight'));
  /* under the input's rows (page.js and predictions.js fill them as this boot runs on) */
  queueMicrotask(() => document.getElementById('input-line').appendChild(row));

  function draw() {
    const th = Draw.theme();
    const ctx = Draw.sizeCanvas(cv, W, H);
    ctx.clearRect(0, 0, W, H);
    ctx.font = '10px ' + (th.sans || 'sans-serif');
    ctx.textBaseline = 'middle';
    ctx.fillStyle = th.muted;
    /* the tokens across the top, where a column is wide enough to say something */
    if (CW >= 14)
      for (let i = 0; i < n; i++) {
        ctx.save();
        ctx.beginPath();
        ctx.rect(LABEL_W + i * CW, 0, CW - 2, HEAD_H);
        ctx.clip();
        ctx.fillText(Data.label(i), LABEL_W + i * CW + 1, HEAD_H / 2);
        ctx.restore();
      }
    for (let r = 0; r < L; r++) {
      const y = HEAD_H + r * RH;
      ctx.fillStyle = th.muted;
      if (RH >= 9) ctx.fillText('L' + x.layers[r], 2, y + RH / 2);
      const ids = x.ids[r], ws = x.weights[r];
      for (let i = 0; i < n; i++) {
        let left = LABEL_W + i * CW + 1;
        const inner = CW - 2;
        for (let k = 0; k < K; k++) {
          const e = ids[i][k], w = ws[i][k];
          if (e < 0 || !(w > 0)) continue;
          const bw = Math.max(1, w * inner);
          ctx.fillStyle = Draw.headColor(e);
          ctx.fillRect(left, y + 1, bw, RH - 2);
          left += bw;
        }
      }
    }
  }

  function at(ev) {
    const b = cv.getBoundingClientRect();
    const i = Math.floor((ev.clientX - b.left - LABEL_W) / CW), r = Math.floor((ev.clientY - b.top - HEAD_H) / RH);
    return i >= 0 && i < n && r >= 0 && r < L ? { i, r } : null;
  }
  cv.addEventListener('mousemove', ev => {
    const p = at(ev);
    if (!p) { Tip.hide(); return; }
    Tip.show(ev.clientX, ev.clientY, t => {
      Tip.title(t, '"' + Data.label(p.i) + '" · token ' + p.i + ' · layer ' + x.layers[p.r]);
      for (let k = 0; k < K; k++) {
        const e = x.ids[p.r][p.i][k];
        if (e >= 0) Tip.row(t, 'expert ' + e, (x.weights[p.r][p.i][k] * 100).toFixed(1) + '%', Draw.headColor(e));
      }
    });
  }, { signal: SIGNAL });
  cv.addEventListener('mouseleave', () => Tip.hide(), { signal: SIGNAL });
  const mo = new MutationObserver(draw);
  mo.observe(document.documentElement, { attributes: true, attributeFilter: ['data-theme'] });
  SIGNAL.addEventListener('abort', () => mo.disconnect());
  draw();
  return { has: true, layers: L, tokens: n, draw };
})();
