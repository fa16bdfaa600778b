// measures.test.mjs — the page's per-layer measures (--measure alti|rollout; templates/measure.js, data.js),
// its sink marks and notes (templates/flags.js) and the Explain tab (templates/view_explain.js):
// - an ALTI page opens on ALTI, its matrices the JSON's "alti" (to the page's 4 decimals); the head and
//   matrix views draw one series per layer, the model view one thumbnail per layer, the heads and the mode
//   set aside; Attention (control, key W) is the JSON's attention again, a thumbnail per head;
// - a rollout page: the page's own Rollout mode over every head and layer equals --measure rollout;
// - SmolLM2 (trained): the sinks note's counts, the "sink" marks on the chips and the model view's
//   thumbnails are the JSON's sinks_summary, the massive-activations note names its dimension; gpt-oss's
//   learned sinks: "Without learned sinks" makes each row's weights over the keys sum to 1;
// - --explain (SmolLM2, and MiniLM: post-norm): the panel (closed at first) lists the JSON's pairs, their scores
//   and parts; absent without it;
// - every view draws in every measure without errors; screenshots in both themes (measures-*.png).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ROOT, SHOTS, launch, openPage, settle, clean, cliPage, clickAndRender, rendered } from './lib.mjs';

const LLAMA = path.join(ROOT, 'tests/data/small-llama');
const BERT = path.join(ROOT, 'tests/data/small-f32');
const GPTOSS = path.join(ROOT, 'tests/data/small-gptoss');
const smollm2 = () => execFileSync(path.join(ROOT, 'tools/pymodel.sh'), ['smollm2']).toString().trim() + '/SmolLM2-135M-Instruct.Q4_1.gguf';
const TEXT = 'the cat sat on the mat and the cat slept';
let browser;
const pages = {};
before(async () => {
  pages.alti = cliPage('measures-alti', ['--model', LLAMA, '--measure', 'alti', '--precision', '9', TEXT]);
  pages.altiBert = cliPage('measures-alti-bert', ['--model', BERT, '--measure', 'alti', '--precision', '9', 'the quick brown fox', 'jumps']);
  pages.rollout = cliPage('measures-rollout', ['--model', LLAMA, '--measure', 'rollout', '--precision', '9', TEXT]);
  const S = smollm2();
  pages.smol = cliPage('measures-smol', ['--model', S, '--measure', 'alti', 'The cat sat on the mat. The cat sat on the']);
  pages.explain = cliPage('measures-explain', ['--model', S, '--explain', '5.1', 'The cat sat on the mat. The cat sat on the']);
  const minilm = execFileSync(path.join(ROOT, 'tools/pymodel.sh'), ['all-MiniLM-L6-v2']).toString().trim();
  pages.explainBert = cliPage('measures-explain-minilm', ['--model', minilm, '--explain', '3.5', 'The cat sat on the mat.', 'A cat slept.']);
  pages.gptoss = cliPage('measures-gptoss', ['--model', GPTOSS, 'the cat sat on the mat']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function go(page, view) {
  const prev = await page.evaluate(() => document.body.dataset.rendered);
  await page.click('#tab-' + view);
  await rendered(page, prev);
  if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
  await settle(page);
}

/* the current measure's matrix of layer index li as the page holds it (head 0's slot) */
async function layerMatrix(page, li) {
  return page.evaluate(async li => {
    const D = window.attnviz.data;
    await D.attention(li, null, [0]);
    return Array.from(D.headMatrix(li, 0));
  }, li);
}

for (const name of ['alti', 'altiBert']) {
  test(`${name}: opens on ALTI, the JSON's matrices, one per layer; Attention is the attention`, async () => {
    const { page, log } = await openPage(browser.ctx, pages[name].html);
    try {
      const d = pages[name].data();
      assert.equal(d.measure, 'alti');
      assert.deepEqual(await page.evaluate(() => window.attnviz.data.measures), ['attention', 'alti']);
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'alti');
      assert.equal(await page.evaluate(() => window.attnviz.data.perLayer), true);
      assert.equal(await page.evaluate(() => document.body.classList.contains('per-layer-measure')), true);
      assert.equal(await page.$eval('#ctl-mode', el => getComputedStyle(el).display), 'none', 'no mode under ALTI');
      for (let li = 0; li < d.layers.length; li++) {
        const got = await layerMatrix(page, li);
        d.alti[li].flat().forEach((want, k) => assert.ok(Math.abs(got[k] - want) <= 5.0001e-5, `layer ${li} cell ${k}: ${got[k]} vs ${want}`));
        /* every head's slot is the layer's one matrix */
        const same = await page.evaluate(li => { const D = window.attnviz.data; return D.block(li, 0) === D.block(li, D.H - 1); }, li);
        assert.ok(same, 'one block per layer');
      }
      assert.ok(await page.$('#view-head .view-title .measure-tag'), 'the head view says ALTI');
      /* the head view draws one series (its legend names ALTI, no head) */
      const legend = await page.$eval('#view-head', el => el.textContent);
      assert.ok(!/Head 0/.test(legend), 'no per-head series under ALTI');
      /* one matrix drawn: its ink is not shared out among the heads the page opened on */
      const sub = await page.$eval('#view-head .view-title .sub', el => el.textContent);
      assert.ok(/line opacity = weight\./.test(sub) && !/÷ √/.test(sub), sub);
      await go(page, 'model');
      const thumbs = await page.$$eval('#view-model .thumb', t => t.length);
      assert.equal(thumbs, d.layers.length, 'a thumbnail per layer');
      /* Attention: the JSON's attention, a thumbnail per head */
      await clickAndRender(page, '#measure-seg [data-measure=attention]');
      await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
      assert.equal(await page.$$eval('#view-model .thumb', t => t.length), d.layers.length * d.heads.length);
      const att = await page.evaluate(async () => { const D = window.attnviz.data; await D.attention(0); return Array.from(D.headMatrix(0, 1)); });
      d.attention[0][1].flat().forEach((want, k) => assert.ok(Math.abs(att[k] - want) <= 5.0001e-5, `attention cell ${k}`));
      assert.equal(await page.evaluate(() => document.body.classList.contains('per-layer-measure')), false);
      /* key W steps back to ALTI */
      const prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.keyboard.press('w');
      await rendered(page, prev);
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'alti');
      clean(log);
    } finally { await page.close(); }
  });
}

test('the page\'s own Rollout mode over every head and layer is --measure rollout', async () => {
  const { page, log } = await openPage(browser.ctx, pages.rollout.html);
  try {
    const d = pages.rollout.data();
    assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'rollout');
    let worst = 0;
    for (let li = 0; li < d.layers.length; li++) {
      const mine = await page.evaluate(async li => {
        const D = window.attnviz.data;
        D.setMeasure('attention');
        const hs = D.heads.map((_, h) => h);
        for (let l = 0; l <= li; l++) await D.attention(l, null, hs);
        const R = await window.attnviz.rollout(li, hs);
        D.setMeasure('rollout');
        return Array.from(R);
      }, li);
      d.rollout[li].flat().forEach((want, k) => { worst = Math.max(worst, Math.abs(mine[k] - want)); });
    }
    /* the page's attention codes carry 1e-4: a few of those through the layers */
    assert.ok(worst <= 2e-4 * d.layers.length, `page Rollout vs --measure rollout: ${worst}`);
    clean(log);
  } finally { await page.close(); }
});

test('SmolLM2: sinks note, sink marks on chips and thumbnails, massive activations, as the JSON says', async () => {
  const { page, log } = await openPage(browser.ctx, pages.smol.html);
  try {
    const d = pages.smol.data();
    const s = d.sinks_summary;
    const note = await page.$eval('#sinks-note', el => el.textContent);
    assert.ok(note.includes(s.past_sink_heads + ' of the ' + s.past_heads + ' heads from layer 2 on'), note);
    const massive = await page.$eval('#massive-note', el => el.textContent);
    assert.ok(massive.includes('dimension ' + d.massive_activations.entries[0].dim), massive);
    /* both notes keep one line until clicked, as the page's other notes (the view starts within the first screen) */
    for (const id of ['#sinks-note', '#massive-note']) {
      const h = () => page.$eval(id, el => el.getBoundingClientRect().height);
      const folded = await h();
      assert.ok(await page.$eval(id, el => el.classList.contains('fold')) && folded < 40, `${id}: ${folded} px`);
      await page.click(id);
      assert.ok((await h()) > folded, `${id} opens on a click`);
      await page.click(id);
    }
    await clickAndRender(page, '#measure-seg [data-measure=attention]');
    for (const li of [2, 20]) {
      await page.evaluate(li => window.attnviz.setLayer(li), li);
      await settle(page);
      const marked = await page.$$eval('#head-chips .head-chip.sink', b => b.map(x => +x.dataset.h).sort((a, c) => a - c));
      const want = s.sink_heads.filter(([l]) => l === li).map(([, h]) => h).sort((a, c) => a - c);
      assert.deepEqual(marked, want, `layer ${li}: sink chips`);
    }
    await go(page, 'model');
    assert.equal(await page.$$eval('#view-model .thumb.sink', t => t.length), s.sink_heads.length, 'sink thumbnails');
    clean(log);
  } finally { await page.close(); }
});

test('gpt-oss: "Without learned sinks" renormalizes each row over the keys', async () => {
  const { page, log } = await openPage(browser.ctx, pages.gptoss.html);
  try {
    assert.ok(await page.$('#renorm-sinks'), 'the toggle is there for learned sinks');
    /* each row of each head as the views draw it: its sum, and the tolerance its codes (1e-4 each) allow */
    const rows = () => page.evaluate(() => {
      const A = window.attnviz, D = A.data, n = D.n, out = [];
      D.heads.forEach((_, h) => {
        const m = A.derived(0, h), sink = D.sinkRow(0, h);
        for (let i = 0; i < n; i++) {
          let s = 0;
          for (let j = 0; j < n; j++) s += m[i * n + j];
          out.push({ s, tol: (n + 1) * 5e-5 / Math.max(1e-3, 1 - sink[i]) + 1e-6, sink: sink[i] });
        }
      });
      return out;
    });
    const before = await rows();
    assert.ok(before.some(r => r.sink > 0.01 && Math.abs(r.s + r.sink - 1) < 1e-3 && r.s < 0.99), 'learned sinks take a share of rows');
    await clickAndRender(page, '#renorm-sinks');
    assert.equal(await page.evaluate(() => window.attnviz.data.renormSinks), true);
    (await rows()).forEach((r, k) => assert.ok(Math.abs(r.s - 1) <= r.tol, `row ${k}: ${r.s} (tol ${r.tol})`));
    clean(log);
  } finally { await page.close(); }
});

for (const name of ['explain', 'explainBert']) test(`--explain (${name === 'explain' ? 'SmolLM2, pre-norm' : 'MiniLM, post-norm'}): the panel shows the JSON's pairs and parts; absent without it`, async () => {
  const { page, log } = await openPage(browser.ctx, pages[name].html, { viewport: { width: 1400, height: 1000 } });
  try {
    const x = pages[name].data().explain;
    assert.ok(await page.$('#explain-panel'), 'the panel is there');
    assert.equal(await page.$eval('#explain-panel', d => d.open), false, 'closed at first: the views stay in place');
    await page.click('#explain-panel > summary');
    await settle(page);
    assert.equal(await page.$$eval('#explain-body .ex-pairs button', b => b.length), x.pairs.length);
    for (let k = 0; k < x.pairs.length; k++) {
      await page.click(`#explain-body .ex-pairs button[data-pair="${k}"]`);
      await settle(page);
      const sum = await page.$eval('#explain-summary', el => el.textContent);
      assert.ok(sum.includes('score ' + x.pairs[k].score.toFixed(4)), sum);
      const parts = await page.$$eval('#explain-body .ex-table tr td:nth-child(2)', t => t.map(e => e.textContent));
      assert.ok(parts.length >= 6 && parts.every(p => x.parts.includes(p)), parts.join(','));
    }
    if (name === 'explainBert') await page.screenshot({ path: path.join(SHOTS, 'measures-explain-minilm-light.png'), fullPage: true });
    clean(log);
  } finally { await page.close(); }
  const other = await openPage(browser.ctx, pages.alti.html);
  try {
    assert.equal(await other.page.$('#explain-panel'), null);
  } finally { await other.page.close(); }
});

for (const theme of ['light', 'dark']) {
  test(`every view draws under ALTI and attention, ${theme} theme (screenshots)`, async () => {
    const { page, log } = await openPage(browser.ctx, pages.smol.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      for (const measure of ['alti', 'attention']) {
        if ((await page.evaluate(() => window.attnviz.data.measure)) !== measure)
          await clickAndRender(page, `#measure-seg [data-measure=${measure}]`);
        for (const view of ['head', 'model', 'neuron', 'matrix']) {
          await go(page, view);
          const err = await page.$eval(`#view-${view}`, el => (el.querySelector('.empty') || {}).textContent || '');
          assert.ok(!/Could not draw/.test(err), `${view} (${measure}): ${err}`);
          if (view !== 'neuron') await page.screenshot({ path: path.join(SHOTS, `measures-${measure}-${view}-${theme}.png`) });
        }
        await go(page, 'head');
      }
      clean(log);
    } finally { await page.close(); }
    const ex = await openPage(browser.ctx, pages.explain.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      await ex.page.click('#explain-panel > summary');
      await settle(ex.page);
      await ex.page.screenshot({ path: path.join(SHOTS, `measures-explain-${theme}.png`), fullPage: true });
      clean(ex.log);
    } finally { await ex.page.close(); }
  });
}
