// generate.test.mjs — the live page's streamed Generate (templates/live.js over POST
// /v1/completions with stream and the attention extension) in Chromium: the tokens arrive one
// after another and the page is drawn on each (the generation step, which the head and matrix
// views pin, follows the newest token); the weights the views read equal the CLI's
// `--generate --json`; Stop ends the stream and the server takes the next request at once;
// screenshots at 1,400 x 1,000 in both themes. Model: the SmolLM2 GGUF when cached (ATTNVIZ_SMOLLM2_GGUF
// or tools/pymodel.sh smollm2), else the synthetic Llama (tests/data/small-llama).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ATTNVIZ, OUT, ROOT, SHOTS, ensureBuilt, launch, settle, startServe } from './lib.mjs';

let srv = null, url = null, browser = null, model = null;

function pickModel() {
  let f = process.env.ATTNVIZ_SMOLLM2_GGUF;
  if (!f) {
    try {
      f = path.join(execFileSync(path.join(ROOT, 'tools/pymodel.sh'), ['smollm2'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim(), 'SmolLM2-135M-Instruct.Q4_1.gguf');
    } catch { f = null; }
  }
  return f && fs.existsSync(f) ? f : path.join(ROOT, 'tests/data/small-llama');
}

before(async () => {
  ensureBuilt();
  model = pickModel();
  srv = await startServe(['--model', model]);
  url = srv.url;
  browser = await launch();
});
after(async () => {
  if (browser) await browser.close();
  await srv?.stop();
});

async function openLive(theme) {
  const page = await browser.ctx.newPage();
  await page.setViewportSize({ width: 1400, height: 1000 });
  await page.emulateMedia({ colorScheme: theme });
  const origin = new URL(url).origin;
  const log = { foreign: [], console: [], errors: [] };
  page.on('request', r => { if (!r.url().startsWith(origin + '/') && !r.url().startsWith('blob:')) log.foreign.push(r.url()); });
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e && e.message ? e.message : e)));
  await page.goto(url);
  await page.waitForSelector('#live', { state: 'visible' });
  return { page, log };
}
const PROMPT = 'The capital of France is';

test('Generate streams the tokens, each drawn as it comes, the views on the newest; weights equal the CLI', async () => {
  const { page, log } = await openLive('light');
  try {
    assert.equal(await page.isVisible('#live-stream'), true, 'a decoder with a head: Generate shows');
    await page.fill('#live-text', PROMPT);
    await page.waitForFunction(() => document.body.dataset.ready === '1' && document.body.dataset.busy !== '1', null, { timeout: 60000 });
    await page.fill('#live-stream-n', '8');
    /* every count of tokens the page was drawn with, as it happens */
    await page.evaluate(() => {
      window.__seen = [];
      new MutationObserver(() => {
        const g = document.body.dataset.generated;
        if (g && window.__seen[window.__seen.length - 1] !== +g) window.__seen.push(+g);
      }).observe(document.body, { attributes: true, attributeFilter: ['data-generated'] });
    });
    await page.click('#live-stream');
    await page.waitForFunction(() => document.body.dataset.generating === '1');
    await page.waitForFunction(() => !document.body.dataset.generating, null, { timeout: 120000 });
    await page.waitForFunction(() => document.body.dataset.ready === '1');
    await settle(page);
    const seen = await page.evaluate(() => window.__seen);
    const cli = path.join(OUT, 'generate-cli.json');
    execFileSync(ATTNVIZ, ['--quiet', '--model', model, '--generate', '8', '--precision', '9', '--json', cli, PROMPT]);
    const j = JSON.parse(fs.readFileSync(cli, 'utf8'));
    const steps = j.generation.steps, G = steps.length, n = j.tokens.length;
    console.log('# drawn with ' + seen.join(', ') + ' tokens; ' + G + ' generated: ' + JSON.stringify(j.generation.text));
    assert.equal(seen[seen.length - 1], G);
    assert.ok(seen.length >= 2 && seen.every((v, i) => i === 0 || v > seen[i - 1]), 'drawn more than once, growing: ' + seen);
    const st = await page.evaluate(() => ({ pin: window.attnviz.state.pin, step: window.attnviz.pred.step, n: window.attnviz.data.meta.n,
      tokens: window.attnviz.data.meta.tokens }));
    assert.equal(st.n, n);
    assert.deepEqual(st.tokens, j.tokens);
    assert.equal(st.step, G, 'the step control is on the newest token');
    assert.equal(st.pin, n - 1, 'the views pin the newest token');
    assert.match(await page.textContent('#live-status'), new RegExp(G + ' of up to 8 tokens'));
    /* the head view marks the newest token's row as pinned */
    await page.waitForSelector('#view-head .hv-left .tok.pinned');
    assert.equal(await page.$eval('#view-head .hv-left .tok.pinned', e => +e.dataset.k), n - 1);
    /* every layer's and head's weights the views read are the CLI's (codes: 1e-4) */
    const L = j.attention.length, H = j.attention[0].length;
    const worst = await page.evaluate(async ({ L, H, A }) => {
      const D = window.attnviz.data;
      let w = 0;
      for (let l = 0; l < L; l++) {
        await D.attention(l);
        for (let h = 0; h < H; h++)
          for (let i = 0; i < A[l][h].length; i++)
            for (let k = 0; k <= i; k++) w = Math.max(w, Math.abs(D.weight(l, h, i, k) - A[l][h][i][k]));
      }
      return w;
    }, { L, H, A: j.attention });
    console.log('# ' + L + ' x ' + H + ' heads, ' + n + ' rows: max |page - CLI| ' + worst.toExponential(2));
    assert.ok(worst <= 0.5e-4 + 1e-6, 'weights differ from the CLI by ' + worst);
    /* the matrix view follows too */
    await page.click('#tab-matrix');
    await page.waitForFunction(() => document.body.dataset.view === 'matrix' && document.querySelector('#view-matrix canvas'));
    await settle(page);
    await page.screenshot({ path: path.join(SHOTS, 'generate-matrix.png') });
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
    assert.deepEqual(log.foreign, []);
  } finally { await page.close(); }
});

test('Stop ends a stream mid-way; the server takes the next request at once', async () => {
  const { page, log } = await openLive('light');
  try {
    await page.fill('#live-text', PROMPT);
    await page.waitForFunction(() => document.body.dataset.ready === '1' && document.body.dataset.busy !== '1', null, { timeout: 60000 });
    await page.fill('#live-stream-n', '256');
    await page.click('#live-stream');
    await page.waitForFunction(() => +(document.body.dataset.generated || 0) >= 2, null, { timeout: 60000 });
    assert.equal(await page.textContent('#live-stream'), 'Stop');
    await page.click('#live-stream');
    await page.waitForFunction(() => !document.body.dataset.generating);
    const got = +(await page.evaluate(() => document.body.dataset.generated));
    assert.ok(got >= 2 && got < 256, got + ' tokens before Stop');
    assert.match(await page.textContent('#live-status'), /stopped/);
    /* the place the stream held is free: a one-token request is answered, not refused */
    const t0 = Date.now();
    const st = await page.evaluate(async mname => {
      const token = new URLSearchParams(location.search).get('token');
      const r = await fetch('/v1/completions', { method: 'POST', headers: { Authorization: 'Bearer ' + token },
        body: JSON.stringify({ model: mname, prompt: 'hi', max_tokens: 1 }) });
      return r.status;
    }, await page.evaluate(() => window.attnvizLive.models[0].name));
    console.log('# stopped after ' + got + ' tokens; the next request answered in ' + (Date.now() - t0) + ' ms');
    assert.equal(st, 200);
    assert.deepEqual(log.errors, []);
  } finally { await page.close(); }
});

for (const theme of ['light', 'dark']) {
  test('screenshot of a streamed generation, ' + theme + ' theme', async () => {
    const { page, log } = await openLive(theme);
    try {
      await page.fill('#live-text', PROMPT);
      await page.waitForFunction(() => document.body.dataset.ready === '1' && document.body.dataset.busy !== '1', null, { timeout: 60000 });
      await page.fill('#live-stream-n', '12');
      await page.click('#live-stream');
      await page.waitForFunction(() => document.body.dataset.generating === '1');
      await page.waitForFunction(() => !document.body.dataset.generating, null, { timeout: 120000 });
      await page.waitForFunction(() => document.body.dataset.ready === '1');
      await settle(page);
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, 'generate-' + theme + '.png') });
      assert.deepEqual(log.errors, []);
    } finally { await page.close(); }
  });
}
