// heads.test.mjs — the model view's "Find heads" panel (templates/heads.js):
// the page's per-head scores of its input equal `attnviz heads` on that input
// (the page holds the attention rounded to 4 decimals), the panel ranks and
// shades the thumbnails in the command's order, a click opens the head; and
// screenshots of the panel in both themes (tests/browser/screenshots/).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ATTNVIZ, DEMO, OUT, SHOTS, cliPage, launch, openPage, settle } from './lib.mjs';

const A = 'the cat sat on the mat and the cat', B = 'the cat was tired';
let browser, page, ref;
before(async () => {
  page = cliPage('heads-demo', [A, B]);
  const json = path.join(OUT, 'heads-demo.heads.json');
  execFileSync(ATTNVIZ, ['heads', '--model', DEMO, '--quiet', '--top', '24', '--json', json, A, B]);
  ref = JSON.parse(fs.readFileSync(json, 'utf8'));
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function modelView(p) {
  await p.click('#tab-model');
  await p.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
  await settle(p);
}

/* The page holds each weight rounded to 4 decimals (error <= 5e-5). A share score moves by at most
 * about that: within 1e-4. Distance weighs each error by |i - j|: at most 5e-5 * n(n-1)/2 in row 0.
 * Entropy: -p ln p is steep near 0 (a weight under 5e-5 read as 0 drops up to 5e-4): n * 5e-4. */
const bound = (k, n) => (k === 'distance' ? 5e-5 * n * (n - 1) / 2 : k === 'entropy' ? n * 5e-4 : 1e-4);
test('the page computes every score of attnviz heads (but induction, on random sequences): shares within 1e-4', async () => {
  const { page: p, log } = await openPage(browser.ctx, page.html);
  const names = await p.evaluate(() => window.attnviz.heads.SCORES);
  const worst = {};
  for (const k of ref.scores.filter(k => k !== 'induction')) {
    assert.ok(names.includes(k), k);
    const got = await p.evaluate(async k => Array.from(await window.attnviz.heads.scores(k)), k);
    worst[k] = 0;
    for (const h of ref.heads) {
      const v = got[h.layer * 12 + h.head];
      worst[k] = Math.max(worst[k], Math.abs(v - h[k]));
    }
    const n = await p.evaluate(() => window.attnviz.data.n);
    assert.ok(worst[k] <= bound(k, n), `${k}: max |page - attnviz heads| = ${worst[k]} > ${bound(k, n)}`);
  }
  console.log('max |page - attnviz heads|: ' + Object.entries(worst).map(([k, v]) => k + ' ' + v.toExponential(1)).join(', '));
  assert.deepEqual(log.errors, []);
  assert.deepEqual(log.blocked, []);
  await p.close();
});

test('picking a score ranks and shades the thumbnails in the command\'s order; a click opens the head', async () => {
  const { page: p, log } = await openPage(browser.ctx, page.html);
  await modelView(p);
  assert.equal(await p.isVisible('#ctl-find'), true);
  await p.selectOption('#find-select', 'previous');
  await p.waitForFunction(() => document.getElementById('ctl-find').dataset.ready === 'previous');
  const listed = await p.$$eval('.find-pick', bs => bs.map(b => b.textContent.split(' ')[0]));
  /* the demo's two previous-token heads first (their scores tie to 4 decimals) */
  assert.deepEqual(new Set(listed.slice(0, 2)), new Set(['L0·H8', 'L1·H3']));
  const ranks = await p.$$eval('.mv .thumb', bs => bs.map(b => [+b.dataset.li, +b.dataset.h, +b.dataset.rank,
    parseFloat(getComputedStyle(b).opacity)]));
  assert.equal(ranks.length, 24);
  const byRank = ranks.slice().sort((a, b) => a[2] - b[2]);
  assert.deepEqual(byRank.map(r => r[2]), Array.from({ length: 24 }, (_, i) => i + 1));
  /* the command's order wherever its scores differ by more than the page's rounding */
  const refScore = Object.fromEntries(ref.heads.map(h => [h.layer + '.' + h.head, h.previous]));
  for (let a = 0; a < 24; a++)
    for (let b = a + 1; b < 24; b++) {
      const sa = refScore[byRank[a][0] + '.' + byRank[a][1]], sb = refScore[byRank[b][0] + '.' + byRank[b][1]];
      assert.ok(sa >= sb - 2e-4, `rank ${a + 1} (${sa}) below rank ${b + 1} (${sb})`);
    }
  /* shading: the best head is opaque, the worst dim */
  assert.ok(byRank[0][3] > 0.99 && byRank[23][3] < 0.3, JSON.stringify([byRank[0], byRank[23]]));
  await p.click('.find-pick >> nth=0');
  await p.waitForFunction(() => document.getElementById('modal').dataset.drawn === '1');
  const title = await p.textContent('#modal-title');
  const [l, h] = listed[0].slice(1).split('·H');
  assert.ok(title.startsWith('Layer ' + l + ' · head ' + h), title);
  await p.click('#modal-close');
  /* another score, and the thumbnails follow */
  await p.selectOption('#find-select', 'first');
  await p.waitForFunction(() => document.getElementById('ctl-find').dataset.ready === 'first');
  const first = await p.$$eval('.find-pick', bs => bs.map(b => b.textContent.split(' ')[0]));
  assert.deepEqual(new Set(first.slice(0, 2)), new Set(['L0·H2', 'L1·H6']));
  /* other views hide the panel */
  await p.click('#tab-head');
  await settle(p);
  assert.equal(await p.isVisible('#ctl-find'), false);
  assert.deepEqual(log.errors, []);
  await p.close();
});

for (const theme of ['light', 'dark']) {
  test('screenshot of the panel, ' + theme + ' theme', async () => {
    const { page: p, log } = await openPage(browser.ctx, page.html, { theme });
    await modelView(p);
    await p.selectOption('#find-select', 'duplicate');
    await p.waitForFunction(() => document.getElementById('ctl-find').dataset.ready === 'duplicate');
    await settle(p);
    await p.screenshot({ path: path.join(SHOTS, 'heads-find-' + theme + '.png'), fullPage: true });
    assert.deepEqual(log.errors, []);
    await p.close();
  });
}
