/* view_diff.js — attnviz diff pages (meta.diff): every layer × head shaded by
 * its divergence between A and B (Jensen–Shannon, bits, computed by the
 * binary: src/diff.c), and the chosen head's B − A matrix on a diverging
 * blue–neutral–red scale over the merged token axis: aligned tokens once, a
 * token only A has marked "−", one only B has marked "+". Rows of unaligned
 * queries have no counterpart and are shaded out; an unaligned key's column
 * holds −a (A's weight on it) or +b. Needs from data.js: Data.second (B's side
 * and attention), Data.code (A's codes), Data.label. */
/* global Data, Fmt, Draw, Tip, Views */

/* The file's body is one function (not indented): it registers the view
 * and leaves no names behind. */
(() => {

/* The merged axis: [{a, b}] with a (A's index) or b (B's) -1 for a token the
 * other side lacks; in token order on both sides, A's unaligned tokens before
 * B's within a gap. */
function diffAxis() {
  const al = Data.meta.diff.alignment, a2b = al.a_to_b, b2a = al.b_to_a;
  const out = [];
  let i = 0, j = 0;
  while (i < a2b.length || j < b2a.length) {
    if (i < a2b.length && a2b[i] >= 0 && a2b[i] === j) out.push({ a: i++, b: j++ });
    else if (i < a2b.length && a2b[i] < 0) out.push({ a: i++, b: -1 });
    else if (j < b2a.length && b2a[j] < 0) out.push({ a: -1, b: j++ });
    else throw new Error('meta: the alignment is not monotone');
  }
  return out;
}

/* Diverging colors per theme: negative (A attends more), positive (B more). */
function diffColors(th) {
  return th.dark ? { neg: [106, 174, 214], pos: [244, 128, 106] } : { neg: [33, 102, 172], pos: [178, 24, 43] };
}
/* Sequential color of a divergence share s in [0, 1] over the panel color. */
function jsdColor(th, s) {
  const to = th.dark ? [232, 150, 60] : [196, 92, 10], bg = Draw.hexRgb(th.bg);
  const k = Math.max(0, Math.min(1, s));
  return 'rgb(' + bg.map((v, i) => Math.round(v + (to[i] - v) * k)).join(',') + ')';
}

/* Signed code difference (B − A, in 1e-4 units) of merged row r, column c; null
 * when the row has no counterpart. */
function diffCode(ax, li, h, r, c) {
  const R = ax[r], C = ax[c];
  if (R.a < 0 || R.b < 0) return null;
  const nb = Data.second.n;
  const a = C.a >= 0 ? Data.code(li, h, R.a, C.a) : 0;
  const b = C.b >= 0 ? Data.second.done[li][h * nb * nb + R.b * nb + C.b] : 0;
  return b - a;
}

function DiffView(host, spec) {
  const D = Data.meta.diff, ax = diffAxis(), N = ax.length;
  const li = spec.li, h = spec.focus, th = Draw.theme(), col = diffColors(th), bg = Draw.hexRgb(th.bg);
  host.textContent = '';
  const label = k => {
    const t = ax[k];
    if (t.a >= 0 && t.b >= 0) return Data.label(t.a);
    return t.a >= 0 ? '−' + Data.label(t.a) : '+' + Data.second.side.label(t.b);
  };
  const side = k => (ax[k].a >= 0 && ax[k].b >= 0 ? 0 : ax[k].a >= 0 ? -1 : 1);
  const masked = (r, c) => Data.causal && c > r;

  /* ---- title */
  const title = Draw.el('div', 'view-title');
  title.appendChild(Draw.el('h2', null, 'Diff view · ' + (D.mode === 'models' ? 'one text on two models' : 'two texts on one model')));
  const what = D.mode === 'models'
    ? 'A: ' + D.models[0] + ', B: ' + D.models[1] + '. '
    : 'A: “' + diffClip(D.texts[0]) + '”, B: “' + diffClip(D.texts[1]) + '”. ';
  title.appendChild(Draw.el('span', 'sub', what + D.alignment.pairs.length + ' tokens aligned (longest common subsequence of ids), ' +
    D.alignment.only_a.length + ' only in A, ' + D.alignment.only_b.length + ' only in B. The other views show A\'s attention.'));
  host.appendChild(title);

  /* ---- every layer × head, shaded by its divergence */
  const per = D.divergence.per_head;
  let jmax = 0;
  per.forEach(row => row.forEach(v => { if (v > jmax) jmax = v; }));
  const gridBox = Draw.el('div', 'df-gridbox');
  gridBox.appendChild(Draw.el('div', 'df-cap', 'Divergence per head: Jensen–Shannon divergence in bits (0 = the same rows, 1 = disjoint), ' +
    'mean over aligned query rows; shaded up to the largest here (' + fmtJsd(jmax) + '). Click a head to show its B − A matrix.'));
  const grid = Draw.el('div', 'df-grid');
  grid.style.gridTemplateColumns = '36px repeat(' + Data.H + ', minmax(44px, 1fr))';
  grid.appendChild(Draw.el('div', 'lab', ''));
  for (let k = 0; k < Data.H; k++) grid.appendChild(Draw.el('div', 'lab', 'H' + Data.heads[k]));
  for (let l = 0; l < Data.L; l++) {
    grid.appendChild(Draw.el('div', 'lab rowlab', 'L' + Data.layers[l]));
    for (let k = 0; k < Data.H; k++) {
      const v = per[l][k];
      const b = Draw.el('button', 'df-cell', fmtJsd(v));
      b.type = 'button';
      b.dataset.li = l;
      b.dataset.h = k;
      b.dataset.jsd = String(v);
      b.style.background = jsdColor(th, jmax > 0 ? v / jmax : 0);
      b.style.color = jmax > 0 && v / jmax > 0.6 ? (th.dark ? '#111' : '#fff') : th.ink;
      b.title = 'Layer ' + Data.layers[l] + ', head ' + Data.heads[k] + ': JSD ' + v.toFixed(6) + ' bits';
      if (l === li && k === h) b.classList.add('cur');
      grid.appendChild(b);
    }
  }
  grid.addEventListener('click', ev => {
    const b = ev.target.closest('.df-cell');
    if (b && spec.onPick) spec.onPick(+b.dataset.li, +b.dataset.h);
  });
  gridBox.appendChild(grid);
  host.appendChild(gridBox);

  /* ---- the chosen head's B − A */
  const mt = Draw.el('div', 'view-title df-mtitle');
  mt.appendChild(Draw.el('h2', null, 'B − A · layer ' + Data.layers[li] + ', head ' + Data.heads[h] + ' · JSD ' + fmtJsd(per[li][h]) + ' bits'));
  mt.appendChild(Draw.el('span', 'sub', 'Rows: queries, columns: keys, over both inputs\' tokens (−token: only in A, +token: only in B). ' +
    'Red: B attends more, blue: A attends more. A row only one input has is shaded out; an unaligned key\'s column holds ' +
    'the weight its input puts on it (−a or +b).' + (Data.causal ? ' Hatched: masked (a key after its query).' : '')));
  host.appendChild(mt);
  const codes = new Int32Array(N * N), known = new Uint8Array(N * N);
  let vmax = 0;
  for (let r = 0; r < N; r++) for (let c = 0; c < N; c++) {
    const d = masked(r, c) ? null : diffCode(ax, li, h, r, c);
    if (d === null) continue;
    codes[r * N + c] = d;
    known[r * N + c] = 1;
    if (Math.abs(d) > vmax) vmax = Math.abs(d);
  }
  if (vmax < 1) vmax = 1;
  const avail = Math.max(360, Math.min(host.clientWidth - 60, 1400));
  const measure = document.createElement('canvas').getContext('2d');
  const fs = N <= 40 ? 13 : 11;
  measure.font = fs + 'px ' + th.sans;
  let lab = 0;
  for (let k = 0; k < N; k++) lab = Math.max(lab, measure.measureText(label(k)).width);
  let labW = Math.min(150, Math.ceil(lab)) + 12, labH = labW;
  let cell = Math.max(1, Math.min(34, Math.floor((avail - labW) / Math.max(N, 1))));
  const showLabels = cell >= 9;
  if (!showLabels) { labW = 44; labH = 26; }
  const g = cell * N, W = labW + g + 8, Ht = labH + g + 8;
  const wrap = Draw.el('div', 'mx-wrap');
  const stackEl = Draw.el('div');
  stackEl.style.position = 'relative';
  const cv = Draw.el('canvas'), ov = Draw.el('canvas');
  ov.style.position = 'absolute';
  ov.style.left = '0';
  ov.style.top = '0';
  ov.className = 'df-overlay';
  stackEl.append(cv, ov);
  wrap.appendChild(stackEl);
  const legend = Draw.el('div', 'mx-legend');
  const lg = Draw.el('canvas');
  legend.append(Draw.el('span', null, '−' + Fmt.fixed(vmax, 4) + ' (A more)'), lg, Draw.el('span', null, '+' + Fmt.fixed(vmax, 4) + ' (B more)'));
  const un = Draw.el('span', 'mx-masked');
  const unSw = Draw.el('span', 'df-sw-unaligned');
  un.append(unSw, document.createTextNode('query only in one input'));
  legend.appendChild(un);
  if (Data.causal) {
    const ms = Draw.el('span', 'mx-masked');
    ms.append(Draw.el('span', 'sw-masked'), document.createTextNode('masked'));
    legend.appendChild(ms);
  }
  wrap.appendChild(legend);
  host.appendChild(wrap);

  /* rows with no counterpart: the muted ink faintly over the panel (the masked color is too close to it in the dark theme) */
  const mu = Draw.hexRgb(th.muted), offRgb = bg.map((v, i) => Math.round(v + (mu[i] - v) * (th.dark ? 0.3 : 0.18)));
  unSw.style.background = 'rgb(' + offRgb.join(',') + ')';
  const rgbOf = d => {
    const t = Math.min(1, Math.abs(d) / vmax), to = d >= 0 ? col.pos : col.neg;
    return [0, 1, 2].map(i => Math.round(bg[i] + (to[i] - bg[i]) * t));
  };
  const heat = document.createElement('canvas');
  heat.width = heat.height = Math.max(1, N);
  {
    const hx = heat.getContext('2d'), img = hx.createImageData(Math.max(1, N), Math.max(1, N)), px = img.data;
    const off = offRgb;
    for (let i = 0; i < N * N; i++) {
      const c3 = known[i] ? rgbOf(codes[i]) : off;
      px[i * 4] = c3[0]; px[i * 4 + 1] = c3[1]; px[i * 4 + 2] = c3[2]; px[i * 4 + 3] = 255;
    }
    hx.putImageData(img, 0, 0);
  }
  const sideColor = s => (s < 0 ? 'rgb(' + col.neg.join(',') + ')' : s > 0 ? 'rgb(' + col.pos.join(',') + ')' : th.ink);
  function paintAll(p, ox, oy) {
    p.image(heat, ox + labW, oy + labH, g, g, false);
    if (Data.causal) {
      const rects = [];
      for (let r = 0; r + 1 < N; r++) rects.push([ox + labW + (r + 1) * cell, oy + labH + r * cell, (N - r - 1) * cell, cell]);
      if (rects.length) p.hatch(rects, th.maskBg, th.maskLine);
    }
    if (showLabels) {
      for (let k = 0; k < N; k++) {
        const o = { size: fs, color: sideColor(side(k)), weight: side(k) ? 650 : 400 };
        p.text(ox + labW - 6, oy + labH + k * cell + cell / 2, label(k), Object.assign({ anchor: 'end', baseline: 'middle' }, o));
        p.text(ox + labW + k * cell + cell / 2, oy + labH - 6, label(k), Object.assign({ baseline: 'middle', rotate: -90 }, o));
      }
    } else {
      const step = Math.ceil(40 / cell) * 2;
      for (let k = 0; k < N; k += step) {
        p.text(ox + labW - 6, oy + labH + k * cell + cell / 2, String(k), { size: 10, color: th.muted, anchor: 'end', baseline: 'middle' });
        p.text(ox + labW + k * cell + cell / 2, oy + labH - 8, String(k), { size: 10, color: th.muted, anchor: 'middle', baseline: 'middle' });
      }
    }
  }
  const ctx = Draw.sizeCanvas(cv, W, Ht, 30e6), octx = Draw.sizeCanvas(ov, W, Ht, 30e6);
  ctx.fillStyle = th.bg;
  ctx.fillRect(0, 0, W, Ht);
  const screen = {
    image(src, x, y, w, hh) { ctx.imageSmoothingEnabled = false; ctx.drawImage(src, x, y, w, hh); ctx.imageSmoothingEnabled = true; },
    text(x, y, s, o) {
      ctx.save();
      ctx.font = (o.weight || 400) + ' ' + (o.size || 12) + 'px ' + th.sans;
      ctx.fillStyle = o.color;
      ctx.textAlign = o.anchor === 'end' ? 'right' : o.anchor === 'middle' ? 'center' : 'left';
      ctx.textBaseline = 'middle';
      ctx.translate(x, y);
      if (o.rotate) ctx.rotate((o.rotate * Math.PI) / 180);
      ctx.fillText(s, 0, 0);
      ctx.restore();
    },
    hatch(rects, fill, line) {
      ctx.save();
      ctx.beginPath();
      for (const [x, y, w, hh] of rects) ctx.rect(x, y, w, hh);
      ctx.fillStyle = fill;
      ctx.fill();
      ctx.clip();
      ctx.beginPath();
      for (let x = labW - g; x < labW + g; x += 6) { ctx.moveTo(x, labH + g); ctx.lineTo(x + g, labH); }
      ctx.strokeStyle = line;
      ctx.lineWidth = 1;
      ctx.stroke();
      ctx.restore();
    },
  };
  paintAll(screen, 0, 0);
  const lctx = Draw.sizeCanvas(lg, 160, 10);
  for (let x = 0; x < 160; x++) {
    const c3 = rgbOf(((x - 79.5) / 79.5) * vmax);
    lctx.fillStyle = 'rgb(' + c3.join(',') + ')';
    lctx.fillRect(x, 0, 1, 10);
  }
  Object.assign(ov.dataset, { labw: labW, labh: labH, cell, n: N });
  const nb = Data.second.n;
  Draw.heatHover(ov, octx, { x0: labW, y0: labH, cell, rows: N, cols: N, w: W, h: Ht }, th.ink, (box, r, c) => {
    const R = ax[r], C = ax[c];
    Tip.title(box, label(r) + '  →  ' + label(c));
    if (masked(r, c)) Tip.sub(box, Draw.MASKED_TEXT);
    else if (!known[r * N + c]) Tip.sub(box, 'query only in ' + (R.a >= 0 ? 'A' : 'B') + ': no row of the other input to compare');
    else {
      const a = C.a >= 0 ? Data.code(li, h, R.a, C.a) : null;
      const b = C.b >= 0 ? Data.second.done[li][h * nb * nb + R.b * nb + C.b] : null;
      Tip.row(box, 'A', a === null ? 'no such key' : Fmt.fixed(a, 4));
      Tip.row(box, 'B', b === null ? 'no such key' : Fmt.fixed(b, 4));
      const d = codes[r * N + c];
      const dv = Draw.el('div', 'tt-row');
      dv.append(Draw.el('span', 'k', 'B − A'), Draw.el('span', 'tt-val df-delta', (d > 0 ? '+' : '') + Fmt.fixed(d, 4)));
      box.appendChild(dv);
    }
    Tip.sub(box, (R.a >= 0 ? 'A query ' + R.a : 'no A query') + ', ' + (C.a >= 0 ? 'key ' + C.a : 'no A key') + ' · ' +
      (R.b >= 0 ? 'B query ' + R.b : 'no B query') + ', ' + (C.b >= 0 ? 'key ' + C.b : 'no B key'));
  });

  function exportScene(P, ttl) {
    const pad = 20, top = 40;
    const p = P(W + 2 * pad, Ht + top + pad);
    p.rect(0, 0, W + 2 * pad, Ht + top + pad, th.bg, 1);
    p.text(pad, 22, ttl, { size: 14, color: th.ink, weight: 650 });
    paintAll(p, pad, top);
    return p;
  }
  /* the matrix as shown (B − A codes, null off the compared cells), for scripts and tests */
  function values() {
    const out = [];
    for (let r = 0; r < N; r++) {
      const row = [];
      for (let c = 0; c < N; c++) row.push(known[r * N + c] ? codes[r * N + c] / 10000 : null);
      out.push(row);
    }
    return { axis: ax, delta: out };
  }
  return { exportScene, values };
}

/* a text cut to 80 code points for a title line */
function diffClip(t) { const cps = Array.from(t); return cps.length > 80 ? cps.slice(0, 79).join('') + '…' : t; }
function fmtJsd(v) { return v >= 0.001 || v === 0 ? v.toFixed(3) : v.toExponential(1); }

/* The view's entry (views.js; on diff pages only: diffOnly). The layer control
 * and head chips choose the head whose B − A is drawn (so do the grid's cells). */
Views.register({
  id: 'diff',
  order: 5,
  label: 'Diff view',
  diffOnly: true,
  uses: { layer: true, mode: false, heads: true, merge: false, contrast: false },
  picksHead: () => true,
  mergeNote: 'the diff view shows every token',
  unavailable: () => (Data.second ? null : 'Only on pages written by attnviz diff'),
  draw(host, c) {
    const go = () => DiffView(host, { li: c.li, focus: c.focus, onPick: c.onPick });
    return Data.second.done[c.li] ? go() : Data.second.attention(c.li).then(() => (c.stale() ? null : go()));
  },
  exportTitle: (m, c) => m + ' · B − A · layer ' + c.vt.L + ' · head ' + Data.heads[c.focus],
});
})();
