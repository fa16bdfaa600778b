// live.test.mjs — the live page's side of the serve API against a node mock
// (mock_serve.mjs), for what the real server cannot be made to do on cue: a
// slow run overtaken by a newer edit (the stale answer is never drawn), a run
// the server refuses (the error shows, the last views stay), the token on
// every request, and the initial text run at load. serve.test.mjs runs the
// real `attnviz serve`.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';
import { startMock } from './mock_serve.mjs';
import { DEMO, launch, settle } from './lib.mjs';

let mock, browser;
before(async () => {
  mock = await startMock([{ dir: DEMO, predict: false }], {
    text: 'Hello there.',
    delayMs: b => (/slow/.test(b.text) ? 1500 : /wait/.test(b.text) ? 3000 : 0),
    refuse: b => (/refuse/.test(b.text) ? { status: 400, error: 'input is not valid UTF-8 (mock)' } : null),
    pageBudget: true,
  });
  browser = await launch();
});
after(async () => {
  if (browser) await browser.close();
  if (mock) await mock.close();
});

async function open() {
  const page = await browser.ctx.newPage();
  const log = { console: [], errors: [], foreign: [], noToken: [] };
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e.message || e)));
  page.on('request', r => {
    const u = r.url();
    if (!u.startsWith('http://127.0.0.1:' + mock.port + '/') && !u.startsWith('blob:')) log.foreign.push(u);
    else if (!u.startsWith('blob:') && r.headers()['x-attnviz-token'] !== mock.token && !u.includes('token=' + mock.token)) log.noToken.push(u);
  });
  await page.goto(mock.url);
  return { page, log };
}
const tokens = page => page.$$eval('#view-head .hv-left .tok .t', els => els.map(e => e.textContent));
const idle = (page, runs) => page.waitForFunction(p => +(document.body.dataset.runs || 0) >= p && document.body.dataset.busy !== '1' &&
  document.body.dataset.ready === '1', runs, { timeout: 30000 });

test('the initial text runs at load; every request carries the token', async () => {
  const { page, log } = await open();
  try {
    await idle(page, 1);
    await settle(page);
    assert.equal(await page.inputValue('#live-text'), 'Hello there.');
    assert.deepEqual(await tokens(page), ['[CLS]', 'hello', 'there', '.', '[SEP]']);
    assert.equal(await page.isVisible('#live-model'), false, 'one model: no picker');
    assert.equal(await page.isVisible('#live-predict-label'), false, 'no head: no Predict top-K');
    assert.deepEqual(log.noToken, []);
    assert.deepEqual(log.foreign, []);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
  } finally { await page.close(); }
});

test('a slow run overtaken by a newer edit is never drawn', async () => {
  const { page, log } = await open();
  try {
    await idle(page, 1);
    await page.fill('#live-text', 'slow words here');
    /* past the debounce: the slow run is on its way */
    await page.waitForFunction(() => document.getElementById('live-status').textContent.startsWith('Running'));
    await page.fill('#live-text', 'fast words');
    await idle(page, 2);
    await settle(page);
    assert.deepEqual(await tokens(page), ['[CLS]', 'fast', 'words', '[SEP]']);
    const run = await page.evaluate(() => document.body.dataset.run);
    await page.waitForTimeout(1800); /* the slow answer would have come by now */
    assert.equal(await page.evaluate(() => document.body.dataset.run), run);
    assert.deepEqual(await tokens(page), ['[CLS]', 'fast', 'words', '[SEP]']);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
  } finally { await page.close(); }
});

test('a run that takes a while shows the seconds it has run, then its result', async () => {
  const { page, log } = await open();
  try {
    await idle(page, 1);
    await page.fill('#live-text', 'a long wait');
    await page.waitForFunction(() => /^Running .*… [12] s$/.test(document.getElementById('live-status').textContent), null, { timeout: 2900 });
    await idle(page, 2);
    assert.match(await page.textContent('#live-status'), /^\d+ tokens forward/);
    assert.deepEqual(await tokens(page), ['[CLS]', 'a', 'long', 'wait', '[SEP]']);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
  } finally { await page.close(); }
});

test('a refused run shows the server\'s error and keeps the last views; an empty text asks for one', async () => {
  const { page, log } = await open();
  try {
    await idle(page, 1);
    await page.fill('#live-text', 'please refuse this');
    await page.waitForFunction(() => document.getElementById('live-status').dataset.kind === 'error');
    assert.match(await page.textContent('#live-status'), /Error: input is not valid UTF-8 \(mock\)/);
    assert.deepEqual(await tokens(page), ['[CLS]', 'hello', 'there', '.', '[SEP]']);
    await page.fill('#live-text', '   ');
    await page.waitForFunction(() => document.getElementById('live-status').dataset.kind === 'idle');
    assert.match(await page.textContent('#live-status'), /Type a sentence/);
    assert.deepEqual(log.errors, []);
    /* Chromium itself logs the 400 response; the page logs nothing */
    assert.deepEqual(log.console.filter(m => !/Failed to load resource: the server responded with a status of 400/.test(m)), []);
  } finally { await page.close(); }
});

test('Download page: when the whole page is past the server\'s budget, the layer shown is saved', async () => {
  const { page, log } = await open();
  try {
    await idle(page, 1);
    await page.click('#layer-next');
    await page.waitForFunction(() => document.body.dataset.layer === '1');
    const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#live-download')]);
    assert.equal(dl.suggestedFilename(), 'attnviz.html');
    assert.ok(fs.statSync(await dl.path()).size > 1000);
    assert.ok(mock.log.some(l => /^GET \/api\/page\?run=r\d+&layers=1$/.test(l)), mock.log.join('\n'));
    assert.match(await page.textContent('#live-status'), /saved layer 1 only/);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console.filter(m => !/status of 413/.test(m)), []);
  } finally { await page.close(); }
});
