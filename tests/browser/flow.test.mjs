// flow.test.mjs — the Flow view (templates/view_flow.js) on pages written by ./attnviz with
// tests/data/small-llama --flow: the drawn token pairs and MLP squares are the JSON's, the
// threshold control prunes them as attnviz traces (checked against a trace of the JSON here),
// hostile text shown as text, the tab disabled without the data, screenshots in both themes
// (tests/browser/screenshots).
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, SHOTS, cliPage, launch, openPage, settle, clean } from './lib.mjs';

const LLAMA = path.join(ROOT, 'tests/data/small-llama');
const INJECT = 'hello <img src=x onerror=alert(1)> world, the cat sat on the mat';
let browser;
const pages = {};
before(async () => {
  pages.flow = cliPage('flow', ['--model', LLAMA, '--flow', '0.02', INJECT]);
  pages.plain = cliPage('flow-plain', ['--model', LLAMA, 'hello world']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function go(page, view) {
  const prev = await page.evaluate(() => document.body.dataset.rendered);
  await page.click('#tab-' + view);
  await page.waitForFunction(p => document.body.dataset.rendered !== p, prev);
  await settle(page);
}

/* the pairs and MLPs kept at threshold t, traced from the JSON's edges independently of the page */
function expected(flow, t) {
  const sum = new Map(), mlp = new Map();
  for (const e of flow.edges) {
    if (e.kind === 'mlp') mlp.set(e.layer + ',' + e.to, e.weight);
    else {
      const k = e.layer + ',' + e.from + ',' + e.to;
      sum.set(k, (sum.get(k) || 0) + e.weight);
    }
  }
  const pairs = [], mlps = [];
  let act = new Set([flow.position]);
  for (let l = flow.layers[1]; l >= flow.layers[0]; l--) {
    const next = new Set();
    for (const i of act) {
      const m = mlp.get(l + ',' + i) || 0;
      if (m > t) mlps.push(l + ',' + i);
      if (!(m > t || 1 - m > t)) continue;
      for (const [k, w] of sum) {
        const [kl, j, ki] = k.split(',').map(Number);
        if (kl === l && ki === i && w > t) { pairs.push(`layer ${l}: token ${j} → ${i} ${w.toFixed(3)}`); next.add(j); }
      }
    }
    act = next;
  }
  return { pairs: pairs.sort(), mlps };
}

const drawn = page => page.$$eval('#view-flow line.flow-edge title', ts => ts.map(t => t.textContent.split('\n')[0]).sort());

test('the flow graph is the JSON, and the threshold prunes it as attnviz traces', async () => {
  const d = pages.flow.data();
  assert.ok(d.flow && d.flow.edges.length > 0 && d.flow.threshold === 0.02 && d.flow.position === d.tokens.length - 1);
  const { page, log } = await openPage(browser.ctx, pages.flow.html);
  try {
    await go(page, 'flow');
    const want = expected(d.flow, 0.02);
    assert.deepEqual(await drawn(page), want.pairs);
    assert.equal(await page.$$eval('#view-flow rect.flow-mlp', x => x.length), want.mlps.length);
    /* every listed pair is drawn at the run's threshold */
    const listed = new Set(d.flow.edges.filter(e => e.kind !== 'mlp').map(e => e.layer + ',' + e.from + ',' + e.to));
    assert.equal(want.pairs.length, listed.size);
    for (const t of [0.1, 0.3]) {
      await page.$eval('#view-flow input[type=range]', (r, v) => { r.value = String(v); r.dispatchEvent(new Event('input')); }, t);
      const w = expected(d.flow, t);
      assert.deepEqual(await drawn(page), w.pairs, 'threshold ' + t);
      assert.ok(w.pairs.length < want.pairs.length);
    }
    /* the input's markup is text: no <img> was made */
    assert.equal(await page.$$eval('img', x => x.length), 0);
    clean(log);
  } finally { await page.close(); }
});

test('a page without the data disables the Flow tab', async () => {
  const { page, log } = await openPage(browser.ctx, pages.plain.html);
  try {
    assert.ok(await page.$eval('#tab-flow', b => b.disabled));
    clean(log);
  } finally { await page.close(); }
});

for (const theme of ['light', 'dark']) {
  test('screenshots, ' + theme + ' theme', async () => {
    const { page, log } = await openPage(browser.ctx, pages.flow.html, { theme });
    try {
      await go(page, 'flow');
      await page.screenshot({ path: path.join(SHOTS, 'flow-' + theme + '.png'), fullPage: true });
      clean(log);
    } finally { await page.close(); }
  });
}
