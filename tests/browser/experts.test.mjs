// experts.test.mjs — the experts strip (templates/experts.js) of a mixture-of-experts page, from the
// committed Mixtral and OLMoE fixtures: one row per sparse layer and one column per token, each
// cell painted in its experts' colors; hovering a cell lists the JSON's experts and weights in
// order; a dense model's page has no strip; a token that spells markup stays text; offline, no
// errors; screenshots in both themes (tests/browser/screenshots/experts-*.png).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, SHOTS, cliPage, launch, openPage, settle, clean } from './lib.mjs';

let browser;
const pages = {};
before(async () => {
  const model = name => path.join(ROOT, 'tests/data/small-' + name);
  pages.mixtral = cliPage('experts-mixtral', ['--model', model('mixtral'), '--predict', '3',
    'the cat sat on the mat <img src=x onerror=alert(1)>']);
  pages.olmoe = cliPage('experts-olmoe', ['--model', model('olmoe'), 'the cat sat on the mat']);
  pages.dense = cliPage('experts-dense', ['--model', model('llama'), 'the cat sat on the mat']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

/* draw.js's first four head colors per theme: experts 0..3 */
const PALETTE = { light: [[0x2f, 0x6f, 0xd0], [0xf0, 0x8a, 0x24], [0x2e, 0x9e, 0x44], [0xd6, 0x3b, 0x3b]],
  dark: [[0x5d, 0x95, 0xef], [0xf5, 0x9c, 0x45], [0x4c, 0xc2, 0x62], [0xf2, 0x64, 0x64]] };

/* the strip's geometry (the canvas's data-*) and each cell's first bar's color, read in the page */
async function cells(page) {
  return page.evaluate(() => {
    const cv = document.getElementById('experts-canvas');
    const r = window.devicePixelRatio || 1, n = +cv.dataset.tokens, L = +cv.dataset.layers;
    const tmp = document.createElement('canvas');
    tmp.width = cv.width;
    tmp.height = cv.height;
    const ctx = tmp.getContext('2d', { willReadFrequently: true });
    ctx.drawImage(cv, 0, 0);
    const CW = +cv.dataset.cw, RH = +cv.dataset.rh;
    const out = [];
    for (let l = 0; l < L; l++) {
      const row = [];
      for (let i = 0; i < n; i++) {
        /* the first bar's middle: the first (heaviest) expert's color */
        const d = ctx.getImageData(Math.floor((34 + i * CW + 2) * r), Math.floor((16 + l * RH + RH / 2) * r), 1, 1).data;
        row.push([d[0], d[1], d[2], d[3]]);
      }
      out.push(row);
    }
    return { out, n, L };
  });
}

describe('experts strip', () => {
  for (const theme of ['light', 'dark'])
  test(`one row per sparse layer, a column per token, each first bar in its expert's color (${theme})`, async () => {
    const { page, log } = await openPage(browser.ctx, pages.mixtral.html, { theme });
    const d = pages.mixtral.data();
    const { out, n, L } = await cells(page);
    assert.equal(L, d.experts.layers.length);
    assert.equal(n, d.tokens.length);
    const colors = PALETTE[theme];
    for (let l = 0; l < L; l++)
      for (let i = 0; i < n; i++) {
        const want = colors[d.experts.ids[l][i][0]], got = out[l][i];
        assert.ok(got[3] === 255 && want.every((v, c) => Math.abs(v - got[c]) <= 2),
          `layer ${l} token ${i}: ${got} want expert ${d.experts.ids[l][i][0]}'s ${want}`);
      }
    clean(log);
  });

  test('hovering a cell lists its experts and weights in the JSON\'s order; markup stays text', async () => {
    const { page, log } = await openPage(browser.ctx, pages.mixtral.html);
    const d = pages.mixtral.data();
    const n = d.tokens.length, i = 3, l = 1;
    const box = await (await page.$('#experts-canvas')).boundingBox();
    const [CW, RH] = await page.$eval('#experts-canvas', cv => [+cv.dataset.cw, +cv.dataset.rh]);
    await page.mouse.move(box.x + 34 + i * CW + CW / 2, box.y + 16 + l * RH + RH / 2);
    await settle(page);
    const tip = await page.$eval('#tooltip', el => ({ hidden: el.hidden, rows: [...el.querySelectorAll('.tt-row')].map(r => r.textContent), title: el.querySelector('.tt-title').textContent }));
    assert.equal(tip.hidden, false);
    const want = d.experts.ids[l][i].map((e, k) => 'expert ' + e + (d.experts.weights[l][i][k] * 100).toFixed(1) + '%');
    assert.deepEqual(tip.rows, want);
    assert.match(tip.title, new RegExp('token ' + i + ' · layer ' + d.experts.layers[l]));
    assert.equal(await page.$$eval('img', els => els.length), 0);
    clean(log);
  });

  test('a family that does not renormalize leaves part of each cell empty; a dense model has no strip', async () => {
    const o = await openPage(browser.ctx, pages.olmoe.html);
    const d = pages.olmoe.data();
    assert.ok(d.experts.weights.every(r => r.every(w => w[0] + w[1] < 1)));
    assert.equal(await o.page.$eval('#experts-canvas', cv => +cv.dataset.layers), 2);
    clean(o.log);
    const dn = await openPage(browser.ctx, pages.dense.html);
    assert.equal(await dn.page.$('#experts-row'), null);
    assert.equal(pages.dense.data().experts, undefined);
    clean(dn.log);
  });

  test('screenshots in both themes; switching the theme redraws the strip in the new palette', async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    for (const theme of ['light', 'dark']) {
      const { page, log } = await openPage(browser.ctx, pages.mixtral.html, { theme });
      await settle(page);
      const shot = path.join(SHOTS, 'experts-' + theme + '.png');
      await (await page.$('#top')).screenshot({ path: shot });
      assert.ok(fs.statSync(shot).size > 5000);
      await page.click('#theme-btn');
      await settle(page);
      const other = theme === 'light' ? 'dark' : 'light', d = pages.mixtral.data();
      const { out } = await cells(page);
      const want = PALETTE[other][d.experts.ids[0][0][0]];
      assert.ok(want.every((v, c) => Math.abs(v - out[0][0][c]) <= 2), `after the switch: ${out[0][0]} want ${want}`);
      clean(log);
    }
  });
});
