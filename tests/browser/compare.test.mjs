// compare.test.mjs — a page written with several measures (--measure norm,alti,rollout; measure.js,
// data.js, view_compare.js):
// - the switch lists attention and every measure in --measure's order, opens on the first listed, and key W
//   cycles through all of them and back, each drawing the JSON's own matrix (to the page's 4 decimals);
// - the Compare view draws one panel per measure for the selected layer (the focused head's attention and
//   value-weighted attention, the layer's ALTI and rollout), each query row's bars the JSON's row; a click on
//   a panel chooses its measure, on a matrix row picks the query, a head chip the head;
// - a page with attention alone has no Compare tab;
// - a vision encoder's page (--image, --measure rollout,alti) opens its Image view on rollout, the JSON's;
// - screenshots in both themes at 1,400 x 1,000 (compare-*.png).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { ROOT, SHOTS, launch, openPage, settle, clean, cliPage, clickAndRender, rendered } from './lib.mjs';

const LLAMA = path.join(ROOT, 'tests/data/small-llama');
const BERT = path.join(ROOT, 'tests/data/small-f32');
const TEXT = 'the cat sat on the mat and the cat slept';
const TOL = 5.0001e-5; /* the page's codes: round(x * 1e4) */
let browser;
const pages = {};
before(async () => {
  pages.llama = cliPage('compare-llama', ['--model', LLAMA, '--measure', 'norm,alti,rollout', '--precision', '9', TEXT]);
  pages.bert = cliPage('compare-bert', ['--model', BERT, '--measure', 'rollout,alti,norm', '--precision', '9', 'the quick brown fox', 'jumps']);
  pages.plain = cliPage('compare-plain', ['--model', LLAMA, TEXT]);
  pages.vit = cliPage('compare-vit', ['--model', path.join(ROOT, 'tests/data/small-vit'), '--image', path.join(ROOT, 'tests/data/vision-picture.png'),
    '--measure', 'rollout,alti', '--precision', '9']);
  const smol = execFileSync(path.join(ROOT, 'tools/pymodel.sh'), ['smollm2']).toString().trim() + '/SmolLM2-135M-Instruct.Q4_1.gguf';
  pages.smol = cliPage('compare-smol', ['--model', smol, '--measure', 'all', '--view', 'compare', 'The cat sat on the mat. The cat sat on the']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

/* the JSON's matrix of measure k at layer index li, head hi (row-major, as the page draws it) */
function want(d, k, li, hi) {
  if (k === 'attention') return d.attention[li][hi];
  if (k === 'norm') return d.norm_attention[li][hi].map(r => { const s = r.reduce((a, b) => a + b, 0); return r.map(x => (s > 0 ? x / s : 0)); });
  return d[k][li];
}

async function shownMatrix(page, li, hi) {
  return page.evaluate(async ([li, hi]) => {
    const D = window.attnviz.data;
    await D.attention(li, null, [hi]);
    return Array.from(D.headMatrix(li, hi));
  }, [li, hi]);
}

function near(got, rows, what) {
  const flat = rows.flat();
  assert.equal(got.length, flat.length, what + ': size');
  flat.forEach((w, k) => assert.ok(Math.abs(got[k] - w) <= TOL, `${what} cell ${k}: ${got[k]} vs ${w}`));
}

for (const [name, order] of [['llama', ['norm', 'alti', 'rollout']], ['bert', ['rollout', 'alti', 'norm']]]) {
  test(`${name}: the switch steps through attention and ${order.join(', ')} (key W), each the JSON's`, async () => {
    const { page, log } = await openPage(browser.ctx, pages[name].html);
    try {
      const d = pages[name].data();
      assert.equal(d.measure, order[0]);
      assert.deepEqual(d.measures, order);
      assert.deepEqual(await page.evaluate(() => window.attnviz.data.measures), ['attention', ...order]);
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), order[0], 'opens on the first listed');
      const seen = [];
      const li = d.layers.length - 1;
      for (let step = 0; step <= order.length + 1; step++) {
        const m = await page.evaluate(() => window.attnviz.data.measure);
        seen.push(m);
        assert.equal(await page.evaluate(() => document.body.dataset.measure), m);
        const on = await page.$$eval('#measure-seg [aria-checked=true]', b => b.map(x => x.dataset.measure));
        assert.deepEqual(on, [m], 'the switch shows the one chosen');
        near(await shownMatrix(page, li, 1), want(d, m, li, 1), `${m} layer ${li}`);
        const prev = await page.evaluate(() => document.body.dataset.rendered);
        await page.keyboard.press('w');
        await rendered(page, prev);
      }
      assert.deepEqual(seen, [order[0], order[1], order[2], 'attention', order[0]]);
      clean(log);
    } finally { await page.close(); }
  });
}

test('Compare: a panel per measure, each query row the JSON\'s; panels choose, rows pick the query, chips the head', async () => {
  const { page, log } = await openPage(browser.ctx, pages.llama.html);
  try {
    const d = pages.llama.data();
    await clickAndRender(page, '#tab-compare');
    const li = await page.evaluate(() => Number(document.body.dataset.layer));
    const lix = d.layers.indexOf(li);
    const cards = await page.$$eval('#compare-grid .cmp-card', c => c.map(x => x.dataset.measure));
    assert.deepEqual(cards, ['attention', 'norm', 'alti', 'rollout']);
    assert.deepEqual(await page.$$eval('#compare-grid .cmp-card.chosen', c => c.map(x => x.dataset.measure)), ['norm']);
    const bars = () => page.$$eval('#compare-grid .cmp-card', cs => cs.map(c => ({
      m: c.dataset.measure, cap: c.querySelector('.cmp-cap').textContent, q: c.querySelector('.cmp-q').textContent,
      keys: Array.from(c.querySelectorAll('.cmp-bar')).map(b => [Number(b.dataset.key), Number(b.title.split(' — ')[1])]) })));
    const check = async (q, hi) => {
      for (const p of await bars()) {
        assert.ok(p.q.startsWith('query ' + q + ' '), p.q);
        assert.ok(p.keys.length > 0 && p.keys.length <= d.tokens.length, `${p.m}: ${p.keys.length} bars`);
        const row = want(d, p.m, lix, hi)[q];
        for (const [j, v] of p.keys) assert.ok(Math.abs(v - row[j]) <= TOL + 5e-5, `${p.m} q${q} k${j}: ${v} vs ${row[j]}`);
        if (p.m === 'alti' || p.m === 'rollout') assert.match(p.cap, /every head/);
        else assert.match(p.cap, new RegExp('^head ' + d.heads[hi] + ' '));
      }
    };
    const n = d.tokens.length;
    const [q0, focus] = await page.evaluate(() => [window.attnviz.state.query, window.attnviz.state.focus]);
    await check(q0, focus);
    /* a matrix row picks the query: the 3rd row of ALTI's matrix */
    const box = await page.$eval('#compare-grid [data-measure=alti] canvas', c => { const r = c.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; });
    await clickAndRender(page, '#compare-grid [data-measure=alti] canvas', { position: { x: box[2] / 2, y: (2.5 / n) * box[3] } });
    await check(2, focus);
    /* a head chip picks the head the per-head panels draw */
    await clickAndRender(page, '#head-chips .head-chip[data-h="2"]');
    await check(2, 2);
    /* a panel chooses its measure (the other views draw it) */
    await clickAndRender(page, '#compare-grid [data-measure=rollout] .cmp-head');
    assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'rollout');
    assert.deepEqual(await page.$$eval('#compare-grid .cmp-card.chosen', c => c.map(x => x.dataset.measure)), ['rollout']);
    assert.equal(await page.evaluate(() => document.body.classList.contains('per-layer-measure')), false, 'the chips stay');
    clean(log);
  } finally { await page.close(); }
  const plain = await openPage(browser.ctx, pages.plain.html);
  try {
    assert.equal(await plain.page.$('#tab-compare'), null, 'no Compare tab without measures');
    clean(plain.log);
  } finally { await plain.page.close(); }
});

test('a vision encoder\'s page: the Image view under rollout and ALTI is the JSON\'s; Compare draws the tower\'s measures', async () => {
  for (const theme of ['light', 'dark']) {
    const { page, log } = await openPage(browser.ctx, pages.vit.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      const d = pages.vit.data();
      assert.deepEqual(await page.evaluate(() => window.attnviz.data.measures), ['attention', 'rollout', 'alti']);
      assert.equal(await page.evaluate(() => document.body.dataset.view), 'image');
      assert.equal(await page.evaluate(() => window.attnviz.data.measure), 'rollout');
      const li = d.layers.length - 1;
      near(await shownMatrix(page, li, 0), d.rollout[li], 'rollout');
      const err = await page.$eval('#view-image', el => (el.querySelector('.empty') || {}).textContent || '');
      assert.ok(!/Could not draw/.test(err), err);
      await page.screenshot({ path: path.join(SHOTS, `compare-vit-rollout-${theme}.png`) });
      await clickAndRender(page, '#tab-compare');
      assert.deepEqual(await page.$$eval('#compare-grid .cmp-card', c => c.map(x => x.dataset.measure)), ['attention', 'rollout', 'alti']);
      await page.screenshot({ path: path.join(SHOTS, `compare-vit-${theme}.png`) });
      clean(log);
    } finally { await page.close(); }
  }
});

for (const theme of ['light', 'dark']) {
  test(`Compare and the head view under each measure, ${theme} theme (screenshots)`, async () => {
    const { page, log } = await openPage(browser.ctx, pages.llama.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      await clickAndRender(page, '#tab-compare');
      await settle(page);
      const err = await page.$eval('#view-compare', el => (el.querySelector('.empty') || {}).textContent || '');
      assert.ok(!/Could not draw/.test(err), err);
      await page.screenshot({ path: path.join(SHOTS, `compare-${theme}.png`) });
      await clickAndRender(page, '#tab-head');
      await page.screenshot({ path: path.join(SHOTS, `compare-head-norm-${theme}.png`) });
      clean(log);
    } finally { await page.close(); }
    /* a trained model (SmolLM2), --measure all, opened on Compare at layer 5, head 1, the last query */
    const s = await openPage(browser.ctx, pages.smol.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      assert.equal(await s.page.evaluate(() => document.body.dataset.view), 'compare');
      assert.deepEqual(await s.page.$$eval('#compare-grid .cmp-card', c => c.map(x => x.dataset.measure)), ['attention', 'norm', 'alti', 'rollout']);
      await s.page.evaluate(() => { const A = window.attnviz; A.state.focus = 1; A.state.query = A.data.n - 1; return A.setLayer(5); });
      await settle(s.page);
      await s.page.screenshot({ path: path.join(SHOTS, `compare-smol-${theme}.png`) });
      clean(s.log);
    } finally { await s.page.close(); }
  });
}
