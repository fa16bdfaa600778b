// serve.test.mjs — `attnviz serve` end to end in Chromium: the live page
// (GET /) runs what is typed, its views read the server's attention, layers
// switch, a 2,048-token input's head opens (times printed, bounded only
// generously), "Download page" gives the offline page, which renders with the
// network blocked; screenshots of the live page in both themes. Models: the
// demo, a synthetic Llama (tests/data/small-llama with 4,096 positions: rotary,
// so only config.json changes) and, when cached, the SmolLM2 GGUF
// (ATTNVIZ_SMOLLM2_GGUF or tools/pymodel.sh smollm2) for predictions. The
// server is killed on every exit path. Shown weights are checked against the
// CLI's JSON for the same text (the server must draw what `attnviz --json` computes).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ATTNVIZ, DEMO, OUT, ROOT, SHOTS, clean, closeAll, ensureBuilt, launch, openPage, settle, startServe } from './lib.mjs';

let srv = null, url = null, browser = null, gguf = null;

/* the synthetic Llama with room for 4,096 tokens */
function llama4k() {
  const dir = path.join(OUT, 'llama4k'), src = path.join(ROOT, 'tests/data/small-llama');
  fs.mkdirSync(dir, { recursive: true });
  const cfg = JSON.parse(fs.readFileSync(path.join(src, 'config.json'), 'utf8'));
  cfg.max_position_embeddings = 4096;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  for (const f of ['model.safetensors', 'tokenizer.json']) fs.copyFileSync(path.join(src, f), path.join(dir, f));
  return dir;
}
function smollm2() {
  let f = process.env.ATTNVIZ_SMOLLM2_GGUF;
  if (!f) {
    try {
      f = path.join(execFileSync(path.join(ROOT, 'tools/pymodel.sh'), ['smollm2'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim(), 'SmolLM2-135M-Instruct.Q4_1.gguf');
    } catch { f = null; }
  }
  return f && fs.existsSync(f) ? f : null;
}

const LLAMA = 1; /* index of the synthetic Llama in the picker */
before(async () => {
  ensureBuilt();
  gguf = smollm2();
  const models = [DEMO, llama4k()];
  if (gguf) models.push(gguf);
  srv = await startServe(models.flatMap(m => ['--model', m]));
  url = srv.url;
  browser = await launch();
});
after(async () => {
  if (browser) await browser.close();
  await srv?.stop();
});

/* opens the live page, watching requests (all must go to the server) and console */
async function openLive(theme = 'light') {
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
  /* the panel is in the HTML; live.js shows it */
  await page.waitForSelector('#live', { state: 'visible' });
  return { page, log };
}
const cleanLive = log => {
  assert.deepEqual(log.errors, [], 'page errors');
  assert.deepEqual(log.console, [], 'console errors/warnings');
  assert.deepEqual(log.foreign, [], 'requests to anything but the server');
};
/* types into a field (as the user does: input events, debounced) and waits for the new run's first view */
async function typeRun(page, sel, text, { timeout = 60000 } = {}) {
  const prev = +(await page.evaluate(() => document.body.dataset.runs || 0));
  await page.fill(sel, text);
  await page.waitForFunction(p => +(document.body.dataset.runs || 0) > p && document.body.dataset.busy !== '1' &&
    document.body.dataset.ready === '1', prev, { timeout });
  await settle(page);
}
const cliJson = (model, args, name) => {
  const json = path.join(OUT, name + '.json');
  execFileSync(ATTNVIZ, ['--quiet', '--model', model, '--json', json, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(fs.readFileSync(json, 'utf8'));
};
const leftTokens = page => page.$$eval('#view-head .hv-left .tok .t', els => els.map(e => e.textContent));
const rightValues = page => page.$$eval('#view-head .hv-right .tok .v', els => els.map(e => e.textContent));

/* a page opens on every head; a test reading one head's weights shows head h alone (a double-click on its chip) */
async function headAlone(page, h) {
  await page.dblclick('#head-chips .head-chip[data-h="' + h + '"]');
  await page.waitForFunction(k => { const a = window.attnviz.state.active; return a.filter(Boolean).length === 1 && a[k] &&
    !!document.querySelector('#view-head .hv'); }, h);
  await settle(page);
}

test('live page: runs what is typed, every edit updates the views, layers switch, weights equal the CLI', async () => {
  const { page, log } = await openLive();
  try {
    assert.equal(await page.evaluate(() => document.body.dataset.live), 'empty');
    assert.match(await page.textContent('#live-status'), /Type a sentence/);
    assert.match(await page.textContent('#live-info'), /Layers\s*2/);
    assert.equal(await page.isVisible('#live-model'), true, 'several models: the picker shows');

    const text1 = 'The cat sat on the mat.';
    await typeRun(page, '#live-text', text1);
    const j1 = cliJson(DEMO, [text1], 'serve-cli1');
    assert.deepEqual(await leftTokens(page), j1.tokens);
    assert.match(await page.textContent('#live-status'), new RegExp(j1.tokens.length + ' tokens'));
    /* every head at first (as bertviz); head 0 alone of layer 0: the weights from token 2 */
    assert.equal(await page.evaluate(() => window.attnviz.state.active.every(Boolean)), true, 'every head at first');
    await headAlone(page, 0);
    await page.hover('#view-head .hv-left .tok[data-k="2"]');
    await settle(page);
    closeAll(await rightValues(page), j1.attention[0][0][2], 0.5e-4 + 2e-6, 'layer 0 head 0 row 2');

    /* an edit re-runs; a burst of keystrokes makes few runs and ends on the last text */
    const before = log.requests.filter(r => r.startsWith('POST')).length;
    const prevRuns = +(await page.evaluate(() => document.body.dataset.runs));
    await page.focus('#live-text');
    await page.keyboard.press('End');
    await page.keyboard.type(' It was very happy.', { delay: 25 });
    await page.waitForFunction(p => +document.body.dataset.runs > p && document.body.dataset.busy !== '1' && document.body.dataset.ready === '1', prevRuns);
    await settle(page);
    const text2 = text1 + ' It was very happy.';
    const posts = log.requests.filter(r => r.startsWith('POST')).length - before;
    console.log('# ' + ' It was very happy.'.length + ' keystrokes made ' + posts + ' run(s)');
    assert.ok(posts >= 1 && posts <= 4, posts + ' runs for one burst of typing');
    const j2 = cliJson(DEMO, [text2], 'serve-cli2');
    assert.deepEqual(await leftTokens(page), j2.tokens);

    /* layer 1, head 3 alone: values equal the CLI's */
    await page.click('#layer-next');
    await page.waitForFunction(() => document.body.dataset.layer === '1');
    await page.dblclick('#head-chips .head-chip[data-h="3"]');
    await settle(page);
    await page.waitForFunction(() => !document.querySelector('#view-head .empty'));
    await page.hover('#view-head .hv-left .tok[data-k="4"]');
    await settle(page);
    closeAll(await rightValues(page), j2.attention[1][3][4], 0.5e-4 + 2e-6, 'layer 1 head 3 row 4');
    /* only what was shown was fetched: no request for a head never selected in layer 1 */
    const att = log.requests.filter(r => r.includes('/api/attention'));
    assert.ok(att.every(r => /heads=\d+(,\d+)*&/.test(r) || /heads=\d+(,\d+)*$/.test(r)), att.join('\n'));

    /* sentence B re-runs as a pair */
    await typeRun(page, '#live-text-b', 'The dog barked.');
    const j3 = cliJson(DEMO, [text2, 'The dog barked.'], 'serve-cli3');
    assert.deepEqual(await leftTokens(page), j3.tokens);
    assert.equal(await page.evaluate(() => document.body.dataset.layer), '1', 'the layer stays across runs');

    /* the model view draws the server's thumbnails; the neuron view its q/k */
    await page.click('#tab-model');
    await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
    assert.ok(log.requests.some(r => r.includes('/api/thumbs')));
    /* Find heads scores every head: fetched from the server, the best five listed */
    await page.selectOption('#find-select', 'previous');
    await page.waitForFunction(() => document.getElementById('ctl-find').dataset.ready === 'previous');
    assert.equal(await page.$$eval('#ctl-find .find-pick', els => els.length), 5);
    await page.click('#tab-neuron');
    await page.waitForSelector('#view-neuron .nv-row');
    await settle(page);
    const qi = await page.$eval('#view-neuron', e => +e.dataset.query);
    const sm = await page.$$eval('#view-neuron .nv-row .nv-sm .val', els => els.map(e => e.textContent));
    closeAll(sm, j3.attention[1][3][qi], 0.5e-4 + 2e-6, 'neuron view softmax');
    assert.ok(log.requests.some(r => r.includes('/api/qk?layer=1&head=3')));

    /* past the model's 512 positions: the server's truncation warning shows */
    await typeRun(page, '#live-text', 'the cat sat. '.repeat(150));
    assert.equal(await page.$eval('#live-status', e => e.dataset.kind), 'warn');
    const warn = await page.textContent('#live-status .st-warn');
    console.log('# truncation warning: ' + warn);
    assert.match(warn, /512/);
    assert.match(await page.textContent('#live-status'), /512 tokens/);

    /* input text is only ever text */
    await typeRun(page, '#live-text', '<img src=x onerror=alert(1)> & "quotes"');
    assert.equal(await page.$$eval('img', els => els.length), 0);
    cleanLive(log);
  } finally { await page.close(); }
});

test('a 2,048-token input: its heads open in the matrix, modal and head views; the model view draws reduced thumbnails', async () => {
  const { page, log } = await openLive();
  try {
    await page.selectOption('#live-model', String(LLAMA));
    assert.match(await page.textContent('#live-info'), /Max tokens\s*4,096/);
    /* "the cat. " is 6 tokens of this tokenizer, "the" one, <s> one: 2,048 */
    const text = 'the cat. '.repeat(341) + 'the';
    const t0 = Date.now();
    await typeRun(page, '#live-text', text, { timeout: 120000 });
    console.log('# 2,048 tokens: run and first view (head view, every head) in ' + (Date.now() - t0) + ' ms (' + (await page.textContent('#live-status')) + ')');
    assert.match(await page.textContent('#live-status'), /2048 tokens/);
    /* 4 heads x 2,048^2 cells are within the live page's budget (page.js's LIVE_CELLS): every head, as offline */
    assert.equal(await page.evaluate(() => window.attnviz.state.active.filter(Boolean).length), 4, 'every head within the budget');

    const time = async (what, act, done) => {
      const s = Date.now();
      await act();
      await page.waitForFunction(done, null, { timeout: 60000 });
      await settle(page);
      const ms = Date.now() - s;
      console.log('# 2,048 tokens: ' + what + ' in ' + ms + ' ms');
      assert.ok(ms < 60000);
      return ms;
    };
    await time('matrix view of head 2 (layer 0)', async () => { await page.click('#tab-matrix'); await page.click('#head-chips .head-chip[data-h="2"]'); },
      () => document.body.dataset.view === 'matrix' && /head 2/.test((document.querySelector('#view-matrix h2') || {}).textContent || ''));
    assert.equal(await page.$eval('#view-matrix canvas + canvas', e => e.dataset.pooled), '1', 'drawn max-pooled');
    await page.screenshot({ path: path.join(SHOTS, 'serve-2048-matrix.png') });
    /* zoom: a double-click zooms in around the cell, + again; the window is a matrix of its own */
    await time('matrix view zoomed 2x around a cell', () => page.dblclick('#view-matrix canvas + canvas', { position: { x: 400, y: 300 } }),
      () => (document.querySelector('#view-matrix .mx-wrap') || {}).dataset.zoom === '2');
    await time('matrix view zoomed 4x', () => page.click('#view-matrix .mx-zoom button[title^="Zoom in"]'),
      () => (document.querySelector('#view-matrix .mx-wrap') || {}).dataset.zoom === '4');
    assert.match(await page.textContent('#view-matrix .mx-where'), /^4× · query rows [\d,]+–[\d,]+, key columns [\d,]+–[\d,]+ of 2,048 × 2,048$/);
    assert.equal(await page.$eval('#view-matrix canvas + canvas', e => +e.dataset.rows), 512);
    await page.click('#view-matrix .mx-zoom button[title="The whole matrix"]');
    await page.waitForFunction(() => (document.querySelector('#view-matrix .mx-wrap') || {}).dataset.zoom === '1');
    await time('model view (thumbnails)', () => page.click('#tab-model'), () => document.getElementById('view-model').dataset.drawn === '1');
    assert.match(await page.textContent('#view-model .view-title'), /reduced to \d+ × \d+/);
    assert.ok(log.requests.some(r => r.includes('/api/thumbs?run=')));
    await page.screenshot({ path: path.join(SHOTS, 'serve-2048-model.png') });
    await time('layer 1 head 3 opened from its thumbnail', () => page.click('.thumb[data-li="1"][data-h="3"]'),
      () => document.getElementById('modal').dataset.drawn === '1');
    await page.click('#modal-close');
    await time('head view (layer 0, heads ' + (await page.evaluate(() => window.attnviz.state.active.map((a, h) => (a ? h : -1)).filter(h => h >= 0).join(', '))) + ')',
      () => page.click('#tab-head'), () => document.body.dataset.view === 'head' && !!document.querySelector('#view-head .hv'));
    await page.dblclick('#head-chips .head-chip[data-h="3"]');
    await page.waitForFunction(() => window.attnviz.state.active.filter(Boolean).length === 1 && !!document.querySelector('#view-head .hv'));
    await time('head view: layer 0 -> 1 (head 3, fetched)', () => page.selectOption('#layer-select', '1'),
      () => document.body.dataset.layer === '1' && !!document.querySelector('#view-head .hv'));
    assert.equal(await page.$$eval('#view-head .hv-left .tok', els => els.length), 2048);
    /* a head's block is fetched once per run */
    const blocks = log.requests.filter(r => r.includes('/api/attention'));
    assert.equal(new Set(blocks).size, blocks.length, 'no block fetched twice: ' + blocks.join(' '));
    cleanLive(log);
  } finally { await page.close(); }
});

test('Download page saves the offline page; it renders with the network blocked', async () => {
  const { page, log } = await openLive();
  let off = null;
  try {
    await typeRun(page, '#live-text', 'The quick brown fox jumps over the lazy dog.');
    const tokens = await leftTokens(page);
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#live-download')]);
    assert.equal(dl.suggestedFilename(), 'attnviz.html');
    const file = path.join(OUT, 'served-offline.html');
    await dl.saveAs(file);
    assert.ok(log.requests.some(r => r.startsWith('GET') && r.includes('/api/page?run=')));
    const html = fs.readFileSync(file, 'utf8');
    assert.ok(!/connect-src/.test(html), 'the offline page allows no connections');
    await browser.ctx.setOffline(true);
    off = await openPage(browser.ctx, file);
    clean(off.log);
    assert.deepEqual(await leftTokens(off.page), tokens);
    assert.equal(await off.page.isVisible('#live'), false);
    await off.page.click('#tab-model');
    await off.page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
    clean(off.log);
    cleanLive(log);
  } finally {
    await browser.ctx.setOffline(false);
    if (off) await off.page.close();
    await page.close();
  }
});

test('a real decoder (SmolLM2 GGUF): Predict top-K shows the next-token strip', async t => {
  if (!gguf) { t.skip('no SmolLM2 GGUF (ATTNVIZ_SMOLLM2_GGUF / tools/pymodel.sh smollm2)'); return; }
  const { page, log } = await openLive();
  try {
    await page.selectOption('#live-model', '2');
    assert.equal(await page.isVisible('#live-predict-label'), true);
    await typeRun(page, '#live-text', 'The capital of France is');
    const prev = +(await page.evaluate(() => document.body.dataset.runs));
    await page.check('#live-predict');
    await page.waitForFunction(p => +document.body.dataset.runs > p && document.body.dataset.ready === '1', prev, { timeout: 60000 });
    await settle(page);
    const j = cliJson(gguf, ['--predict', '5', 'The capital of France is'], 'serve-smollm2');
    assert.equal((await leftTokens(page)).length, j.tokens.length);
    const ids = preds => preds.map(p => p.position + ':' + p.top.map(c => c.id).join(','));
    const got = await page.evaluate(() => window.attnviz.meta.predictions);
    assert.ok(Array.isArray(j.predictions) && j.predictions.length > 0);
    assert.deepEqual(ids(got), ids(j.predictions), 'top-5 ids at every position, as the CLI');
    assert.ok(await page.isVisible('#pred-strip'), 'the predictions strip shows');
    /* another run: the previous boot's card and listeners are gone (one card, which follows the hover) */
    await typeRun(page, '#live-text', 'The capital of Italy is');
    assert.equal(await page.$$eval('.pred-card', els => els.length), 1);
    await page.hover('#view-head .hv-left .tok[data-k="2"]');
    await settle(page);
    assert.equal(await page.$$eval('.pred-card', els => els.filter(e => !e.hidden).length), 1);
    cleanLive(log);
  } finally { await page.close(); }
});

test('a real decoder (SmolLM2 GGUF): the Chat box runs the text as one user message in its template', async t => {
  if (!gguf) { t.skip('no SmolLM2 GGUF (ATTNVIZ_SMOLLM2_GGUF / tools/pymodel.sh smollm2)'); return; }
  for (const theme of ['light', 'dark']) {
    const { page, log } = await openLive(theme);
    try {
      await page.setViewportSize({ width: 1400, height: 1000 });
      assert.equal(await page.isVisible('#live-chat-label'), false, 'the demo ships no template: no Chat box');
      await page.selectOption('#live-model', '2');
      assert.equal(await page.isVisible('#live-chat-label'), true, 'SmolLM2 ships one: the Chat box shows');
      const text = theme === 'light' ? 'What is the capital of France?' : 'Name a large city in Japan.';
      await typeRun(page, '#live-text', text);
      const prev = +(await page.evaluate(() => document.body.dataset.runs));
      await page.check('#live-chat');
      await page.waitForFunction(p => +document.body.dataset.runs > p && document.body.dataset.ready === '1', prev, { timeout: 60000 });
      await settle(page);
      assert.equal(await page.isDisabled('#live-text-b'), true, 'a chat takes one text: sentence B is off');
      const j = cliJson(gguf, ['--chat', '--tokens-only', text], 'serve-chat-' + theme);
      const meta = await page.evaluate(() => window.attnviz.meta);
      assert.deepEqual(meta.tokens, j.tokens, 'the chat\'s tokens are the CLI\'s --chat tokens');
      assert.equal(meta.tokens[0], '<|im_start|>');
      assert.ok(meta.text.endsWith(text + '<|im_end|>\n<|im_start|>assistant\n'), meta.text);
      await page.evaluate(() => { const S = window.attnviz.state; S.layer = 3; return window.attnviz.render(); });
      await page.evaluate(() => document.activeElement && document.activeElement.blur());
      await settle(page);
      await page.screenshot({ path: path.join(SHOTS, 'serve-chat-' + theme + '.png') });
      if (theme === 'light') {
        /* Generate continues the chat: the prompt is the chat's tokens, and the answer ends at <|im_end|> */
        await page.fill('#live-stream-n', '16');
        await page.click('#live-stream');
        await page.waitForFunction(() => !document.body.dataset.generating && +(document.body.dataset.generated || 0) > 0,
          null, { timeout: 120000 });
        await settle(page);
        const g = await page.evaluate(() => window.attnviz.meta);
        assert.deepEqual(g.tokens.slice(0, j.tokens.length), j.tokens, 'the generation continues the chat\'s tokens');
        assert.equal(g.generation.stop_reason, 'eos', 'the answer ends at the end of its turn');
        assert.ok(/Paris/.test(g.generation.text), g.generation.text);
      }
      cleanLive(log);
    } finally { await page.close(); }
  }
});

/* the live page as the README shows it: SmolLM2 (when cached) with its predictions and an induction
 * head (layer 18, head 6) on a repeated sentence, else the demo model on a sentence pair */
for (const theme of ['light', 'dark']) {
  test('screenshot of the live page, ' + theme + ' theme', async () => {
    const { page, log } = await openLive(theme);
    try {
      /* tall enough that hovering a token does not scroll the input panel away */
      await page.setViewportSize({ width: 1280, height: 1180 });
      if (gguf) {
        await page.selectOption('#live-model', '2');
        await page.check('#live-predict');
        /* a different input per theme: the server answers a repeated one from its cache (no forward time to show) */
        await typeRun(page, '#live-text', theme === 'light' ? 'The cat sat on the mat. The cat sat on the mat.' : 'The dog ran to the park. The dog ran to the park.');
        await page.evaluate(() => { const S = window.attnviz.state; S.layer = 18; S.active.fill(false); S.active[6] = true; S.focus = 6; return window.attnviz.render(); });
        await page.evaluate(() => document.activeElement && document.activeElement.blur());
        await page.hover('#view-head .hv-left .tok[data-k="9"]');
      } else {
        await typeRun(page, '#live-text', 'The cat sat on the mat because it was warm.');
        await typeRun(page, '#live-text-b', 'It purred.');
        await page.evaluate(() => { const S = window.attnviz.state; S.active.fill(false); [1, 2, 8].forEach(h => { S.active[h] = true; }); return window.attnviz.render(); });
        await page.evaluate(() => document.activeElement && document.activeElement.blur());
        await page.hover('#view-head .hv-left .tok[data-k="3"]');
      }
      await settle(page);
      await page.screenshot({ path: path.join(SHOTS, 'serve-' + theme + '.png') });
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme);
      cleanLive(log);
    } finally { await page.close(); }
  });
}
