// screens.test.mjs — screenshots of every view in both themes (and a few
// interaction states) into tests/browser/screenshots/ (git-ignored), for
// looking at. Also checks each one drew without errors.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { cliPage, fixturePage, launch, openPage, settle, SHOTS } from './lib.mjs';

let browser;
const pages = {};
before(async () => {
  pages.demo = cliPage('shot-demo', ['--qk', '--layer', '0', '--head', '8', 'time flies like an arrow']);
  pages.pair = cliPage('shot-pair', ['--qk', 'the cat sat on the mat', 'it was tired']);
  pages.base = fixturePage('shot-base', ['--n', '24', '--pair', '--demo', '--init-layer', '4'], { json: false });
  pages.big = fixturePage('shot-512', ['--n', '512', '--pair', '--init-layer', '3', '--init-head', '-1'], { json: false });
  pages.causal = fixturePage('shot-causal', ['--causal', '--n', '22', '--layers', '3', '--heads', '4', '--dh', '16'], { json: false });
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function shoot(page, name, full = false) {
  await settle(page);
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: full });
}
async function go(page, view) {
  const prev = await page.evaluate(() => document.body.dataset.rendered);
  await page.click('#tab-' + view);
  await page.waitForFunction(p => document.body.dataset.rendered !== p, prev);
  if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
  await settle(page);
}

for (const theme of ['light', 'dark']) {
  test('screenshots, ' + theme + ' theme', async () => {
    for (const name of ['demo', 'pair', 'base', 'big', 'causal']) {
      const { page, log } = await openPage(browser.ctx, pages[name].html, { theme });
      try {
        assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme);
        for (const view of ['head', 'model', 'neuron', 'matrix']) {
          await go(page, view);
          await shoot(page, `${name}-${view}-${theme}`, name !== 'big');
        }
        await go(page, 'head');
        if (name === 'big') {
          await page.hover('.hv-left .tok[data-k="20"]');
          await shoot(page, `${name}-head-hover-${theme}`);
          await page.mouse.move(5, 5);
          await go(page, 'matrix');
          await page.check('#contrast');
          await shoot(page, `${name}-matrix-sqrt-${theme}`);
          await page.uncheck('#contrast');
        }
        if (name === 'causal') {
          await page.hover('.hv-left .tok[data-k="9"]');
          await shoot(page, `${name}-head-hover-${theme}`);
          await page.click('.hv-left .tok[data-k="9"]');
          await page.hover('.hv-right .tok[data-k="14"]');
          await shoot(page, `${name}-head-pinned-masked-${theme}`);
          await page.keyboard.press('Escape');
          await page.mouse.move(5, 5);
          await page.check('#merge-pieces');
          await page.check('#hide-special');
          await page.hover('.hv-left .tok[data-k="7"]');
          await shoot(page, `${name}-head-merged-${theme}`, true);
          await page.mouse.move(5, 5);
          await page.click('#mode-seg [data-mode="mean"]');
          await go(page, 'matrix');
          await shoot(page, `${name}-matrix-mean-merged-${theme}`, true);
          await page.uncheck('#merge-pieces');
          await page.uncheck('#hide-special');
          await go(page, 'neuron');
          await page.hover('#view-neuron .nv-queries .tok[data-pos="8"]');
          await shoot(page, `${name}-neuron-query8-${theme}`, true);
        }
        if (name === 'demo') {
          await page.dblclick('.head-chip[data-h="8"]');
          await settle(page);
          await shoot(page, `${name}-head-all-${theme}`, true);
          await page.hover('.hv-left .tok[data-k="2"]');
          await shoot(page, `${name}-head-hover-${theme}`);
          await page.click('.hv-left .tok[data-k="2"]');
          await page.hover('.hv-right .tok[data-k="3"]');
          await shoot(page, `${name}-head-pinned-${theme}`);
          await page.keyboard.press('Escape');
          await page.click('#mode-seg [data-mode="rollout"]');
          await page.waitForSelector('#view-head .hv');
          await shoot(page, `${name}-head-rollout-${theme}`, true);
          await go(page, 'model');
          await page.click('#view-model .thumb[data-li="1"][data-h="3"]');
          await page.waitForFunction(() => document.getElementById('modal').dataset.drawn === '1');
          await shoot(page, `${name}-model-modal-${theme}`);
          await page.keyboard.press('Escape');
          await go(page, 'neuron');
          await page.hover('#view-neuron .nv-queries .tok[data-pos="3"]');
          const b = await page.$eval('#view-neuron .nv-canvas', e => { const r = e.getBoundingClientRect(); return [r.left, r.top]; });
          await page.mouse.move(b[0] + 40, b[1] + 30);
          await shoot(page, `${name}-neuron-hover-${theme}`);
          await go(page, 'matrix');
          const m = await page.$eval('#view-matrix canvas[data-cell]', e => { const r = e.getBoundingClientRect(); return [r.left + +e.dataset.labw, r.top + +e.dataset.labh, +e.dataset.cell]; });
          await page.mouse.move(m[0] + m[2] * 2.5, m[1] + m[2] * 3.5);
          await shoot(page, `${name}-matrix-hover-${theme}`);
        }
        assert.deepEqual(log.errors, []);
        assert.deepEqual(log.console, []);
        assert.deepEqual(log.blocked, []);
      } finally { await page.close(); }
    }
  });
}
