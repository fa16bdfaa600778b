// long.test.mjs — a long input in `attnviz serve` (past --long-from; here 512
// so that a synthetic 2-layer Llama at ~3,000 tokens is one): the page never
// fetches a whole matrix; the matrix view draws the head from max-pooled tiles
// and fetches the next tile as it zooms and pans (each tile checked against
// the server's own /api/tile bytes); clicking a row gives that query's exact
// row (checked against /api/row); the head view steps through queries; Find
// heads ranks from the streamed statistics; screenshots in both themes. The
// server is killed on every exit path. Times printed are informal (loaded
// machine).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ATTNVIZ, OUT, ROOT, SHOTS, clean, ensureBuilt, launch, openPage, settle, startServe } from './lib.mjs';

let srv = null, url = null, browser = null;

function llama4k() {
  const dir = path.join(OUT, 'llama4k-long'), src = path.join(ROOT, 'tests/data/small-llama');
  fs.mkdirSync(dir, { recursive: true });
  const cfg = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'));
  cfg.max_position_embeddings = 4096;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  for (const f of ['model.safetensors', 'tokenizer.json']) fs.copyFileSync(path.join(src, f), path.join(dir, f));
  return dir;
}

before(async () => {
  ensureBuilt();
  srv = await startServe(['--model', llama4k(), '--long-from', '512']);
  url = srv.url;
  browser = await launch();
});
after(async () => {
  if (browser) await browser.close();
  await srv?.stop();
});

async function openLive(theme) {
  const page = await browser.ctx.newPage();
  await page.emulateMedia({ colorScheme: theme });
  const origin = new URL(url).origin;
  const log = { requests: [], foreign: [], console: [], errors: [] };
  page.on('request', r => {
    const u = r.url();
    log.requests.push(r.method() + ' ' + u.replace(/token=[0-9a-f]+/, 'token=…'));
    if (!u.startsWith(origin + '/') && !u.startsWith('blob:')) log.foreign.push(u);
  });
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e && e.message ? e.message : e)));
  await page.goto(url);
  await page.waitForSelector('#live', { state: 'visible' });
  return { page, log };
}

/* "the cat. " is 6 tokens of this tokenizer, <s> one, "the" one */
const TEXT = 'the cat. '.repeat(500) + 'the';
const N = 3002;

async function run(page) {
  const prev = +(await page.evaluate(() => document.body.dataset.runs || 0));
  await page.fill('#live-text', TEXT);
  await page.waitForFunction(p => +(document.body.dataset.runs || 0) > p && document.body.dataset.busy !== '1' &&
    document.body.dataset.ready === '1', prev, { timeout: 120000 });
  await settle(page);
  assert.match(await page.textContent('#live-status'), new RegExp(N + ' tokens'));
}

/* the tile the page shows, as the server sends it (codes), fetched here */
async function serverTile(page, level, r, c, head) {
  return page.evaluate(async ([L, tr, tc, h]) => {
    const run = document.body.dataset.run, tok = new URLSearchParams(location.search).get('token');
    const res = await fetch('/api/tile?run=' + run + '&layer=' + document.body.dataset.layer + '&head=' + h + '&level=' + L + '&row=' + tr + '&col=' + tc,
      { headers: { 'X-Attnviz-Token': tok } });
    const shape = res.headers.get('X-Attnviz-Shape').split(',').map(Number);
    const z = new Uint8Array(await res.arrayBuffer());
    const raw = new Uint8Array(await new Response(new Blob([z]).stream().pipeThrough(new DecompressionStream('deflate'))).arrayBuffer());
    const k = raw.length >> 1;
    let mx = 0;
    for (let i = 0; i < k; i++) mx = Math.max(mx, raw[i] | raw[k + i] << 8);
    return { rows: shape[0], cols: shape[1], max: mx };
  }, [level, r, c, head]);
}

const tilesReady = (page, v) => page.waitForFunction(want => (document.getElementById('view-matrix').dataset.tilesReady || '') === want, v, { timeout: 60000 })
  .catch(async err => {
    throw new Error(err.message + ': the view shows ' + JSON.stringify((await page.textContent('#view-matrix')).slice(300, 800)) +
      ' (ready ' + (await page.$eval('#view-matrix', e => e.dataset.tilesReady)) + ')');
  });

for (const theme of (process.env.LONG_THEMES || 'light,dark').split(',')) {
  test('a ' + N + '-token input (' + theme + '): tiles as the matrix view zooms, exact rows, no whole matrix fetched', async () => {
    const { page, log } = await openLive(theme);
    try {
      const t0 = Date.now();
      await run(page);
      console.log('# ' + N + ' tokens: run and first view in ' + (Date.now() - t0) + ' ms (informal)');
      const geo = await page.evaluate(() => window.attnviz && window.attnviz.data.meta.tiles);
      assert.deepEqual(geo && [geo.long, geo.side, geo.levels, geo.stats], [true, 256, 5, true]);

      /* the head view: one head, one query's exact row */
      await page.waitForFunction(() => !!document.querySelector('#view-head .tile-row[data-query]'), null, { timeout: 60000 });
      const q0 = +(await page.$eval('#view-head .tile-row', e => e.dataset.query));
      await page.click('#view-head .tile-row button[title="The query before"]');
      await page.waitForFunction(q => +(document.querySelector('#view-head .tile-row') || {}).dataset.query === q - 1, q0, { timeout: 30000 });
      await page.click('#view-head .tile-row button[title="The last token"]');
      await page.waitForFunction(n => +(document.querySelector('#view-head .tile-row') || {}).dataset.query === n - 1, N, { timeout: 30000 });
      /* the listed heaviest key is the row's maximum, as /api/row gives it */
      const [shownW, shownPos] = await page.$eval('#view-head .tile-key', e => [e.querySelector('.tile-w').textContent, e.querySelector('.tile-pos').textContent]);
      const best = await page.evaluate(async q => {
        const tok = new URLSearchParams(location.search).get('token');
        const r = await fetch('/api/row?run=' + document.body.dataset.run + '&layer=' + document.body.dataset.layer + '&head=' +
          window.attnviz.state.focus + '&query=' + q, { headers: { 'X-Attnviz-Token': tok } });
        const f = new Float32Array(await r.arrayBuffer());
        let j = 0;
        for (let k = 1; k < f.length; k++) if (f[k] > f[j]) j = k;
        return [f[j].toFixed(4), j.toLocaleString('en-US'), f.length];
      }, N - 1);
      assert.deepEqual([shownW, shownPos, best[2]], [best[0], best[1], N]);
      if (theme === 'dark') await page.screenshot({ path: path.join(SHOTS, 'serve-long-head-dark.png') });

      /* the matrix view: level 0 from the pass's overview */
      let s = Date.now();
      await page.click('#tab-matrix');
      await tilesReady(page, '0:0:0');
      console.log('# ' + N + ' tokens: matrix view (level 0) in ' + (Date.now() - s) + ' ms (informal)');
      assert.match(await page.textContent('#view-matrix .mx-where'), /^level 0 of 4 · query rows 0–3,001, key columns 0–3,001 of 3,002 × 3,002/);
      const h = await page.evaluate(() => window.attnviz.state.focus);
      const t00 = await serverTile(page, 0, 0, 0, h);
      assert.deepEqual([t00.rows, t00.cols], [256, 256]);
      assert.equal(await page.$eval('#view-matrix .tiles canvas + canvas', e => e.dataset.rows + 'x' + e.dataset.cols), '256x256');
      /* zoom: a double-click in the lower left quarter opens level 1's tile (1, 0) */
      s = Date.now();
      const box = await page.$eval('#view-matrix .tiles canvas + canvas', e => ({ labW: +e.dataset.labw, labH: +e.dataset.labh, cell: +e.dataset.cell }));
      await page.dblclick('#view-matrix .tiles canvas + canvas', { position: { x: box.labW + 60 * box.cell, y: box.labH + 200 * box.cell } });
      await tilesReady(page, '1:1:0');
      console.log('# ' + N + ' tokens: first zoomed tile (level 1) in ' + (Date.now() - s) + ' ms (informal)');
      s = Date.now();
      await page.click('#view-matrix .mx-zoom button[title^="Zoom in"]');
      await tilesReady(page, '2:3:1');
      console.log('# ' + N + ' tokens: level 2 in ' + (Date.now() - s) + ' ms (informal)');
      assert.match(await page.textContent('#view-matrix .mx-where'), /^level 2 of 4 · query rows 2,2\d\d–3,001, key columns 75\d–1,50\d of 3,002 × 3,002 · a cell: ~2\.9 × ~2\.9 tokens$/);
      await page.click('#view-matrix .mx-zoom button[title="Earlier keys"]');
      await tilesReady(page, '2:3:0');
      /* the drawn tile is the server's: its largest cell is the largest in the page's codes */
      const t30 = await serverTile(page, 2, 3, 0, h);
      assert.equal(await page.$eval('#view-matrix .tiles canvas + canvas', e => e.dataset.rows + 'x' + e.dataset.cols), t30.rows + 'x' + t30.cols);
      assert.ok(t30.max > 0);
      /* a click on a row: that query's exact row under the map */
      await page.click('#view-matrix .tiles canvas + canvas', { position: { x: box.labW + 10, y: box.labH + 100 * box.cell } });
      await page.waitForFunction(() => !!document.querySelector('#view-matrix .tile-row[data-query]'), null, { timeout: 30000 });
      const q = +(await page.$eval('#view-matrix .tile-row', e => e.dataset.query));
      assert.ok(q >= 2251 && q <= 3001, 'query ' + q);
      const keys = await page.$$eval('#view-matrix .tile-key', els => els.length);
      assert.equal(keys, 12);
      await page.mouse.move(1, 1); /* no tooltip in the pictures */
      await settle(page);
      await page.screenshot({ path: path.join(SHOTS, 'serve-long-matrix-' + theme + '.png'), fullPage: true });
      await page.locator('#view-matrix').screenshot({ path: path.join(SHOTS, 'serve-long-' + theme + '.png') });

      /* the model view: Find heads from the streamed statistics */
      await page.click('#tab-model');
      await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1', null, { timeout: 60000 });
      assert.equal(await page.$eval('#find-select option[value="induction"]', o => o.disabled), true);
      await page.selectOption('#find-select', 'previous');
      await page.waitForFunction(() => document.querySelector('#ctl-find').dataset.ready === 'previous', null, { timeout: 30000 });
      assert.equal(await page.$$eval('#ctl-find .find-pick', els => els.length), 5);

      /* nothing ever asked for a whole matrix */
      assert.deepEqual(log.requests.filter(r => r.includes('/api/attention')), []);
      assert.ok(log.requests.some(r => r.includes('/api/tile?')) && log.requests.some(r => r.includes('/api/row?')) &&
        log.requests.some(r => r.includes('/api/headstats?')));
      assert.deepEqual(log.errors, [], 'page errors');
      assert.deepEqual(log.console, [], 'console errors/warnings');
      assert.deepEqual(log.foreign, [], 'requests to anything but the server');
    } finally { await page.close(); }
  });
}

test('Download page of a long input: zoom levels and heaviest keys, size bounded by them and stated; works offline', async () => {
  const { page, log } = await openLive('light');
  let off = null;
  try {
    await run(page);
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 120000 }), page.click('#live-download')]);
    const file = path.join(OUT, 'served-long-offline.html');
    await dl.saveAs(file);
    const html = fs.readFileSync(file, 'utf8');
    assert.ok(!/connect-src/.test(html), 'the offline page allows no connections');
    const meta = JSON.parse(/<script type="application\/json" id="av-meta">([^<]*)<\/script>/.exec(html)[1]);
    const tl = meta.tiles, L = meta.config.layers, H = meta.config.heads;
    /* the bound: L·H·(ΣG² + 2·n·K) codes of 2 bytes before compression; compressed and in base 85 (5/4) the
     * chunks can only be smaller, and the rest of the page (templates, meta) does not grow with n² */
    assert.deepEqual([tl.embedded, tl.grids, tl.top_k], [2, [256, 512], 8]);
    const codes = L * H * (256 * 256 + 512 * 512 + 2 * N * 8);
    assert.equal(tl.codes, codes);
    const chunks = [...html.matchAll(/<script type="application\/octet-stream" id="(av-[a-z]+-[\d-]+)" data-z="(\d+)">([^<]*)<\/script>/g)];
    assert.deepEqual(chunks.map(c => c[1]).sort(), ['av-tile-0-0', 'av-tile-0-1', 'av-tile-1-0', 'av-tile-1-1', 'av-top-0', 'av-top-1']);
    const zsum = chunks.reduce((a, c) => a + +c[2], 0);
    assert.equal(tl.zbytes, zsum);
    assert.ok(zsum <= 2 * codes + 64 * chunks.length, 'compressed ' + zsum + ' > raw ' + 2 * codes);
    const rest = html.length - chunks.reduce((a, c) => a + c[3].length, 0);
    assert.ok(rest < 1.5e6 + 20 * N, 'the page without its chunks is ' + rest + ' bytes');
    console.log('# ' + N + ' tokens: offline page ' + (html.length / 1e6).toFixed(2) + ' MB (bound ' + (2 * codes * 1.25 / 1e6 + rest / 1e6).toFixed(2) +
      ' MB; the whole attention would be ' + (2 * L * H * N * N / 1e6).toFixed(0) + ' MB)');

    /* the server's exact row of the last query, to compare with the keys the page keeps */
    const h0 = await page.evaluate(() => window.attnviz.state.focus);
    const exact = await page.evaluate(async ([q, h]) => {
      const tok = new URLSearchParams(location.search).get('token');
      const r = await fetch('/api/row?run=' + document.body.dataset.run + '&layer=0&head=' + h + '&query=' + q, { headers: { 'X-Attnviz-Token': tok } });
      return Array.from(new Float32Array(await r.arrayBuffer()));
    }, [N - 1, h0]);
    await browser.ctx.setOffline(true);
    off = await openPage(browser.ctx, file);
    assert.equal(await off.page.evaluate(() => window.attnviz.state.focus), h0);
    clean(off.log);
    const ready = v => off.page.waitForFunction(want => (document.getElementById('view-matrix').dataset.tilesReady || '') === want, v, { timeout: 30000 });
    /* the head view: the query's heaviest keys, from the page */
    await off.page.waitForFunction(() => !!document.querySelector('#view-head .tile-row[data-query]'), null, { timeout: 30000 });
    assert.match(await off.page.textContent('#view-head .view-title'), /This page keeps, for each of the 2 × 4 heads, zoom levels 0–1 \(256² \+ 512² cells\) and each query's 8 heaviest keys: L·H·\(ΣG² \+ 2·n·K\) = 2·4·\(327,680 \+ 2·3,002·8\) = 3,005,696 16-bit codes/);
    assert.ok((await off.page.$$eval('#view-head .tile-key', els => els.length)) >= 1);
    if ((await off.page.$eval('#view-head .tile-row', e => +e.dataset.query)) !== N - 1) await off.page.click('#view-head .tile-row button[title="The last token"]');
    await off.page.waitForFunction(n => +(document.querySelector('#view-head .tile-row') || {}).dataset.query === n - 1, N, { timeout: 30000 });
    const shown = await off.page.$$eval('#view-head .tile-key', els => els.map(e => [e.querySelector('.tile-pos').textContent.replace(/,/g, ''), e.querySelector('.tile-w').textContent]));
    {
      const order = exact.map((w, j) => [j, w]).sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, shown.length);
      assert.deepEqual(shown.map(x => x[1]), order.map(x => x[1].toFixed(4)), 'the kept keys are the row\'s heaviest');
    }
    /* the matrix view: level 0, then level 1 from the page; level 2 is the server's */
    await off.page.click('#tab-matrix');
    await ready('0:0:0');
    const box = await off.page.$eval('#view-matrix .tiles canvas + canvas', e => ({ labW: +e.dataset.labw, labH: +e.dataset.labh, cell: +e.dataset.cell }));
    await off.page.dblclick('#view-matrix .tiles canvas + canvas', { position: { x: box.labW + 60 * box.cell, y: box.labH + 200 * box.cell } });
    await ready('1:1:0');
    assert.equal(await off.page.$eval('#view-matrix .mx-zoom button[title^="Deeper levels need attnviz serve"]', b => b.disabled), true);
    await settle(off.page);
    await off.page.screenshot({ path: path.join(SHOTS, 'serve-long-offline-light.png'), fullPage: true });
    /* the model view from level 0, Find heads from the kept statistics */
    await off.page.click('#tab-model');
    await off.page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1', null, { timeout: 30000 });
    await off.page.selectOption('#find-select', 'entropy');
    await off.page.waitForFunction(() => document.querySelector('#ctl-find').dataset.ready === 'entropy', null, { timeout: 30000 });
    clean(off.log);
    assert.deepEqual(log.errors, [], 'page errors');
  } finally {
    await browser.ctx.setOffline(false);
    if (off) await off.page.close();
    await page.close();
  }
});

test("The command line's own page of the long input (--html past --long-from): the Download page's bytes, offline, level 0 first", async () => {
  const file = path.join(OUT, 'cli-long-offline.html');
  const t0 = Date.now();
  const r = spawnSync(ATTNVIZ, ['--model', path.join(OUT, 'llama4k-long'), '--long-from', '512', '--html', file, TEXT], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, new RegExp('wrote .*: ' + N + ' tokens, past --long-from 512: a long input\'s page'));
  console.log('# the command line wrote the ' + N + '-token page in ' + (Date.now() - t0) + ' ms (informal)');
  const served = path.join(OUT, 'served-long-offline.html');
  if (fs.existsSync(served)) assert.ok(fs.readFileSync(file).equals(fs.readFileSync(served)), 'the same bytes as the Download page');
  const html = fs.readFileSync(file, 'utf8');
  assert.ok(!/connect-src/.test(html) && !/id="av-att-/.test(html), 'offline, and no whole matrix');
  await browser.ctx.setOffline(true);
  const off = await openPage(browser.ctx, file);
  try {
    await off.page.waitForFunction(() => !!document.querySelector('#view-head .tile-row[data-query]'), null, { timeout: 30000 });
    assert.match(await off.page.textContent('#view-head .view-title'), /This page keeps, for each of the 2 × 4 heads, zoom levels 0–1/);
    await off.page.click('#tab-matrix');
    await off.page.waitForFunction(() => (document.getElementById('view-matrix').dataset.tilesReady || '') === '0:0:0', null, { timeout: 30000 });
    clean(off.log);
  } finally {
    await browser.ctx.setOffline(false);
    await off.page.close();
  }
});
