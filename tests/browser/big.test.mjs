// big.test.mjs — 512 tokens in bert-base shape (12 layers x 12 heads, d_head
// 64, with queries/keys, a sentence pair): the page stays under 40 MB, becomes
// interactive, and every view draws without errors. Times are printed, not
// asserted (see bench_page.mjs for the benchmark).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { fixturePage, launch, openPage, settle } from './lib.mjs';

let browser, big, causal;
before(async () => {
  big = fixturePage('big512', ['--n', '512', '--pair', '--init-head', '-1'], { json: false });
  causal = fixturePage('causal512', ['--causal', '--n', '512', '--init-head', '-1'], { json: false });
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

test('512 tokens x 144 heads: under 40 MB, every view draws', async () => {
  const size = fs.statSync(big.html).size;
  console.log('# 512-token page: ' + (size / 1e6).toFixed(2) + ' MB');
  assert.ok(size < 40e6, 'page is ' + size + ' bytes');
  const { page, log } = await openPage(browser.ctx, big.html);
  try {
    console.log('# interactive after ' + (await page.evaluate(() => window.attnviz.readyMs)).toFixed(0) + ' ms');
    const lines = await page.$eval('#view-head .hv', e => +e.dataset.lines);
    assert.ok(lines > 1000 && lines <= 20000, 'lines drawn: ' + lines);
    assert.match(await page.textContent('#view-head .thin-note'), /strongest/);
    await page.hover('.hv-left .tok[data-k="100"]');
    await settle(page);
    assert.equal(await page.$eval('#view-head .hv', e => e.dataset.iso), 'L100');
    const vals = await page.$$eval('.hv-right .tok .v', els => els.filter(e => e.textContent).length);
    assert.equal(vals, 512);
    for (const view of ['model', 'neuron', 'matrix']) {
      const t0 = Date.now();
      const prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.click('#tab-' + view);
      await page.waitForFunction(p => document.body.dataset.rendered !== p, prev, { timeout: 60000 });
      if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1', null, { timeout: 60000 });
      await settle(page);
      console.log('# ' + view + ' view drawn in ' + (Date.now() - t0) + ' ms');
    }
    assert.equal(await page.$$eval('#view-neuron .nv-row', els => els.length), 512);
    /* rollout through 12 layers of 512 x 512 */
    const prev = await page.evaluate(() => document.body.dataset.rendered);
    await page.selectOption('#layer-select', '11');
    await page.waitForFunction(p => document.body.dataset.rendered !== p, prev, { timeout: 60000 });
    const t0 = Date.now();
    await page.click('#mode-seg [data-mode="rollout"]');
    await page.waitForFunction(() => /rollout through layer 11/.test((document.querySelector('#view-matrix h2') || {}).textContent || ''), null, { timeout: 120000 });
    console.log('# rollout through all 12 layers in ' + (Date.now() - t0) + ' ms');
    const [png] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
    assert.ok(fs.statSync(await png.path()).size > 10000);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
    assert.deepEqual(log.blocked, []);
  } finally { await page.close(); }
});

test('causal, 512 tokens x 144 heads: under 40 MB; the neuron view lists the query\'s keys; matrix and model views draw', async () => {
  const size = fs.statSync(causal.html).size;
  console.log('# 512-token causal page: ' + (size / 1e6).toFixed(2) + ' MB');
  assert.ok(size < 40e6, 'page is ' + size + ' bytes');
  const { page, log } = await openPage(browser.ctx, causal.html);
  try {
    console.log('# interactive after ' + (await page.evaluate(() => window.attnviz.readyMs)).toFixed(0) + ' ms');
    await page.hover('.hv-left .tok[data-k="100"]');
    await settle(page);
    const vals = await page.$$eval('.hv-right .tok .v', els => els.map(e => e.textContent));
    assert.equal(vals.slice(0, 101).filter(Boolean).length, 101);
    assert.equal(vals.slice(101).filter(Boolean).length, 0, 'no value to a masked key');
    for (const view of ['model', 'neuron', 'matrix']) {
      const t0 = Date.now();
      const prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.click('#tab-' + view);
      await page.waitForFunction(p => document.body.dataset.rendered !== p, prev, { timeout: 60000 });
      if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1', null, { timeout: 60000 });
      await settle(page);
      console.log('# causal ' + view + ' view drawn in ' + (Date.now() - t0) + ' ms');
      if (view === 'neuron') {
        await page.hover('#view-neuron .nv-queries .tok[data-pos="300"]');
        await settle(page);
        assert.equal(await page.$$eval('#view-neuron .nv-row', els => els.length), 301);
      }
    }
    const [png] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
    assert.ok(fs.statSync(await png.path()).size > 10000);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
    assert.deepEqual(log.blocked, []);
  } finally { await page.close(); }
});
