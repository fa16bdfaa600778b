// Encoder-decoder pages made by a native run (attnviz --model tests/data/small-bart SOURCE
// --decoder-text TARGET, and T5 with --generate): the page offers the three stacks (Encoder /
// Decoder / Cross), each drawn over its own tokens — the encoder's from the source, the decoder's
// from decoder_start_token_id and the target — with the JSON's numbers at 4 decimals; screenshots
// in both themes (tests/browser/screenshots/seq2seq-*.png).
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, SHOTS, launch, openPage, settle, clean, cliPage, closeAll, clickAndRender } from './lib.mjs';

const BART = path.join(ROOT, 'tests/data/small-bart');
const T5 = path.join(ROOT, 'tests/data/small-t5');
const DISTIL = path.join(ROOT, 'tests/data/small-distilbart'); /* 3 encoder, 2 decoder layers */
const DEEPDEC = path.join(ROOT, 'tests/data/small-t5-deepdec'); /* 2 encoder, 3 decoder layers */
let browser, bart, t5, bartL1, distil, deepdec;
before(async () => {
  bart = cliPage('seq2seq-bart', ['--model', BART, 'The cat sat on the mat.', '--decoder-text', 'A cat sat.',
    '--layer', '1', '--head', '1']);
  t5 = cliPage('seq2seq-t5', ['--model', T5, 'the cat sat', '--generate', '5']);
  /* head 0 focused where a test reads one head's weights (a page opens on every head) */
  bartL1 = cliPage('seq2seq-bart-l1', ['--model', BART, 'The cat sat on the mat.', '--decoder-text', 'A cat sat.',
    '--layers', '1', '--head', '0']);
  distil = cliPage('seq2seq-distilbart', ['--model', DISTIL, 'The cat sat on the mat.', '--decoder-text', 'A cat sat.',
    '--layer', '2', '--head', '0']);
  deepdec = cliPage('seq2seq-t5-deepdec', ['--model', DEEPDEC, 'The cat sat on the mat.', '--decoder-text', 'A cat sat.',
    '--head', '0']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

const side = s => '.hv-' + (s === 'R' ? 'right' : 'left') + ' .tok';
const texts = (page, s) => page.$$eval(side(s) + ' .t', els => els.map(e => e.textContent.trim()));
const values = (page, s) => page.$$eval(side(s) + ' .v', els => els.map(e => e.textContent));
const shown = toks => toks.map(t => t.replace(/^Ġ/, ' ').replace(/^▁/, ' ').trim());

describe('native encoder-decoder page', () => {
  test('BART --decoder-text: Encoder / Decoder / Cross stacks over the run\'s own tokens and numbers', async () => {
    const d = bart.data();
    assert.equal(d.decoder_tokens[0], '</s>', 'the decoder starts at decoder_start_token_id');
    const { page, log } = await openPage(browser.ctx, bart.html);
    try {
      assert.deepEqual(await page.$$eval('#stack-seg button', els => els.map(e => e.dataset.stack)),
        ['encoder', 'decoder', 'cross']);
      assert.equal(await page.evaluate(() => document.body.dataset.stack), 'encoder');
      assert.deepEqual(await texts(page, 'L'), shown(d.encoder_tokens));
      await clickAndRender(page, '#stack-seg [data-stack="cross"]');
      assert.deepEqual(await texts(page, 'L'), shown(d.decoder_tokens));
      assert.deepEqual(await texts(page, 'R'), shown(d.encoder_tokens));
      const X = d.cross_attention[1][1];
      for (const i of [0, 3]) {
        await page.hover(side('L') + '[data-k="' + i + '"]');
        await settle(page);
        const same = closeAll(await values(page, 'R'), X[i], 0.5e-4 + 2e-6, 'cross weights of decoder token ' + i);
        assert.equal(same, d.encoder_tokens.length);
      }
      await page.mouse.move(5, 5);
      await clickAndRender(page, '#stack-seg [data-stack="decoder"]');
      await page.hover(side('L') + '[data-k="2"]');
      await settle(page);
      const v = await values(page, 'R');
      assert.ok(v.slice(3).every(x => x === ''), 'the decoder is causal: later keys masked');
      closeAll(v.slice(0, 3), d.decoder_attention[1][1][2].slice(0, 3), 0.5e-4 + 2e-6, 'decoder weights');
      clean(log);
    } finally { await page.close(); }
  });

  test('T5 --generate: the decoder side is what was generated, the stacks sized to it', async () => {
    const d = t5.data();
    assert.ok(d.decoder_tokens.length >= 2 && d.decoder_tokens.length <= 6, d.decoder_tokens.join(' '));
    assert.equal(d.cross_attention[0][0].length, d.decoder_tokens.length);
    assert.equal(d.cross_attention[0][0][0].length, d.encoder_tokens.length);
    const { page, log } = await openPage(browser.ctx, t5.html, { theme: 'dark' });
    try {
      await clickAndRender(page, '#stack-seg [data-stack="cross"]');
      assert.deepEqual(await texts(page, 'L'), shown(d.decoder_tokens));
      clean(log);
    } finally { await page.close(); }
  });

  test('--layers 1: the page offers that layer only, each stack its numbers', async () => {
    const d = bartL1.data(), full = bart.data();
    assert.deepEqual(d.layers, [1]);
    const { page, log } = await openPage(browser.ctx, bartL1.html);
    try {
      assert.deepEqual(await page.$$eval('#layer-select option', els => els.map(e => e.textContent.trim())), ['Layer 1']);
      await clickAndRender(page, '#stack-seg [data-stack="cross"]');
      await page.hover(side('L') + '[data-k="2"]');
      await settle(page);
      closeAll(await values(page, 'R'), full.cross_attention[1][0][2], 0.5e-4 + 2e-6, 'layer 1 head 0 cross weights');
      clean(log);
    } finally { await page.close(); }
  });

  test('unequal depths: each stack\'s layer control offers its own layers, with its numbers', async () => {
    for (const [doc, enc, dec] of [[distil, 3, 2], [deepdec, 2, 3]]) {
      const d = doc.data();
      assert.equal(d.encoder_attention.length, enc);
      assert.equal(d.cross_attention.length, dec);
      const { page, log } = await openPage(browser.ctx, doc.html);
      const options = () => page.$$eval('#layer-select option', els => els.map(e => e.textContent.trim()));
      const range = n => Array.from({ length: n }, (_, i) => 'Layer ' + i);
      try {
        assert.deepEqual(await options(), range(enc), 'the encoder\'s layers');
        /* the encoder's last layer, then cross attention: the decoder's layers, the same layer where it has it */
        await page.selectOption('#layer-select', String(enc - 1));
        await settle(page);
        await clickAndRender(page, '#stack-seg [data-stack="cross"]');
        assert.deepEqual(await options(), range(dec), 'cross attention offers the decoder\'s layers');
        const li = Math.min(enc, dec) - 1;
        assert.equal(await page.evaluate(() => document.body.dataset.layer), String(li));
        await page.selectOption('#layer-select', String(dec - 1));
        await settle(page);
        assert.equal(await page.evaluate(() => document.body.dataset.layer), String(dec - 1));
        await page.hover(side('L') + '[data-k="2"]');
        await settle(page);
        closeAll(await values(page, 'R'), d.cross_attention[dec - 1][0][2], 0.5e-4 + 2e-6, 'last decoder layer cross weights');
        await page.mouse.move(5, 5);
        await clickAndRender(page, '#stack-seg [data-stack="decoder"]');
        assert.deepEqual(await options(), range(dec), 'the decoder\'s layers');
        await clickAndRender(page, '#stack-seg [data-stack="encoder"]');
        assert.deepEqual(await options(), range(enc), 'back to the encoder\'s layers');
        await clickAndRender(page, '#tab-model');
        await settle(page);
        await clickAndRender(page, '#stack-seg [data-stack="cross"]');
        await settle(page);
        clean(log);
      } finally { await page.close(); }
    }
  });

  test('screenshots in both themes (head view on cross attention, model view on the encoder)', async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    for (const theme of ['light', 'dark']) {
      const { page, log } = await openPage(browser.ctx, bart.html, { theme });
      try {
        await clickAndRender(page, '#stack-seg [data-stack="cross"]');
        await page.hover(side('L') + '[data-k="3"]');
        await settle(page);
        const shot = path.join(SHOTS, 'seq2seq-cross-' + theme + '.png');
        await (await page.$('#main')).screenshot({ path: shot });
        /* the whole page: the header's Stack control with the model's name */
        await page.screenshot({ path: path.join(SHOTS, 'seq2seq-page-' + theme + '.png') });
        assert.ok(fs.statSync(shot).size > 10000);
        await page.mouse.move(5, 5);
        await clickAndRender(page, '#stack-seg [data-stack="encoder"]');
        await clickAndRender(page, '#tab-model');
        await settle(page);
        const shot2 = path.join(SHOTS, 'seq2seq-model-' + theme + '.png');
        await (await page.$('#main')).screenshot({ path: shot2 });
        assert.ok(fs.statSync(shot2).size > 10000);
        clean(log);
      } finally { await page.close(); }
    }
  });
});
