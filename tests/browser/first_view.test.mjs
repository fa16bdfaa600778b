// first_view.test.mjs — what a page shows before anything is clicked: the head view with every head drawn,
// as bertviz's head view opens (--head H focuses one, --show-heads a list); and on a decoder page with
// --generate and --predict, the head view's drawing within the first 1,000 px of a 1,400 x 1,000 window
// (the header's notes fold to a line, the Input row to one line beside the Generated one), on a header at its
// fullest. Screenshots of that page in both themes go to tests/browser/screenshots/ for looking at.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, SHOTS, cliPage, launch, openPage, settle, clean, canvasHash } from './lib.mjs';

let browser;
const pages = {};
before(async () => {
  pages.all = cliPage('first-all', ['the cat sat on the mat']);
  pages.one = cliPage('first-one', ['--head', '3', 'the cat sat on the mat']);
  pages.some = cliPage('first-some', ['--show-heads', '1,4', 'the cat sat on the mat']);
  /* the header at its fullest: gpt-oss's (grouped queries, a sliding window, sinks, experts), a prompt cut to its 64
   * positions, a selection of layers, predictions and a generation */
  const prompt = 'Once upon a time, in a small village by the sea, there lived an old fisherman who walked down to the harbor ' +
    'every morning to check his boat and his nets, and every evening he told the children what the sea had given him that day.';
  pages.dec = cliPage('first-decoder', ['--model', path.join(ROOT, 'tests/data/small-gptoss'), '--max-tokens', '40', '--layers', '1',
    '--generate', '20', '--predict', '5', prompt]);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

const activeChips = page => page.$$eval('.head-chip', els => els.filter(e => !e.classList.contains('off')).map(e => +e.dataset.h));

test('the head view opens with every head drawn, as bertviz\'s does; --head H focuses one; --show-heads a list', async () => {
  const H = pages.all.data().config.heads;
  for (const [name, want] of [['all', Array.from({ length: H }, (_, h) => h)], ['one', [3]], ['some', [1, 4]]]) {
    const { page, log } = await openPage(browser.ctx, pages[name].html);
    try {
      assert.deepEqual(await page.evaluate(() => window.attnviz.state.active.map((a, h) => (a ? h : -1)).filter(h => h >= 0)), want, name);
      assert.deepEqual(await activeChips(page), want, name + ': the chips say so');
      assert.ok((await canvasHash(page, '#view-head .hv-lines')).nonzero > 0, name + ': lines drawn');
      if (name === 'all') assert.match(await page.textContent('#view-head .view-title'), new RegExp('÷ √' + H + ' \\(the heads shown share the ink\\)'));
      clean(log);
    } finally { await page.close(); }
  }
});

test('a decoder page with --generate and --predict: the head view is drawn within the first 1,000 px of a 1,400 x 1,000 window', async () => {
  const d = pages.dec.data();
  assert.equal(d.generation.generated_tokens, 20);
  for (const theme of ['light', 'dark']) {
    const { page, log } = await openPage(browser.ctx, pages.dec.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      await settle(page);
      const top = await page.evaluate(() => document.querySelector('#view-head .hv-lines').getBoundingClientRect().top + window.scrollY);
      assert.ok(top < 1000, theme + ': the head view starts at ' + top + ' px');
      console.log('# ' + theme + ': the head view\'s drawing starts at ' + Math.round(top) + ' px');
      assert.ok(await page.isVisible('#pred-strip') && await page.isVisible('#gen-panel') && await page.isVisible('.note.fold'),
        'the strips and notes are there');
      /* the generated text's box shows its end: the continuation */
      assert.ok(await page.$eval('#gen-text', e => e.scrollTop + e.clientHeight >= e.scrollHeight - 1));
      /* the grouped-query note keeps one line until clicked */
      const note = page.locator('.note.fold').first();
      const h1 = (await note.boundingBox()).height;
      await note.click();
      assert.equal(await note.getAttribute('aria-expanded'), 'true');
      assert.ok((await note.boundingBox()).height >= h1);
      await note.click();
      await page.screenshot({ path: path.join(SHOTS, 'first-decoder-' + theme + '.png') });
      clean(log);
    } finally { await page.close(); }
  }
});
