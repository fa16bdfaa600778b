// Decoder pages: a Mistral-style checkpoint (tests/data/small-mistral, 4 query heads over 2 key/value
// heads, a 5-token sliding window in both layers) with small-llama's tokenizer.json, run by attnviz.
// The header and notes name the grouped heads and the window; the matrix view hatches the keys outside
// the window as masked, and they hold exactly 0; the sink toggle hides the first token.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { ROOT, OUT, ATTNVIZ, launch, openPage, settle, clean, ensureBuilt } from './lib.mjs';

let browser, html, json;
before(async () => {
  ensureBuilt();
  const dir = path.join(OUT, 'mistral-model');
  fs.mkdirSync(dir, { recursive: true });
  for (const f of ['config.json', 'model.safetensors']) fs.copyFileSync(path.join(ROOT, 'tests/data/small-mistral', f), path.join(dir, f));
  fs.copyFileSync(path.join(ROOT, 'tests/data/small-llama/tokenizer.json'), path.join(dir, 'tokenizer.json'));
  html = path.join(OUT, 'mistral.html');
  json = path.join(OUT, 'mistral.json');
  execFileSync(ATTNVIZ, ['--model', dir, '--quiet', '--html', html, '--json', json, 'the cat sat in the sun and the dog sat there'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

test('decoder page: grouped heads and the sliding window named; window-masked keys hatched and zero; sink toggle', async () => {
  const { page, log } = await openPage(browser.ctx, html);
  try {
    await settle(page);
    const cfg = await page.textContent('#model-config');
    assert.match(cfg, /2 key\/value heads \(grouped\)/);
    assert.match(cfg, /sliding window 5 \(layers 0, 1\)/);
    const notes = await page.textContent('#notes');
    assert.match(notes, /head h reads key\/value head 0→0 1→0 2→1 3→1/);
    assert.match(notes, /sees only the last 5 tokens/);
    assert.match(await page.textContent('#hide-special-label'), /Hide sink \(<s>\)/);
    /* the page's mask for layer 0 covers keys 5 or more tokens back, and the data there is 0 */
    const r = await page.evaluate(() => {
      const D = window.attnviz.data, n = D.n, out = { masked: 0, open: 0, nonzeroMasked: 0 };
      const a = D.headMatrix(0, 0);
      for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) {
        if (D.masked(i, j, 0)) { out.masked++; if (a[i * n + j] !== 0) out.nonzeroMasked++; } else out.open++;
      }
      return out;
    });
    const n = JSON.parse(fs.readFileSync(json, 'utf8')).tokens.length;
    assert.equal(r.open, Array.from({ length: n }, (_, i) => Math.min(i + 1, 5)).reduce((s, x) => s + x, 0));
    assert.ok(r.masked > 0);
    assert.equal(r.nonzeroMasked, 0);
    /* matrix view: the legend and subtitle say so */
    await page.keyboard.press('4');
    await settle(page);
    assert.match(await page.textContent('#view-host, main'), /outside this layer's 5-token window/);
    clean(log);
  } finally { await page.close(); }
});
