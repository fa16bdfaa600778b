// causal.test.mjs — the page for a causal (decoder, GPT-2-shaped) model with
// byte-level BPE tokens, from the synthetic tests/browser/page_fixture.c --causal:
// lower-triangular attention (softmax over keys j <= i), vocab spellings like
// "Ġflies" and "Ċ", "<|endoftext|>" and an injection attempt
// "Ġ<img src=x onerror=alert(1)>". Numbers are checked against the JSON
// written alongside; display text against an independent decoding here.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fixturePage, launch, openPage, settle, fmt4, clean, closeAll, clickAndRender } from './lib.mjs';

let browser;
const pages = {};
before(async () => {
  pages.causal = fixturePage('causal', ['--causal', '--n', '22', '--layers', '3', '--heads', '4', '--dh', '16']);
  pages.bert = fixturePage('bert-small', ['--n', '9', '--layers', '2', '--heads', '3', '--dh', '8']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function open(name, opts) {
  const r = await openPage(browser.ctx, pages[name].html, opts);
  r.data = pages[name].data();
  /* pixel reads through a scratch canvas, so the page's own canvases are never
   * read back (repeated getImageData makes Chromium log a warning) */
  await r.page.evaluate(() => {
    window.__pixels = (cv, x, y, w, h) => {
      const tmp = document.createElement('canvas');
      tmp.width = w;
      tmp.height = h;
      const ctx = tmp.getContext('2d', { willReadFrequently: true });
      ctx.drawImage(cv, x, y, w, h, 0, 0, w, h);
      return ctx.getImageData(0, 0, w, h).data;
    };
  });
  return r;
}
const vTexts = (page, side) => page.$$eval('.hv-' + (side === 'R' ? 'right' : 'left') + ' .tok .v', els => els.map(e => e.textContent));
const tokTexts = (page, side) => page.$$eval('.hv-' + (side === 'R' ? 'right' : 'left') + ' .tok .t', els => els.map(e => e.textContent));
const maskedKs = (page, side) => page.$$eval('.hv-' + (side === 'R' ? 'right' : 'left') + ' .tok.masked', els => els.map(e => +e.dataset.k));
const range = n => Array.from({ length: n }, (_, i) => i);

/* Byte-level BPE decoding of the fixture's spellings (Ġ space, Ċ newline) and
 * how the page is meant to show it: a leading space stays a space;
 * whitespace-only tokens and newlines become glyphs. */
const decode = t => t.replace(/Ġ/g, ' ').replace(/Ċ/g, '\n');
const shown = s => (/^\s+$/.test(s) ? s.replace(/ /g, '␣').replace(/\n/g, '↵') : s.replace(/\n/g, '↵'));
const SPECIAL = t => t === '<|endoftext|>';
/* Words: a piece starts one when it is first, special, follows a special, or
 * its text starts with / follows whitespace. */
function bpeWords(tokens, hide = false) {
  const groups = [];
  tokens.forEach((t, i) => {
    const d = decode(t), prev = i ? decode(tokens[i - 1]) : '';
    const start = i === 0 || SPECIAL(t) || SPECIAL(tokens[i - 1]) || /^\s/.test(d) || /\s$/.test(prev);
    if (start) groups.push({ text: d, m: [i], special: SPECIAL(t) });
    else { groups[groups.length - 1].text += d; groups[groups.length - 1].m.push(i); }
  });
  return groups.filter(g => !(hide && g.special)).map(g => ({ ...g, label: shown(g.text) }));
}

describe('causal page', () => {
  test('header says causal; tokens show as read (spaces, not Ġ), vocab spellings in titles; input shown literally', async () => {
    const { page, log, data } = await open('causal');
    try {
      assert.ok(await page.isVisible('#model-causal'));
      assert.equal(await page.textContent('#model-causal'), 'causal (decoder) model');
      assert.equal(await page.evaluate(() => window.attnviz.meta.config.causal), true);
      const want = data.tokens.map(t => shown(decode(t)));
      assert.deepEqual(await tokTexts(page, 'L'), want);
      assert.deepEqual(await tokTexts(page, 'R'), want);
      for (const w of [' flies', '↵', '␣␣', '<|endoftext|>', ' <img src=x onerror=alert(1)>']) assert.ok(want.includes(w), w);
      const body = await page.evaluate(() => document.body.innerText);
      assert.ok(!/[ĠĊ]/.test(body), 'no Ġ or Ċ on the page');
      const titles = await page.$$eval('.hv-right .tok', els => els.map(e => e.title));
      data.tokens.forEach((t, i) => assert.ok(titles[i].startsWith('vocab: ' + t + '\n'), titles[i]));
      /* the injection attempt is text: in the tokens, the input line, never an element */
      assert.match(await page.textContent('#input-line'), /<img src=x onerror=alert\(1\)>/);
      assert.equal(await page.$$eval('img', els => els.length), 0);
      assert.equal(await page.$$eval('script', els => els.filter(e => !e.type || e.type === 'text/javascript').length), 1);
      /* toggles name this model's special token and pieces; a decoder's toggle is the sink's */
      assert.match(await page.textContent('#hide-special-label'), /Hide sink \(<\|endoftext\|>\)/);
      assert.match(await page.textContent('#merge-pieces-label'), /Merge word pieces/);
      assert.match(await page.textContent('#input-line'), /22 \(2 special\)/);
      clean(log);
    } finally { await page.close(); }
    const b = await open('bert');
    try {
      assert.ok(await b.page.isHidden('#model-causal'));
      assert.equal(await b.page.evaluate(() => window.attnviz.meta.config.causal), false);
      assert.match(await b.page.textContent('#hide-special-label'), /Hide \[CLS\]\/\[SEP\]/);
      assert.match(await b.page.textContent('#merge-pieces-label'), /Merge ## pieces/);
      assert.deepEqual(await tokTexts(b.page, 'L'), b.data.tokens);
      clean(b.log);
    } finally { await b.page.close(); }
  });

  test('head view: no line, bar or value to a masked key; masked tokens dimmed; pinned tooltip says masked', async () => {
    const { page, log, data } = await open('causal');
    try {
      const A = data.attention[0], n = data.tokens.length, qi = 5, kj = 8;
      await page.hover('.hv-left .tok[data-k="' + qi + '"]');
      await settle(page);
      /* one line per head and visible key with weight >= 0.0015 */
      const lines = A.reduce((s, hh) => s + hh[qi].filter(w => w >= 0.0015).length, 0);
      assert.equal(await page.$eval('#view-head .hv', e => +e.dataset.lines), lines);
      const vals = await vTexts(page, 'R');
      closeAll(vals.slice(0, qi + 1), range(qi + 1).map(j => Math.max(...A.map(hh => hh[qi][j]))), 0.5e-4 + 2e-6, 'max over heads');
      assert.deepEqual(vals.slice(qi + 1), new Array(n - qi - 1).fill(''), 'no value for a masked key');
      assert.deepEqual(await maskedKs(page, 'R'), range(n).slice(qi + 1));
      /* pixels: the line canvas's right edge and the key strip are empty at masked keys */
      const px = await page.evaluate(() => {
        const hv = document.querySelector('#view-head .hv');
        const lines = hv.querySelector('.hv-lines'), strip = hv.lastElementChild;
        const rh = hv.querySelector('.hv-right .tok').getBoundingClientRect().height;
        const alpha = (cv, x0, x1, y0, y1) => {
          const d = window.__pixels(cv, x0, y0, x1 - x0, y1 - y0);
          let s = 0;
          for (let i = 3; i < d.length; i += 4) s += d[i];
          return s;
        };
        const n = hv.querySelectorAll('.hv-right .tok').length;
        return Array.from({ length: n }, (_, k) => ({
          line: alpha(lines, lines.width - 3, lines.width, Math.round(k * rh + 2), Math.round((k + 1) * rh - 2)),
          strip: alpha(strip, 0, strip.width, Math.round(k * rh), Math.round((k + 1) * rh)),
        }));
      });
      const strongest = range(qi + 1).reduce((b, j) => (Math.max(...A.map(hh => hh[qi][j])) > Math.max(...A.map(hh => hh[qi][b])) ? j : b), 0);
      assert.ok(px[strongest].line > 0 && px[strongest].strip > 0, 'the strongest key has its line and bars');
      for (let j = qi + 1; j < n; j++) assert.deepEqual(px[j], { line: 0, strip: 0 }, 'masked key ' + j);
      /* from the key side: queries before the key cannot see it */
      await page.hover('.hv-right .tok[data-k="' + kj + '"]');
      await settle(page);
      const lv = await vTexts(page, 'L');
      assert.deepEqual(lv.slice(0, kj), new Array(kj).fill(''));
      closeAll(lv.slice(kj), range(n).slice(kj).map(i => Math.max(...A.map(hh => hh[i][kj]))), 0.5e-4 + 2e-6, 'into key ' + kj);
      assert.deepEqual(await maskedKs(page, 'L'), range(kj));
      /* pinned query, hovering a masked key: the tooltip says masked, no per-head values */
      await page.click('.hv-left .tok[data-k="3"]');
      await page.hover('.hv-right .tok[data-k="10"]');
      await settle(page);
      assert.match(await page.textContent('#tooltip'), /masked/);
      assert.equal(await page.$$eval('#tooltip .tt-row', els => els.length), 0);
      await page.hover('.hv-right .tok[data-k="2"]');
      await settle(page);
      assert.equal(await page.$$eval('#tooltip .tt-row', els => els.length), 4);
      await page.keyboard.press('Escape');
      clean(log);
    } finally { await page.close(); }
  });

  test('neuron view: lists only the keys up to the query; their softmax is the captured attention', async () => {
    const { page, log, data } = await open('causal');
    try {
      await clickAndRender(page, '#tab-neuron');
      const n = data.tokens.length, d = data.queries[0][0][0].length;
      for (const qi of [0, 4, 13, n - 1]) {
        await page.hover('#view-neuron .nv-queries .tok[data-pos="' + qi + '"]');
        await settle(page);
        assert.equal(await page.$eval('#view-neuron', e => e.dataset.query), String(qi));
        assert.deepEqual(await page.$$eval('#view-neuron .nv-row', els => els.map(e => +e.dataset.pos)), range(qi + 1), 'keys of query ' + qi);
        const sm = await page.$$eval('#view-neuron .nv-row .val', els => els.map(e => e.textContent));
        closeAll(sm, data.attention[0][0][qi].slice(0, qi + 1), 0.5e-4 + 2e-6, 'softmax of query ' + qi);
        /* the softmax of q.k/sqrt(d) over the visible keys alone gives the captured weights */
        const q = data.queries[0][0][qi], K = data.keys[0][0];
        const sc = range(qi + 1).map(j => K[j].reduce((s, kv, x) => s + q[x] * kv, 0) / Math.sqrt(d));
        const mx = Math.max(...sc), ex = sc.map(v => Math.exp(v - mx)), z = ex.reduce((a, b) => a + b, 0);
        closeAll(sm, ex.map(v => v / z), 1.5e-4, 'softmax over visible keys');
        const note = await page.$eval('#view-neuron .nv-masked', e => (e.hidden ? '' : e.textContent));
        if (qi < n - 1) assert.match(note, new RegExp('^' + (n - 1 - qi) + ' later keys? (is|are) masked'));
        else assert.equal(note, '');
        const cvH = await page.$eval('#view-neuron .nv-canvas', e => e.getBoundingClientRect().height);
        const rh = await page.$eval('#view-neuron .nv-canvas', e => +e.dataset.rh);
        assert.equal(Math.round(cvH), (qi + 1) * rh);
      }
      /* hiding <|endoftext|> drops it from the keys too */
      await page.check('#hide-special');
      await settle(page);
      await page.hover('#view-neuron .nv-queries .tok[data-pos="6"]');
      await settle(page);
      assert.deepEqual(await page.$$eval('#view-neuron .nv-row', els => els.map(e => +e.dataset.pos)), [1, 2, 3, 4, 5, 6]);
      /* cell tooltip on a key row: the key's text as read, its position */
      const geo = await page.$eval('#view-neuron .nv-canvas', e => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, cw: +e.dataset.cw, rh: +e.dataset.rh }; });
      await page.mouse.move(geo.x + geo.cw / 2, geo.y + 2 * geo.rh + geo.rh / 2);
      await settle(page);
      assert.match(await page.textContent('#tooltip .tt-title'), /key " like" \(3\)/);
      clean(log);
    } finally { await page.close(); }
  });

  test('matrix view: the masked upper triangle is hatched, distinct from small computed weights; tooltip and SVG say masked', async () => {
    const { page, log, data } = await open('causal');
    try {
      await clickAndRender(page, '#tab-matrix');
      const A = data.attention[0][0], n = data.tokens.length;
      const geo = await page.$eval('#view-matrix canvas[data-cell]', e => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, cell: +e.dataset.cell, lw: +e.dataset.labw, lh: +e.dataset.labh }; });
      assert.ok(geo.cell >= 9);
      /* the smallest computed weight, below the diagonal */
      let small = [1, 0];
      for (let r = 0; r < n; r++) for (let c = 0; c <= r; c++) if (A[r][c] < A[small[0]][small[1]]) small = [r, c];
      assert.ok(A[small[0]][small[1]] < 0.01, 'fixture has a near-zero computed weight');
      const cellPx = (r, c) => page.evaluate(([r_, c_, g]) => {
        const cv = document.querySelector('#view-matrix canvas[data-cell]').previousElementSibling;
        const d = window.__pixels(cv, g.lw + c_ * g.cell + 1, g.lh + r_ * g.cell + 1, g.cell - 2, g.cell - 2);
        const out = [];
        for (let i = 0; i < d.length; i += 4) out.push([d[i], d[i + 1], d[i + 2]]);
        const css = v => getComputedStyle(document.documentElement).getPropertyValue(v).trim();
        return { px: out, maskBg: css('--masked-bg'), maskLine: css('--masked-line'), bg: css('--panel') };
      }, [r, c, geo]);
      const rgb = h => [1, 3, 5].map(i => parseInt(h.slice(i, i + 2), 16));
      const dist = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
      /* distance of p from the segment between colors a and b (hatch lines are antialiased) */
      const segDist = (p, a, b) => {
        const ab = [0, 1, 2].map(i => b[i] - a[i]), ap = [0, 1, 2].map(i => p[i] - a[i]);
        const t = Math.max(0, Math.min(1, (ab[0] * ap[0] + ab[1] * ap[1] + ab[2] * ap[2]) / (ab[0] ** 2 + ab[1] ** 2 + ab[2] ** 2)));
        return dist(p, [0, 1, 2].map(i => a[i] + t * ab[i]));
      };
      for (const [r, c] of [[0, 1], [2, 9], [n - 2, n - 1], [5, 20]]) {
        const m = await cellPx(r, c);
        const bgM = rgb(m.maskBg), ln = rgb(m.maskLine);
        assert.ok(m.px.every(p => segDist(p, bgM, ln) < 8), `masked cell ${r},${c} holds only hatch colors`);
        assert.ok(m.px.some(p => dist(p, ln) < 30) && m.px.some(p => dist(p, bgM) < 8), `masked cell ${r},${c} is hatched`);
      }
      const z = await cellPx(small[0], small[1]);
      const first = z.px[0];
      assert.ok(z.px.every(p => dist(p, first) < 2), 'a computed cell is one flat color');
      assert.ok(dist(first, rgb(z.bg)) < 12, 'a near-zero weight is (almost) the background');
      assert.ok(dist(first, rgb(z.maskBg)) > 15, 'and differs from the masked color');
      /* tooltips */
      const hoverCell = async (r, c) => {
        await page.mouse.move(geo.x + geo.lw + c * geo.cell + geo.cell / 2, geo.y + geo.lh + r * geo.cell + geo.cell / 2);
        await settle(page);
      };
      await hoverCell(3, 7);
      assert.match(await page.textContent('#tooltip'), /masked/);
      assert.equal(await page.$$eval('#tooltip .tt-val', els => els.length), 0);
      assert.match(await page.textContent('#tooltip'), /vocab: Ġlike {2}→ {2}Ċ/);
      await hoverCell(7, 3);
      assert.equal(await page.textContent('#tooltip .tt-val'), fmt4(A[7][3]));
      assert.equal(await page.textContent('#tooltip .tt-title'), '↵  →   like');
      /* the legend names the hatch; the SVG export hatches the same cells */
      assert.match(await page.textContent('#view-matrix .mx-legend'), /masked/);
      const svg = await page.evaluate(() => window.attnviz.exportSVG());
      const chk = await page.evaluate(s => {
        const doc = new DOMParser().parseFromString(s, 'image/svg+xml');
        return { err: !!doc.querySelector('parsererror'), pattern: !!doc.querySelector('pattern#av-hatch'), masked: doc.querySelectorAll('path.masked').length, img: doc.querySelectorAll('img').length };
      }, svg);
      assert.deepEqual(chk, { err: false, pattern: true, masked: 1, img: 0 });
      clean(log);
    } finally { await page.close(); }
  });

  test('mean, max and rollout under the mask: masked keys stay empty, values match the JSON', async () => {
    const { page, log, data } = await open('causal');
    try {
      const A = data.attention, n = data.tokens.length, H = 4, qi = 6;
      const check = async (want, tol, what) => {
        await page.hover('.hv-left .tok[data-k="' + qi + '"]');
        await settle(page);
        const v = await vTexts(page, 'R');
        closeAll(v.slice(0, qi + 1), want.slice(0, qi + 1), tol, what);
        assert.deepEqual(v.slice(qi + 1), new Array(n - qi - 1).fill(''), what + ': masked keys empty');
        await page.mouse.move(5, 5);
      };
      await clickAndRender(page, '#mode-seg [data-mode="mean"]');
      await check(range(n).map(j => A[0].reduce((s, hh) => s + hh[qi][j], 0) / H), 1e-4 + 2e-6, 'mean');
      await clickAndRender(page, '#mode-seg [data-mode="max"]');
      await check(range(n).map(j => Math.max(...A[0].map(hh => hh[qi][j]))), 0.5e-4 + 2e-6, 'max');
      /* rollout through layers 0 and 1 (Abnar & Zuidema), computed here from the JSON */
      await clickAndRender(page, '#layer-next');
      await clickAndRender(page, '#mode-seg [data-mode="rollout"]');
      await page.waitForSelector('#view-head .hv');
      const hat = l => range(n).map(i => {
        const r = range(n).map(j => A[l].reduce((s, hh) => s + hh[i][j], 0) / H + (i === j ? 1 : 0));
        const s = r.reduce((a, b) => a + b, 0);
        return r.map(v => v / s);
      });
      const R0 = hat(0), A1 = hat(1);
      const R1 = A1.map(row => range(n).map(j => row.reduce((s, a, k) => s + a * R0[k][j], 0)));
      for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) assert.equal(R1[i][j], 0, 'rollout of a causal model is lower-triangular');
      await check(R1[qi], 3e-4, 'rollout');
      /* the matrix view of the rollout keeps the hatch */
      await clickAndRender(page, '#tab-matrix');
      assert.match(await page.textContent('#view-matrix h2'), /rollout through layer 1/);
      const svg = await page.evaluate(() => window.attnviz.exportSVG());
      assert.ok(svg.includes('url(#av-hatch)'));
      clean(log);
    } finally { await page.close(); }
  });

  test('merge word pieces joins BPE pieces into words (" un"+"believ"+"able"); hide <|endoftext|> renormalizes rows', async () => {
    const { page, log, data } = await open('causal');
    try {
      await page.dblclick('.head-chip[data-h="0"]'); /* head 0 alone */
      await settle(page);
      await page.check('#merge-pieces');
      await settle(page);
      const groups = bpeWords(data.tokens);
      const toks = await tokTexts(page, 'L');
      assert.deepEqual(toks, groups.map(g => g.label));
      for (const w of [' unbelievable', ' arrow.', ' flies', 'Time', '↵']) assert.ok(toks.includes(w), w + ' in ' + JSON.stringify(toks));
      assert.ok(toks.length < data.tokens.length);
      /* to a word: summed over its pieces; from a word: averaged; later words masked */
      const A = data.attention[0][0];
      const gi = groups.findIndex(g => g.text === ' unbelievable');
      const want = groups.map(gc => groups[gi].m.reduce((s, i) => s + gc.m.reduce((t, j) => t + A[i][j], 0), 0) / groups[gi].m.length);
      want.slice(gi + 1).forEach(w => assert.equal(w, 0));
      await page.hover('.hv-left .tok[data-k="' + gi + '"]');
      await settle(page);
      const v = await vTexts(page, 'R');
      closeAll(v.slice(0, gi + 1), want.slice(0, gi + 1), 8e-4, 'merged');
      assert.deepEqual(v.slice(gi + 1), new Array(groups.length - gi - 1).fill(''));
      assert.match(await page.textContent('#status'), /word pieces merged/);
      await page.mouse.move(5, 5);
      /* and hide the specials: rows renormalized over what is left */
      await page.uncheck('#merge-pieces');
      await page.check('#hide-special');
      await settle(page);
      const kept = range(data.tokens.length).filter(i => !SPECIAL(data.tokens[i]));
      assert.deepEqual(await tokTexts(page, 'L'), kept.map(i => shown(decode(data.tokens[i]))));
      const qi = 4; /* raw 5 */
      await page.hover('.hv-left .tok[data-k="' + qi + '"]');
      await settle(page);
      const row = kept.map(j => A[kept[qi]][j]), s = row.reduce((a, b) => a + b, 0);
      const hv = await vTexts(page, 'R');
      closeAll(hv.slice(0, qi + 1), row.slice(0, qi + 1).map(w => w / s), 3e-4, 'renormalized');
      assert.deepEqual(hv.slice(qi + 1), new Array(kept.length - qi - 1).fill(''));
      clean(log);
    } finally { await page.close(); }
  });

  test('export: every view as PNG and SVG, token text literal', async () => {
    const { page, log } = await open('causal');
    try {
      for (const view of ['head', 'model', 'neuron', 'matrix']) {
        await clickAndRender(page, '#tab-' + view);
        if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
        const png = await page.evaluate(async () => (await window.attnviz.exportPNG()).size);
        assert.ok(png > 2000, view + ' PNG ' + png);
        const svg = await page.evaluate(() => window.attnviz.exportSVG());
        assert.ok(!/<img/i.test(svg) && !/<script/i.test(svg), view + ' SVG has no markup from the input');
        const texts = await page.evaluate(s => [...new DOMParser().parseFromString(s, 'image/svg+xml').querySelectorAll('text')].map(t => t.textContent), svg);
        if (view === 'head') assert.ok(texts.includes(' <img src=x onerror=alert(1)>') && texts.includes(' flies'), 'SVG tokens as text');
      }
      clean(log);
    } finally { await page.close(); }
  });
});
