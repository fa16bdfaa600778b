// ModernBERT pages: tests/data/small-modernbert (3 layers: a global one, then two local ones whose
// window reaches 2 tokens each way, |i - j| <= 2), run by attnviz. The header and notes name the local
// window both ways; the page's mask covers exactly the keys 3 or more tokens before or after the
// query in the local layers (and none in the global one), the data there is 0; the matrix view hatches
// them on both sides. Screenshots of the matrix view in both themes (tests/browser/screenshots).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { ROOT, OUT, SHOTS, ATTNVIZ, launch, openPage, settle, clean, ensureBuilt } from './lib.mjs';

let browser, html, json;
before(async () => {
  ensureBuilt();
  html = path.join(OUT, 'modernbert.html');
  json = path.join(OUT, 'modernbert.json');
  execFileSync(ATTNVIZ, ['--model', path.join(ROOT, 'tests/data/small-modernbert'), '--quiet', '--layer', '1', '--html', html,
    '--json', json, 'the cat sat in the sun and the dog sat there'], { stdio: ['ignore', 'pipe', 'pipe'] });
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

test('modernbert page: the local window named both ways; keys outside it masked, zero and hatched on both sides', async () => {
  for (const theme of ['light', 'dark']) {
    const { page, log } = await openPage(browser.ctx, html, { theme });
    try {
      await settle(page);
      assert.match(await page.textContent('#model-config'), /local window ±2 \(layers 1, 2\)/);
      assert.match(await page.textContent('#notes'), /at most 2 before or after it/);
      const r = await page.evaluate(() => {
        const D = window.attnviz.data, n = D.n, out = { n, masked: [0, 0, 0], open: [0, 0, 0], nonzeroMasked: 0, wrong: 0 };
        for (let li = 0; li < 3; li++) {
          const a = D.headMatrix(li, 0);
          for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
            const m = D.masked(i, j, li);
            if (m !== (li > 0 && Math.abs(i - j) >= 3)) out.wrong++;
            if (m) { out.masked[li]++; if (a[i * n + j] !== 0) out.nonzeroMasked++; } else out.open[li]++;
          }
        }
        return out;
      });
      const n = JSON.parse(fs.readFileSync(json, 'utf8')).tokens.length;
      const seen = Array.from({ length: n }, (_, i) => Math.min(i + 2, n - 1) - Math.max(i - 2, 0) + 1).reduce((s, x) => s + x, 0);
      assert.equal(r.n, n);
      assert.equal(r.wrong, 0);
      assert.deepEqual(r.open, [n * n, seen, seen]);
      assert.equal(r.nonzeroMasked, 0);
      /* matrix view: subtitle and legend say so; hatched cells on both sides of the diagonal */
      await page.keyboard.press('4');
      await settle(page);
      const text = await page.textContent('#view-matrix');
      assert.match(text, /3 or more tokens before or after its query: this layer's local window/);
      assert.match(text, /outside this layer's local window, ±2/);
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, `modernbert-matrix-local-${theme}.png`), fullPage: false });
      clean(log);
    } finally { await page.close(); }
  }
});
