// norm.test.mjs — the Attention / Norm-weighted switch (--measure norm; templates/measure.js): a page
// written with --measure norm opens on value-weighted attention, whose weights are each row's shares of
// the JSON's norm_attention (to the page's 4 decimals), switches to the attention itself (the JSON's
// attention) by the control and by key W, and every view draws in both measures without errors, the
// title tagged while norm-weighted (the neuron view, which explains the attention from q and k, keeps the
// attention and disables the switch); a page without --measure has no switch. The live page of
// attnviz serve --measure norm: the same switch over the server's measure=norm, weights equal to the CLI's. Screenshots of every view,
// norm-weighted, in both themes into tests/browser/screenshots/ (norm-*.png).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ROOT, SHOTS, launch, openPage, settle, clean, cliPage, clickAndRender, rendered, startServe } from './lib.mjs';

const LLAMA = path.join(ROOT, 'tests/data/small-llama');
const BERT = path.join(ROOT, 'tests/data/small-f32');
let browser;
const pages = {};
before(async () => {
  pages.llama = cliPage('norm-llama', ['--model', LLAMA, '--measure', 'norm', '--qk', '--precision', '9', 'the cat sat on the mat and the cat slept']);
  pages.bert = cliPage('norm-bert', ['--model', BERT, '--measure', 'norm', '--qk', '--precision', '9', 'the quick brown fox', 'jumps']);
  pages.plain = cliPage('norm-plain', ['--model', LLAMA, 'the cat sat']);
  browser = await launch();
});
let srv = null;
after(async () => { if (browser) await browser.close(); await srv?.stop(); });

/* every weight the page holds for layer index li (all heads) in the current measure */
async function pageWeights(page, li) {
  return page.evaluate(async li => {
    const D = window.attnviz.data;
    await D.attention(li);
    const out = [];
    for (let h = 0; h < D.H; h++) out.push(Array.from(D.headMatrix(li, h)));
    return out;
  }, li);
}

function shares(rows) {
  return rows.map(r => { const s = r.reduce((a, b) => a + b, 0); return r.map(v => (s > 0 ? v / s : 0)); });
}

async function go(page, view) {
  const prev = await page.evaluate(() => document.body.dataset.rendered);
  await page.click('#tab-' + view);
  await rendered(page, prev);
  if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
  await settle(page);
}

for (const name of ['llama', 'bert']) {
  test(`${name}: opens norm-weighted, the shares of norm_attention; Attention is the attention; W flips`, async () => {
    const { page, log } = await openPage(browser.ctx, pages[name].html);
    try {
      const d = pages[name].data();
      assert.ok(Array.isArray(d.norm_attention) && Array.isArray(d.value_norms));
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'norm');
      assert.deepEqual(await page.evaluate(() => window.attnviz.data.measures), ['attention', 'norm']);
      assert.equal(await page.$eval('#ctl-measure', el => !el.hidden), true);
      assert.equal(await page.$eval('#measure-seg [data-measure=norm]', b => b.getAttribute('aria-checked')), 'true');
      assert.equal(await page.evaluate(() => document.body.dataset.measure), 'norm');
      assert.ok(await page.$('#view-head .view-title .measure-tag'), 'the view title says norm-weighted');
      let differ = 0;
      for (let li = 0; li < d.layers.length; li++) {
        const got = await pageWeights(page, li);
        d.norm_attention[li].forEach((head, h) => {
          shares(head).flat().forEach((want, k) => {
            const g = got[h][k];
            assert.ok(Math.abs(g - want) <= 5.0001e-5, `layer ${li} head ${h} cell ${k}: page ${g}, shares ${want}`);
            if (Math.abs(want - d.attention[li][h].flat()[k]) > 1e-3) differ++;
          });
        });
      }
      assert.ok(differ > 0, 'norm-weighted shares differ from the attention somewhere');
      /* the control: Attention */
      await clickAndRender(page, '#measure-seg [data-measure=attention]');
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'attention');
      assert.equal(await page.$('#view-head .view-title .measure-tag'), null);
      const att = await pageWeights(page, 0);
      d.attention[0].forEach((head, h) => head.flat().forEach((want, k) =>
        assert.ok(Math.abs(att[h][k] - want) <= 5.0001e-5, `attention layer 0 head ${h} cell ${k}`)));
      /* key W back to norm-weighted */
      const prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.keyboard.press('w');
      await rendered(page, prev);
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'norm');
      clean(log);
    } finally { await page.close(); }
  });
}

for (const theme of ['light', 'dark']) {
  test(`every view draws in both measures, ${theme} theme (screenshots)`, async () => {
    const { page, log } = await openPage(browser.ctx, pages.llama.html, { theme });
    try {
      for (const measure of ['norm', 'attention']) {
        if ((await page.evaluate(() => window.attnviz.data.measure)) !== measure)
          await clickAndRender(page, `#measure-seg [data-measure=${measure}]`);
        for (const view of ['head', 'model', 'neuron', 'matrix']) {
          await go(page, view);
          /* the neuron view explains the attention itself (softmax of q·k): the switch does not apply there */
          const drawn = view === 'neuron' ? 'attention' : measure;
          assert.equal(await page.evaluate(() => window.attnviz.data.measure), drawn, `${view}: draws ${drawn}`);
          assert.equal(await page.$eval('#measure-seg [data-measure=norm]', b => b.disabled), view === 'neuron');
          assert.equal(await page.$eval(`#measure-seg [data-measure=${measure}]`, b => b.getAttribute('aria-checked')), 'true');
          const tag = await page.$(`#view-${view} .view-title .measure-tag`);
          assert.equal(!!tag, drawn === 'norm', `${view}: title tag while ${measure}`);
          const err = await page.$eval(`#view-${view}`, el => (el.querySelector('.empty') || {}).textContent || '');
          assert.ok(!/Could not draw/.test(err), `${view} (${measure}): ${err}`);
          if (measure === 'norm') await page.screenshot({ path: path.join(SHOTS, `norm-${view}-${theme}.png`), fullPage: true });
        }
        await go(page, 'head');
      }
      /* the model view's thumbnails change with the measure (offline pages draw the matrices themselves) */
      clean(log);
    } finally { await page.close(); }
  });
}

test('a page without --measure norm has no switch and draws attention', async () => {
  const { page, log } = await openPage(browser.ctx, pages.plain.html);
  try {
    assert.equal(await page.$('#ctl-measure'), null);
    assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'attention');
    assert.deepEqual(await page.evaluate(() => window.attnviz.data.measures), ['attention']);
    const prev = await page.evaluate(() => document.body.dataset.rendered);
    await page.keyboard.press('w'); /* nothing to switch to: no render */
    await page.waitForTimeout(150);
    assert.equal(await page.evaluate(() => document.body.dataset.rendered), prev);
    clean(log);
  } finally { await page.close(); }
});

test('live page of attnviz serve --measure norm: the switch reads the server\'s measure=norm', async () => {
  const text = 'the cat sat on the mat and the cat slept';
  srv = await startServe(['--model', LLAMA, '--measure', 'norm', text]);
  const url = srv.url;
  const d = pages.llama.data(); /* the CLI's JSON for the same text and model */
  for (const theme of ['light', 'dark']) {
    const page = await browser.ctx.newPage();
    const errors = [], asked = [];
    page.on('pageerror', e => errors.push(String(e && e.message ? e.message : e)));
    page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.text()); });
    page.on('request', r => asked.push(r.url()));
    try {
      await page.emulateMedia({ colorScheme: theme });
      await page.goto(url);
      await page.waitForFunction(() => document.body.dataset.ready === '1' && document.body.dataset.busy !== '1', null, { timeout: 60000 });
      await settle(page);
      assert.equal(await page.evaluate(() => window.attnviz.data.live), true);
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'norm');
      const got = await pageWeights(page, 1);
      d.norm_attention[1].forEach((head, h) => shares(head).flat().forEach((want, k) =>
        assert.ok(Math.abs(got[h][k] - want) <= 5.0001e-5, `live layer 1 head ${h} cell ${k}: ${got[h][k]} vs ${want}`)));
      assert.ok(asked.some(u => /\/api\/attention\?.*measure=norm/.test(u)), 'asked the server for measure=norm');
      await page.screenshot({ path: path.join(SHOTS, `norm-live-head-${theme}.png`), fullPage: true });
      await go(page, 'model');
      assert.ok(asked.some(u => /\/api\/thumbs\?.*measure=norm/.test(u)), 'norm-weighted thumbnails from the server');
      await page.screenshot({ path: path.join(SHOTS, `norm-live-model-${theme}.png`), fullPage: true });
      await go(page, 'head');
      await clickAndRender(page, '#measure-seg [data-measure=attention]');
      const att = await pageWeights(page, 1);
      d.attention[1].forEach((head, h) => head.flat().forEach((want, k) =>
        assert.ok(Math.abs(att[h][k] - want) <= 5.0001e-5, `live attention layer 1 head ${h} cell ${k}`)));
      assert.deepEqual(errors, []);
    } finally { await page.close(); }
  }
  await srv.stop();
});
