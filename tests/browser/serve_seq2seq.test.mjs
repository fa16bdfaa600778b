// serve_seq2seq.test.mjs — `attnviz serve` on an encoder-decoder model (tests/data/small-bart) in
// Chromium: the live page names its boxes Source and Decoder text, runs what is typed in both
// (POST /api/run with decoder_text; Generate: with generate=N, as the CLI's --generate), and offers the CLI page's Encoder / Decoder / Cross stacks,
// each over its own tokens, with the weights the CLI's JSON has for the same input (4 decimals);
// the cross view's rows are decoder tokens, its columns the source's. The server is killed on
// every exit path.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ATTNVIZ, OUT, ROOT, clickAndRender, closeAll, ensureBuilt, launch, settle, startServe } from './lib.mjs';

const BART = path.join(ROOT, 'tests/data/small-bart');
let srv = null, url = null, browser = null;

before(async () => {
  ensureBuilt();
  fs.mkdirSync(OUT, { recursive: true });
  srv = await startServe(['--model', BART]);
  url = srv.url;
  browser = await launch();
});
after(async () => {
  if (browser) await browser.close();
  await srv?.stop();
});

const side = s => '#view-head .hv-' + (s === 'R' ? 'right' : 'left') + ' .tok';
const texts = (page, s) => page.$$eval(side(s) + ' .t', els => els.map(e => e.textContent.trim()));
const values = (page, s) => page.$$eval(side(s) + ' .v', els => els.map(e => e.textContent));
const shown = toks => toks.map(t => t.replace(/^Ġ/, ' ').replace(/^▁/, ' ').trim());

async function typeRun(page, sel, text) {
  const prev = +(await page.evaluate(() => document.body.dataset.runs || 0));
  await page.fill(sel, text);
  await page.waitForFunction(p => +(document.body.dataset.runs || 0) > p && document.body.dataset.busy !== '1' &&
    document.body.dataset.ready === '1', prev, { timeout: 60000 });
  await settle(page);
}

/* a page opens on every head; a test reading one head's weights shows head h alone (a double-click on its chip) */
async function headAlone(page, h) {
  await page.dblclick('#head-chips .head-chip[data-h="' + h + '"]');
  await page.waitForFunction(k => { const a = window.attnviz.state.active; return a.filter(Boolean).length === 1 && a[k] &&
    !!document.querySelector('#view-head .hv'); }, h);
  await settle(page);
}

test('live page on BART: source and decoder text run; Encoder / Decoder / Cross show the CLI\'s weights', async () => {
  const src = 'The cat sat on the mat.', tgt = 'A cat sat.';
  const json = path.join(OUT, 'serve-bart.json');
  execFileSync(ATTNVIZ, ['--quiet', '--model', BART, '--json', json, src, '--decoder-text', tgt], { stdio: ['ignore', 'ignore', 'inherit'] });
  const d = JSON.parse(fs.readFileSync(json, 'utf8'));
  const page = await browser.ctx.newPage();
  const log = { errors: [], console: [], foreign: [] };
  const origin = new URL(url).origin;
  page.on('request', r => { const u = r.url(); if (!u.startsWith(origin + '/') && !u.startsWith('blob:')) log.foreign.push(u); });
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e && e.message ? e.message : e)));
  try {
    await page.goto(url);
    await page.waitForSelector('#live', { state: 'visible' });
    assert.match(await page.textContent('#live-lab-a'), /^Source/);
    assert.match(await page.textContent('#live-lab-b'), /^Decoder text/);
    assert.equal(await page.isVisible('#live-predict-label'), false, 'serve does not predict for encoder-decoders');
    await typeRun(page, '#live-text', src);
    await typeRun(page, '#live-text-b', tgt);
    assert.match(await page.textContent('#live-status'),
      new RegExp(d.encoder_tokens.length + ' source and ' + d.decoder_tokens.length + ' decoder tokens'));
    assert.deepEqual(await page.$$eval('#stack-seg button', els => els.map(e => e.dataset.stack)), ['encoder', 'decoder', 'cross']);
    assert.deepEqual(await texts(page, 'L'), shown(d.encoder_tokens));
    /* the initial layer (0), head 0 alone: the encoder's row 2 */
    assert.equal(await page.evaluate(() => window.attnviz.state.active.filter(Boolean).length), d.config.heads, 'every head at first');
    await headAlone(page, 0);
    await page.hover(side('L') + '[data-k="2"]');
    await settle(page);
    closeAll(await values(page, 'R'), d.encoder_attention[0][0][2], 0.5e-4 + 2e-6, 'encoder layer 0 head 0 row 2');
    await page.mouse.move(5, 5);
    await clickAndRender(page, '#stack-seg [data-stack="cross"]');
    assert.deepEqual(await texts(page, 'L'), shown(d.decoder_tokens));
    assert.deepEqual(await texts(page, 'R'), shown(d.encoder_tokens));
    for (const i of [0, d.decoder_tokens.length - 1]) {
      await page.hover(side('L') + '[data-k="' + i + '"]');
      await settle(page);
      const same = closeAll(await values(page, 'R'), d.cross_attention[0][0][i], 0.5e-4 + 2e-6, 'cross weights of decoder token ' + i);
      assert.equal(same, d.encoder_tokens.length);
    }
    await page.mouse.move(5, 5);
    await clickAndRender(page, '#stack-seg [data-stack="decoder"]');
    await page.hover(side('L') + '[data-k="2"]');
    await settle(page);
    const v = await values(page, 'R');
    assert.ok(v.slice(3).every(x => x === ''), 'the decoder is causal: later keys masked');
    closeAll(v.slice(0, 3), d.decoder_attention[0][0][2].slice(0, 3), 0.5e-4 + 2e-6, 'decoder weights');
    /* the model view draws every head of the current stack (no thumbnails for a seq2seq run) */
    await clickAndRender(page, '#tab-model');
    await settle(page);
    /* Generate: the decoder's tokens decoded from its start token (the CLI's --generate 5); the box is not read */
    const gjson = path.join(OUT, 'serve-bart-gen.json');
    execFileSync(ATTNVIZ, ['--quiet', '--model', BART, '--json', gjson, src, '--generate', '5'], { stdio: ['ignore', 'ignore', 'inherit'] });
    const g = JSON.parse(fs.readFileSync(gjson, 'utf8'));
    assert.equal(await page.isVisible('#live-generate-label'), true, 'an encoder-decoder offers Generate');
    await page.fill('#live-gen-n', '5');
    const prev = +(await page.evaluate(() => document.body.dataset.runs));
    await page.click('#live-generate');
    await page.waitForFunction(p => +document.body.dataset.runs > p && document.body.dataset.busy !== '1' &&
      document.body.dataset.ready === '1', prev, { timeout: 60000 });
    await settle(page);
    assert.equal(await page.isDisabled('#live-text-b'), true, 'generating: the decoder box is not read');
    await clickAndRender(page, '#tab-head');
    await clickAndRender(page, '#stack-seg [data-stack="cross"]');
    /* the vocabulary's spellings (the labels show a generated control byte as its picture, e.g. ␋) */
    assert.deepEqual(await page.evaluate(() => window.attnviz.data.stack.rows.tokens), g.decoder_tokens);
    assert.equal((await texts(page, 'L')).length, g.decoder_tokens.length);
    await page.hover(side('L') + '[data-k="1"]');
    await settle(page);
    closeAll(await values(page, 'R'), g.cross_attention[0][0][1], 0.5e-4 + 2e-6, 'generated run: cross weights of decoder token 1');
    await page.mouse.move(5, 5);
    assert.deepEqual(log.errors, [], 'page errors');
    assert.deepEqual(log.console, [], 'console errors/warnings');
    assert.deepEqual(log.foreign, [], 'requests to anything but the server');
  } finally { await page.close(); }
});

test('live page on a distilled BART (3 encoder, 2 decoder layers): each stack\'s layer control offers its own layers', async () => {
  const DISTIL = path.join(ROOT, 'tests/data/small-distilbart');
  const src = 'The cat sat on the mat.', tgt = 'A cat sat.';
  const json = path.join(OUT, 'serve-distilbart.json');
  execFileSync(ATTNVIZ, ['--quiet', '--model', DISTIL, '--json', json, src, '--decoder-text', tgt], { stdio: ['ignore', 'ignore', 'inherit'] });
  const d = JSON.parse(fs.readFileSync(json, 'utf8'));
  await srv.stop();
  srv = await startServe(['--model', DISTIL]);
  url = srv.url;
  const page = await browser.ctx.newPage();
  const errors = [];
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => errors.push(String(e && e.message ? e.message : e)));
  const options = () => page.$$eval('#layer-select option', els => els.map(e => e.textContent.trim()));
  try {
    await page.goto(url);
    await page.waitForSelector('#live', { state: 'visible' });
    await typeRun(page, '#live-text', src);
    await typeRun(page, '#live-text-b', tgt);
    assert.deepEqual(await options(), ['Layer 0', 'Layer 1', 'Layer 2'], 'the encoder\'s three layers');
    await page.selectOption('#layer-select', '2');
    await settle(page);
    await clickAndRender(page, '#stack-seg [data-stack="cross"]');
    assert.deepEqual(await options(), ['Layer 0', 'Layer 1'], 'cross attention: the decoder\'s two layers');
    assert.equal(await page.evaluate(() => document.body.dataset.layer), '1');
    await headAlone(page, 0);
    await page.hover(side('L') + '[data-k="2"]');
    await settle(page);
    closeAll(await values(page, 'R'), d.cross_attention[1][0][2], 0.5e-4 + 2e-6, 'cross layer 1 head 0 row 2 (from the server)');
    await page.mouse.move(5, 5);
    assert.deepEqual(errors, [], 'page errors, console errors/warnings');
  } finally { await page.close(); }
});
