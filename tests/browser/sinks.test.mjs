// sinks.test.mjs — attention sinks (gpt-oss) on the page, from the committed tests/data/small-gptoss
// fixture: the matrix view's "sink" column right of the keys holds each query row's share from the
// JSON's "sinks" (its pixels are the heat map's color at that share; hovering it gives the number),
// the head view's sink strip draws a bar per query as wide as its share; hidden specials scale rows
// and sink together (the column shows each row's share over its visible keys and the sink); a model without sinks gets neither; offline, no errors; screenshots in both
// themes (tests/browser/screenshots/sinks-*.png).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, SHOTS, cliPage, launch, openPage, settle, clean, fmt4 } from './lib.mjs';

let browser;
const pages = {};
const TEXT = 'the cat sat on the mat because it was tired';
before(async () => {
  const model = name => path.join(ROOT, 'tests/data/small-' + name);
  pages.matrix = cliPage('sinks-matrix', ['--model', model('gptoss'), '--view', 'matrix', '--layer', '0', '--head', '1', TEXT]);
  pages.head = cliPage('sinks-head', ['--model', model('gptoss'), '--view', 'head', '--layer', '1', '--head', '2', TEXT]);
  pages.dense = cliPage('sinks-dense', ['--model', model('llama'), '--view', 'matrix', TEXT]);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

/* draw.js's head colors 1 and 2 per theme */
const PALETTE = { light: { 1: [0xf0, 0x8a, 0x24], 2: [0x2e, 0x9e, 0x44] }, dark: { 1: [0xf5, 0x9c, 0x45], 2: [0x4c, 0xc2, 0x62] } };

/* the matrix view's sink column: each row's pixel in its middle, and the background (the canvas's corner) */
async function sinkColumn(page) {
  return page.evaluate(() => {
    const ov = document.querySelector('.mx-wrap canvas[data-cell]');
    const cv = ov.previousElementSibling;
    const r = window.devicePixelRatio || 1, cell = +ov.dataset.cell, x = +ov.dataset.sinkx + +ov.dataset.sinkw / 2;
    const tmp = document.createElement('canvas');
    tmp.width = cv.width;
    tmp.height = cv.height;
    const ctx = tmp.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(cv, 0, 0);
    const px = (X, Y) => [...ctx.getImageData(Math.floor(X * r), Math.floor(Y * r), 1, 1).data].slice(0, 3);
    const got = [];
    for (let i = 0; i < +ov.dataset.rows; i++) got.push(px(x, +ov.dataset.labh + i * cell + cell / 2));
    return { got, bg: px(1, 1), sinkx: ov.dataset.sinkx };
  });
}
const expect = (bg, col, share) => bg.map((b, c) => Math.round(b + (col[c] - b) * Math.min(1, share)));

describe('attention sinks', () => {
  for (const theme of ['light', 'dark'])
  test(`the matrix view's sink column holds each row's share in the heat map's color (${theme})`, async () => {
    const { page, log } = await openPage(browser.ctx, pages.matrix.html, { theme });
    await settle(page);
    const d = pages.matrix.data();
    assert.equal(d.sinks.length, 2);
    assert.equal(d.sinks[0][1].length, d.tokens.length);
    /* rows and sink sum to 1 in the JSON */
    for (let i = 0; i < d.tokens.length; i++) {
      const sum = d.attention[0][1][i].reduce((a, b) => a + b, 0) + d.sinks[0][1][i];
      assert.ok(Math.abs(sum - 1) < 1e-4, `row ${i}: ${sum}`);
    }
    const s = await sinkColumn(page);
    assert.notEqual(s.sinkx, '');
    assert.equal(s.got.length, d.tokens.length);
    for (let i = 0; i < s.got.length; i++) {
      const want = expect(s.bg, PALETTE[theme][1], d.sinks[0][1][i]);
      assert.ok(want.every((v, c) => Math.abs(v - s.got[i][c]) <= 3), `row ${i}: ${s.got[i]} want ${want} (share ${d.sinks[0][1][i]})`);
    }
    /* the shares differ from row to row: the column is not one color */
    assert.ok(new Set(s.got.map(String)).size > 2);
    clean(log);
  });

  test('hovering the sink column gives the row\'s share; markup-free text', async () => {
    const { page, log } = await openPage(browser.ctx, pages.matrix.html);
    await settle(page);
    const d = pages.matrix.data(), i = 4;
    const ov = await page.$('.mx-wrap canvas[data-cell]');
    await ov.scrollIntoViewIfNeeded(); /* below the page's notes on a short viewport */
    const box = await ov.boundingBox();
    const [x, sw, labh, cell] = await ov.evaluate(o => [+o.dataset.sinkx, +o.dataset.sinkw, +o.dataset.labh, +o.dataset.cell]);
    await page.mouse.move(box.x + x + sw / 2, box.y + labh + i * cell + cell / 2);
    await settle(page);
    const tip = await page.$eval('#tooltip', el => ({ hidden: el.hidden, title: el.querySelector('.tt-title').textContent, rows: [...el.querySelectorAll('.tt-row')].map(r => r.textContent) }));
    assert.equal(tip.hidden, false);
    assert.match(tip.title, /→ {2}sink$/);
    assert.equal(tip.rows.length, 1);
    assert.ok(tip.rows[0].endsWith(fmt4(d.sinks[0][1][i])), `${tip.rows[0]} want ${fmt4(d.sinks[0][1][i])}`);
    clean(log);
  });

  test('the head view\'s sink strip: one bar per query, as wide as its share', async () => {
    const { page, log } = await openPage(browser.ctx, pages.head.html);
    await settle(page);
    const d = pages.head.data();
    const r = await page.evaluate(() => {
      const cv = document.querySelector('canvas.hv-sink');
      if (!cv) return null;
      const dpr = window.devicePixelRatio || 1, rh = +cv.dataset.rh, n = +cv.dataset.rows;
      const tmp = document.createElement('canvas');
      tmp.width = cv.width;
      tmp.height = cv.height;
      const ctx = tmp.getContext('2d', { willReadFrequently: true });
      ctx.drawImage(cv, 0, 0);
      const widths = [];
      for (let k = 0; k < n; k++) {
        const row = ctx.getImageData(0, Math.floor((k * rh + rh / 2) * dpr), cv.width, 1).data;
        let w = 0;
        /* the bar's pixels (the separator line, 2 px from the right edge, is left out) */
        for (let x = 0; x < cv.width - 3 * dpr; x++) w += row[4 * x + 3] > 0 ? 1 : 0;
        widths.push(w / dpr);
      }
      return { widths, series: +cv.dataset.series, W: cv.width / dpr };
    });
    assert.ok(r, 'no sink strip');
    assert.equal(r.series, 1);
    const share = d.sinks[1][2];
    for (let k = 0; k < share.length; k++) {
      const want = Math.max(share[k] > 0 ? 1 : 0, share[k] * (r.W - 8));
      assert.ok(Math.abs(r.widths[k] - want) <= 1.5, `query ${k}: bar ${r.widths[k]} px, share ${share[k]} -> ${want} px`);
    }
    clean(log);
  });

  test('hidden specials scale rows and sink together; a model without sinks has no column or strip', async () => {
    const { page, log } = await openPage(browser.ctx, pages.matrix.html);
    await settle(page);
    await page.click('#hide-special');
    await settle(page);
    const d = pages.matrix.data(), a = d.attention[0][1], sk = d.sinks[0][1];
    /* the page hides the specials and (a causal model) the first token: each visible row's sink
     * over its visible keys and itself */
    const vis = d.tokens.map((t, i) => i > 0 && !/^<.*>$/.test(t)).flatMap((v, i) => (v ? [i] : []));
    const s = await sinkColumn(page);
    assert.equal(s.got.length, vis.length);
    vis.forEach((i, r) => {
      const kept = vis.reduce((acc, j) => acc + a[i][j], 0);
      const want = expect(s.bg, PALETTE.light[1], sk[i] / (kept + sk[i]));
      assert.ok(want.every((v, c) => Math.abs(v - s.got[r][c]) <= 3), `row ${r} (token ${i}): ${s.got[r]} want ${want}`);
    });
    clean(log);
    const dn = await openPage(browser.ctx, pages.dense.html);
    await settle(dn.page);
    assert.equal(await dn.page.$eval('.mx-wrap canvas[data-cell]', o => o.dataset.sinkx), '');
    assert.equal(pages.dense.data().sinks, undefined);
    clean(dn.log);
  });

  test('screenshots in both themes (matrix and head view)', async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    for (const theme of ['light', 'dark'])
      for (const [name, p] of [['matrix', pages.matrix], ['head', pages.head]]) {
        const { page, log } = await openPage(browser.ctx, p.html, { theme });
        await settle(page);
        const shot = path.join(SHOTS, 'sinks-' + name + '-' + theme + '.png');
        await page.screenshot({ path: shot, fullPage: true });
        assert.ok(fs.statSync(shot).size > 5000);
        clean(log);
      }
  });
});
