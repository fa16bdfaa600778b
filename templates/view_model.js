/* view_model.js — the model view: a thumbnail of every layer x head (lines
 * for short inputs, max-pooled heat maps for long ones), drawn layer by layer
 * as the layers decode; a click opens one head large. Needs from data.js:
 * Data.attention (every layer, in the background), Data.headMatrix, Tok
 * (derive, filterIdx, masked), Data.pattern. A live page reads the server's
 * thumbnails instead (Data.thumbs: every head at once, pooled to s x s): at
 * s = n they are the attention itself and draw as above; past that they are
 * drawn as they come (bin means), without the token toggles. */
/* global Data, Tok, Draw, Views, Tiles */

/* The file's body is one function (not indented): it registers the view
 * and leaves no names behind. */
(() => {

/* ---------------------------------------------------------------- model view */

/* Grid of every layer x head. spec {t, filter, gamma, cur:{li,h}, onOpen(li,h)}. */
function ModelView(host, spec) {
  const { t } = spec;
  /* ALTI or rollout (--measure alti|rollout): one matrix per layer, every head's together: one column */
  const NH = Data.perLayer ? 1 : Data.H;
  const colName = h => (Data.perLayer ? (Data.measure === 'alti' ? 'ALTI' : 'Rollout') : 'H' + Data.heads[h]);
  const colColor = h => (Data.perLayer ? Draw.aggColor() : Draw.headColor(Data.heads[h]));
  const m = t.mc; /* row stride of the derived matrices */
  const { rows, cols } = Tok.filterIdx(t, spec.filter);
  host.textContent = '';
  /* grid: 36px labels + H columns of S + 8 (thumb padding and border), 6px gaps */
  const avail = Math.max(480, host.clientWidth - 42);
  const S = Math.max(56, Math.min(128, Math.floor((avail - 42 - 6 * (NH - 1)) / NH) - 8));
  /* live: the server's thumbnails are s x s, s = min(n, THUMB_S) (its answer says which), the
   * attention itself when s = n */
  const THUMB_S = 64;
  let ts = Data.live ? Math.min(Data.n, THUMB_S) : Tiles.offline ? Tiles.grid(0) : Data.n;
  let pooled = ts < Data.n;
  const title = Draw.el('div', 'view-title');
  const ax = Data.stacked ? Draw.stackAxes() : null;
  title.appendChild(Draw.el('h2', null, 'Model view' + (ax ? ' · ' + Data.stack.label.toLowerCase() + ' attention' : '')));
  const lineThumbs = Math.max(rows.length, cols.length) <= 40 && !pooled;
  const axes = ax ? (lineThumbs ? 'left: ' + ax.rows + ', right: ' + ax.cols : 'rows = ' + ax.rows + ', columns = ' + ax.cols)
    : 'rows = queries, columns = keys';
  const sub = Draw.el('span', 'sub');
  const describe = () => { sub.textContent = (Data.perLayer ? 'Every layer, all heads together' : 'Every layer × head') + (lineThumbs ? ' (lines, opacity = weight' + (ax ? '; ' + axes : '') + ')'
    : pooled ? ' (heat maps of the ' + Data.n.toLocaleString('en-US') + ' tokens reduced to ' + ts + ' × ' + ts +
      (Tiles.offline ? ' cells: a cell\'s largest weight' : ' bins: a bin\'s mean attention') + ', each map scaled to its own largest value; ' + axes + '; the token toggles and the sentence filter do not apply here)'
      : ' (heat maps, max-pooled, each scaled to its own largest weight; ' + axes + ')') + '. Click a thumbnail to open it large.' +
    (Data.causal ? (lineThumbs ? ' Causal ' + (ax ? 'decoder self-attention' : 'model') + ': no line goes to a later token.'
      : ' Causal ' + (ax ? 'decoder self-attention' : 'model') + ': the masked upper triangle is grey.') : '');
  };
  describe();
  title.appendChild(sub);
  host.appendChild(title);
  const grid = Draw.el('div', 'mv');
  /* a per-layer measure: the layers side by side, wrapped, each thumbnail captioned with its layer */
  const wrapK = Data.perLayer ? Math.max(1, Math.min(Data.L, Math.floor((avail + 6) / (S + 8 + 6)))) : 0;
  grid.style.gridTemplateColumns = wrapK ? 'repeat(' + wrapK + ', ' + (S + 8) + 'px)' : '36px repeat(' + NH + ', ' + (S + 8) + 'px)';
  if (!wrapK) grid.appendChild(Draw.el('div', 'lab', ''));
  for (let h = 0; h < NH && !wrapK; h++) {
    const lab = Draw.el('div', 'lab', colName(h));
    lab.style.color = colColor(h);
    grid.appendChild(lab);
  }
  const cells = [];
  for (let li = 0; li < Data.L; li++) {
    if (!wrapK) grid.appendChild(Draw.el('div', 'lab rowlab', 'L' + Data.layers[li]));
    cells.push([]);
    for (let h = 0; h < NH; h++) {
      const b = Draw.el('button', 'thumb');
      b.type = 'button';
      b.dataset.li = li;
      b.dataset.h = h;
      b.style.setProperty('--c', colColor(h));
      const pat = Data.perLayer ? null : Data.pattern(li, h);
      b.title = 'Layer ' + Data.layers[li] + (Data.perLayer ? ', ' + colName(h) + ' through it' : ', head ' + Data.heads[h]) + (pat ? ' — ' + pat : '');
      b.setAttribute('aria-label', b.title);
      const cv = Draw.el('canvas');
      Draw.sizeCanvas(cv, S, S);
      b.appendChild(cv);
      if (pat) b.appendChild(Draw.el('span', 'cap', pat));
      if (wrapK) b.appendChild(Draw.el('span', 'cap', 'L' + Data.layers[li]));
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
  const th = Draw.theme();
  const bgRgb = Draw.hexRgb(th.bg);
  const maskRgb = Data.causal ? Draw.hexRgb(th.maskBg) : null;
  const rect = !Data.stack.square;
  /* live, s < n: bins; a bin pair is masked when every key of the column
   * bin comes after every query of the row bin (token t is in bin floor(t*s/n)) */
  function drawPooled(ctx, blk, s, color) {
    let mx = 0;
    for (let i = 0; i < blk.length; i++) if (blk[i] > mx) mx = blk[i];
    const first = b => Math.ceil((b * Data.n) / s), idx = Array.from({ length: s }, (_, i) => i);
    const binMasked = (r, c) => first(c) > first(r + 1) - 1;
    const hc = Draw.heatCanvas(blk, s, idx, idx, Draw.colorRgb(color), bgRgb, spec.gamma, mx || 1, maskRgb, binMasked);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(hc, 0, 0, S, S);
  }
  function drawLayer(li, thumbs) {
    for (let h = 0; h < NH; h++) {
      const cv = cells[li][h];
      const ctx = cv.getContext('2d');
      ctx.clearRect(0, 0, S, S);
      const color = colColor(h);
      if (pooled) { drawPooled(ctx, thumbs.block(li, h), thumbs.s, color); continue; }
      const mat = Tok.derive(thumbs ? thumbs.block(li, h) : Data.headMatrix(li, h), t);
      if (lineThumbs) {
        const nmax = Math.max(rows.length, cols.length, 2);
        const step = (S - 8) / nmax;
        const g = { x0: S * 0.2, x1: S * 0.8, yL: r => 4 + (r + 0.5) * step, yR: c => 4 + (c + 0.5) * step };
        ctx.fillStyle = th.muted;
        ctx.globalAlpha = 0.55;
        for (let r = 0; r < rows.length; r++) ctx.fillRect(g.x0 - 9, g.yL(r) - 0.75, 7, 1.5);
        for (let c = 0; c < cols.length; c++) ctx.fillRect(g.x1 + 2, g.yR(c) - 0.75, 7, 1.5);
        ctx.globalAlpha = 1;
        Draw.drawLines(ctx, [{ mat, color }], m, rows, cols, g, null, 1.2);
      } else {
        const hc = Draw.heatThumb(mat, m, rows, cols, Draw.colorRgb(color), bgRgb, spec.gamma, S * Draw.dpr() | 0, maskRgb,
          Tok.maskFor(t, li), rect);
        ctx.imageSmoothingEnabled = hc.width < S;
        ctx.imageSmoothingEnabled = false;
        /* a rectangular stack (cross attention) keeps its shape, centered */
        const k = rect ? S / Math.max(rows.length, cols.length, 1) : 0;
        const dw = rect ? cols.length * k : S, dh = rect ? rows.length * k : S;
        ctx.drawImage(hc, (S - dw) / 2, (S - dh) / 2, dw, dh);
      }
    }
  }
  let cancelled = false;
  (async () => {
    const thumbs = Data.live ? await Data.thumbs() : Tiles.offline ? await Tiles.thumbs() : null;
    if (thumbs && thumbs.s !== ts) {
      ts = thumbs.s;
      pooled = !thumbs.exact;
      describe();
    }
    for (let li = 0; li < Data.L && !cancelled; li++) {
      if (!thumbs) await Data.attention(li);
      if (cancelled || !host.isConnected) return;
      drawLayer(li, thumbs);
      await new Promise(r => setTimeout(r, 0));
    }
    if (!cancelled) host.dataset.drawn = '1';
  })().catch(err => {
    if (cancelled || !host.isConnected) return;
    console.error(err);
    grid.replaceWith(Draw.el('div', 'empty', 'Could not draw the thumbnails: ' + (err && err.message ? err.message : String(err))));
  });

  function exportScene(P, ttl) {
    const pad = 20, top = 46, lab = 36, cap = Data.meta.head_patterns ? 14 : 0;
    const cw = S + 8, chh = S + 8 + cap;
    const W = pad + lab + NH * cw + pad, Ht = top + 18 + Data.L * chh + pad;
    const p = P(W, Ht);
    p.rect(0, 0, W, Ht, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    for (let h = 0; h < NH; h++)
      p.text(pad + lab + h * cw + cw / 2, top + 6, colName(h), { size: 11, color: colColor(h), anchor: 'middle', baseline: 'middle', weight: 600 });
    for (let li = 0; li < Data.L; li++) {
      const y = top + 18 + li * chh;
      p.text(pad + lab - 6, y + S / 2, 'L' + Data.layers[li], { size: 11, color: th.muted, anchor: 'end', baseline: 'middle', weight: 600 });
      for (let h = 0; h < NH; h++) {
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


/* The view's entry (views.js). Draws every layer itself as it decodes,
 * so page.js neither waits for a layer nor runs the rollout first
 * (ownsLayers); the controller's cancel() stops that when the page redraws. */
Views.register({
  id: 'model',
  order: 2,
  label: 'Model view',
  uses: { layer: false, mode: false, heads: false, merge: true, contrast: true },
  ownsLayers: true,
  picksHead: () => false,
  draw(host, c) {
    return ModelView(host, { t: c.t, filter: c.filter, gamma: c.gamma, cur: { li: c.li, h: c.focus }, onOpen: c.onOpen });
  },
  exportTitle: (m, c) => m + ' · model view · "' + c.vt.input + '"',
});
})();
