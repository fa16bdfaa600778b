// lens.test.mjs — the Logit lens and Attribution views (templates/view_lens.js,
// view_attribution.js) on pages written by ./attnviz with tests/data/small-llama
// (--logit-lens, --attribution, --ablate): every shown number checked against
// the JSON of the same run, hostile text shown as text, the tabs disabled on a
// page without the data, screenshots in both themes (tests/browser/screenshots).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, SHOTS, cliPage, launch, openPage, settle, clean } from './lib.mjs';

const LLAMA = path.join(ROOT, 'tests/data/small-llama');
const INJECT = 'hello <img src=x onerror=alert(1)> world';
let browser;
const pages = {};
before(async () => {
  pages.lens = cliPage('lens-all', ['--model', LLAMA, '--predict', '3', '--logit-lens', '3', '--attribution', '--ablate', 'all', INJECT]);
  pages.mean = cliPage('lens-mean', ['--model', LLAMA, '--ablate', '0.1,1.2', '--ablate-mode', 'mean', '--position', '2', 'hello world']);
  pages.plain = cliPage('lens-plain', ['--model', LLAMA, 'hello world']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function go(page, view) {
  const prev = await page.evaluate(() => document.body.dataset.rendered);
  await page.click('#tab-' + view);
  await page.waitForFunction(p => document.body.dataset.rendered !== p, prev);
  await settle(page);
}

test('the logit lens table is the JSON: a row per layer, the top token and the final rank per position', async () => {
  const d = pages.lens.data();
  const { page, log } = await openPage(browser.ctx, pages.lens.html);
  try {
    await go(page, 'lens');
    const rows = await page.$$eval('#view-lens table tr', trs => trs.map(tr => [...tr.children].map(c => c.textContent)));
    const L = d.logit_lens.length, n = d.tokens.length;
    assert.equal(rows.length, L + 2); /* header, layers (last on top), final */
    for (let i = 0; i < L; i++) {
      const row = rows[1 + (L - 1 - i)];
      assert.equal(row[0], 'L' + d.logit_lens_layers[i]);
      for (let p = 0; p < n; p++) {
        const e = d.logit_lens[i][p];
        assert.ok(row[1 + p].endsWith(' · ' + e.rank), `layer ${i} position ${p}: ${row[1 + p]} rank ${e.rank}`);
        const pct = (e.top[0].prob * 100).toFixed(e.top[0].prob >= 0.1 ? 0 : 1) + '%';
        assert.ok(row[1 + p].includes(pct), `layer ${i} position ${p}: ${row[1 + p]} prob ${pct}`);
      }
    }
    assert.equal(rows[rows.length - 1][0], 'final');
    /* the input's markup is text: no <img> was made */
    assert.equal(await page.$$eval('#view-lens img', x => x.length), 0);
    clean(log);
  } finally { await page.close(); }
});

test('the attribution grid and the ablation ranking are the JSON', async () => {
  const d = pages.lens.data();
  const { page, log } = await openPage(browser.ctx, pages.lens.html);
  try {
    await go(page, 'attribution');
    const last = d.attribution.positions[d.attribution.positions.length - 1];
    const cells = await page.$$eval('#view-attribution [title^="layer "]', cs => cs.map(c => c.title));
    const L = last.heads.length, H = last.heads[0].length;
    /* the first grid: every head and every MLP of the last position, by their tooltips */
    for (let l = 0; l < L; l++) {
      for (let h = 0; h < H; h++) assert.ok(cells.includes(`layer ${l} head ${h}: ${last.heads[l][h]}`), `head ${l}.${h}`);
      assert.ok(cells.includes(`layer ${l} MLP: ${last.mlp[l]}`), `MLP ${l}`);
    }
    /* the ablation ranking: the largest |effect| first */
    const flat = [];
    d.ablation.effects.forEach((r, l) => r.forEach((v, h) => flat.push([v, l, h])));
    flat.sort((a, b) => Math.abs(b[0]) - Math.abs(a[0]));
    const text = await page.textContent('#view-attribution');
    assert.ok(text.includes('L' + flat[0][1] + ' H' + flat[0][2] + '  ' + (flat[0][0] >= 0 ? '+' : '') + flat[0][0].toFixed(4)));
    /* another position from the select */
    await page.selectOption('#view-attribution select', '0');
    await settle(page);
    const first = d.attribution.positions[0];
    const c0 = await page.$$eval('#view-attribution [title^="layer "]', cs => cs.map(c => c.title));
    assert.ok(c0.includes(`layer 0 head 0: ${first.heads[0][0]}`));
    clean(log);
  } finally { await page.close(); }
});

test('mean ablation of two heads shows the others as not ablated; a page without the data disables the tabs', async () => {
  const d = pages.mean.data();
  assert.equal(d.ablation.mode, 'mean');
  assert.equal(d.ablation.position, 2);
  let { page, log } = await openPage(browser.ctx, pages.mean.html);
  try {
    await go(page, 'attribution');
    const cells = await page.$$eval('#view-attribution [title^="layer "]', cs => cs.map(c => c.title));
    assert.ok(cells.includes(`layer 0 head 1: ${d.ablation.effects[0][1]}`));
    assert.ok(cells.includes('layer 0 head 0: not ablated'));
    assert.ok(await page.$eval('#tab-lens', b => b.disabled));
    clean(log);
  } finally { await page.close(); }
  ({ page, log } = await openPage(browser.ctx, pages.plain.html));
  try {
    assert.ok(await page.$eval('#tab-lens', b => b.disabled));
    assert.ok(await page.$eval('#tab-attribution', b => b.disabled));
    clean(log);
  } finally { await page.close(); }
});

for (const theme of ['light', 'dark']) {
  test('screenshots, ' + theme + ' theme', async () => {
    const { page, log } = await openPage(browser.ctx, pages.lens.html, { theme });
    try {
      for (const view of ['lens', 'attribution']) {
        await go(page, view);
        await page.screenshot({ path: path.join(SHOTS, 'lens-' + view + '-' + theme + '.png'), fullPage: true });
      }
      clean(log);
    } finally { await page.close(); }
  });
}
