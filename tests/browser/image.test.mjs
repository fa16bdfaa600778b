// image.test.mjs — the Image view of an image run (attnviz --image; tests/data's small-vit, small-dinov2 and
// small-siglip on tests/data/vision-picture.png): the page opens on it with the picture and its overlay
// drawn, offline; picking another query (every query, a clicked patch, SigLIP's pooling head) and
// another mode redraws it, and the shares it lists are the JSON's attention; the head grid has a
// thumbnail per head; the text views show patch tokens as pictures of their patch. Screenshots of both
// themes at 1,400 x 1,000 into tests/browser/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { ROOT, SHOTS, cliPage, launch, openPage, settle, clean, canvasHash, clickAndRender } from './lib.mjs';

const PIC = path.join(ROOT, 'tests/data/vision-picture.png');
const model = name => path.join(ROOT, 'tests/data', name);
let browser;
before(async () => { browser = await launch(); });
after(async () => { if (browser) await browser.close(); });

const FIG = '#view-image .iv-fig canvas';

test('the page of an image run opens on the Image view: the picture and the class token\'s overlay, offline', async () => {
  const p = cliPage('image-vit', ['--model', model('small-vit'), '--image', PIC]);
  const d = p.data();
  const { page, log } = await openPage(browser.ctx, p.html, { viewport: { width: 1400, height: 1000 } });
  try {
    assert.equal(await page.evaluate(() => document.body.dataset.view), 'image');
    await page.waitForSelector('#view-image[data-drawn="1"]');
    const h = await canvasHash(page, FIG);
    assert.ok(h && h.nonzero > 0, 'the overlay canvas is drawn');
    assert.equal(await page.getAttribute('#view-image', 'data-query'), '0');
    const buttons = await page.$$eval('#view-image .iv-q button', bs => bs.map(b => b.textContent));
    assert.deepEqual(buttons, ['[CLS]', 'every query']);
    /* the listed shares are the JSON's: layer 0, head 0, the class token's row */
    const row = d.attention[0][0][0];
    const shares = await page.$$eval('#view-image .iv-card:nth-child(2) .iv-row:not(.hd)', rs => rs.map(r => [...r.children].map(c => c.textContent)));
    assert.equal(shares[0][0], '[CLS]');
    /* the page's weights are the JSON's to 4 decimals (its payload's codes): a sum of 16 within 0.1% */
    assert.ok(Math.abs(parseFloat(shares[0][2]) - 100 * row[0]) <= 0.06, shares[0][2] + ' vs ' + row[0]);
    assert.ok(Math.abs(parseFloat(shares[1][2]) - 100 * row.slice(1).reduce((a, b) => a + b, 0)) <= 0.1, shares[1][2]);
    /* one thumbnail per head, drawn */
    assert.equal(await page.$$eval('#view-image .iv-head canvas', cs => cs.length), d.config.heads);
    clean(log);
  } finally { await page.close(); }
});

test('a query change redraws the overlay: every query, a clicked patch, another mode', async () => {
  const p = cliPage('image-vit-q', ['--model', model('small-vit'), '--image', PIC, '--head', '0']); /* one head (a page opens on all) */
  const d = p.data();
  const { page, log } = await openPage(browser.ctx, p.html, { viewport: { width: 1400, height: 1000 } });
  try {
    await page.waitForSelector('#view-image[data-drawn="1"]');
    const h0 = await canvasHash(page, FIG);
    await page.click('#view-image .iv-q button:nth-child(2)');
    await settle(page);
    assert.equal(await page.getAttribute('#view-image', 'data-query'), 'all');
    const h1 = await canvasHash(page, FIG);
    assert.notEqual(h1.hash, h0.hash, 'every query draws another overlay');
    /* a click on the picture's bottom-right patch makes it the query (the grid is 4 x 4 after [CLS]) */
    const box = await page.$eval(FIG, c => { const r = c.getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
    await page.mouse.click(box.x + box.w * 0.9, box.y + box.h * 0.9);
    await settle(page);
    assert.equal(await page.getAttribute('#view-image', 'data-query'), '16');
    const h2 = await canvasHash(page, FIG);
    assert.notEqual(h2.hash, h1.hash);
    const shares = await page.$$eval('#view-image .iv-card:nth-child(2) .iv-row:not(.hd)', rs => rs.map(r => r.children[2].textContent));
    assert.ok(Math.abs(parseFloat(shares[0]) - 100 * d.attention[0][0][16][0]) <= 0.06, 'the patch\'s attention to [CLS]');
    /* the mean of the (one) active head, then the rollout (A + I, renormalized): each redraws, the query kept */
    await clickAndRender(page, '#mode-seg [data-mode=mean]');
    await page.waitForSelector('#view-image[data-drawn="1"]');
    assert.match(await page.textContent('#view-image h2'), /mean of 1 head/);
    assert.equal(await page.getAttribute('#view-image', 'data-query'), '16');
    await clickAndRender(page, '#mode-seg [data-mode=rollout]');
    await page.waitForSelector('#view-image[data-drawn="1"]');
    assert.match(await page.textContent('#view-image h2'), /rollout through layer 0/);
    const h4 = await canvasHash(page, FIG);
    assert.notEqual(h4.hash, h2.hash, 'the rollout draws another overlay');
    clean(log);
  } finally { await page.close(); }
});

test('registers and SigLIP: their queries, the pooling head, the image-text card; patch thumbnails in the head view', async () => {
  const dino = cliPage('image-dinov2', ['--model', model('small-dinov2'), '--image', PIC]);
  let { page, log } = await openPage(browser.ctx, dino.html, { viewport: { width: 1400, height: 1000 } });
  try {
    await page.waitForSelector('#view-image[data-drawn="1"]');
    const buttons = await page.$$eval('#view-image .iv-q button', bs => bs.map(b => b.textContent));
    assert.deepEqual(buttons, ['[CLS]', '[REG1]', '[REG2]', 'every query']);
    await page.click('#view-image .iv-q button:nth-child(3)');
    await settle(page);
    assert.equal(await page.getAttribute('#view-image', 'data-query'), '2');
    clean(log);
  } finally { await page.close(); }
  const sig = cliPage('image-siglip', ['--model', model('small-siglip'), '--image', PIC, 'a photo of a red disc']);
  const d = sig.data();
  ({ page, log } = await openPage(browser.ctx, sig.html, { viewport: { width: 1400, height: 1000 } }));
  try {
    await page.waitForSelector('#view-image[data-drawn="1"]');
    /* no class token: the pooling head is the first query */
    assert.equal(await page.getAttribute('#view-image', 'data-query'), 'pool');
    const text = await page.textContent('#view-image .iv-text');
    assert.ok(text.includes(d.image.text.probability.toFixed(4)), text);
    /* the head view labels patches with their picture */
    await clickAndRender(page, '#tabs [data-view=head]');
    assert.ok(await page.$$eval('#view-head canvas.tok-thumb', cs => cs.length) >= 16);
    clean(log);
  } finally { await page.close(); }
});

test('screenshots of the Image view, both themes, 1,400 x 1,000', async () => {
  const p = cliPage('image-shot', ['--model', model('small-dinov2'), '--image', PIC]);
  for (const theme of ['light', 'dark']) {
    const { page, log } = await openPage(browser.ctx, p.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      await page.waitForSelector('#view-image[data-drawn="1"]');
      await settle(page);
      await page.screenshot({ path: path.join(SHOTS, 'image-' + theme + '.png') });
      clean(log);
    } finally { await page.close(); }
  }
});

test('a vision-language model (LLaVA): the picture\'s tokens in the decoder\'s sequence; the text after it queries them', async () => {
  const text = 'USER: <image>\nWhat is in the picture? ASSISTANT:';
  const p = cliPage('image-llava', ['--model', model('small-llava'), '--image', PIC, text]);
  const d = p.data();
  const im = d.image, last = d.tokens.length - 1;
  for (const theme of ['light', 'dark']) {
    const { page, log } = await openPage(browser.ctx, p.html, { theme, viewport: { width: 1400, height: 1000 } });
    try {
      assert.equal(await page.evaluate(() => document.body.dataset.view), 'image');
      await page.waitForSelector('#view-image[data-drawn="1"]');
      /* the default query: the last text token, which reads the picture (a causal decoder's tokens before it cannot) */
      assert.equal(await page.getAttribute('#view-image', 'data-query'), String(last));
      const buttons = await page.$$eval('#view-image .iv-q button', bs => bs.map(b => b.textContent));
      const after = d.tokens.map((t, i) => i).filter(i => im.token_kinds[i] === 'text' && i > im.image_tokens.at(-1));
      assert.deepEqual(buttons, [...after.map(i => d.display_tokens ? d.display_tokens[i] : d.tokens[i]), 'every query']);
      /* its share of the picture is the JSON's row over the image tokens (layer 0, head 0) */
      const row = d.attention[0][0][last], share = im.image_tokens.reduce((a, j) => a + row[j], 0);
      const rows = await page.$$eval('#view-image .iv-card:nth-child(2) .iv-row:not(.hd)', rs => rs.map(r => [...r.children].map(c => c.textContent)));
      assert.equal(rows.at(-1)[0], 'the picture');
      assert.ok(Math.abs(parseFloat(rows.at(-1)[2]) - 100 * share) <= 0.1, rows.at(-1)[2] + ' vs ' + share);
      await page.screenshot({ path: path.join(SHOTS, 'image-llava-' + theme + '.png') });
      /* the head view labels the image tokens with their patch */
      await clickAndRender(page, '#tabs [data-view=head]');
      assert.equal(await page.$$eval('#view-head .hv-left canvas.tok-thumb', cs => cs.length), im.image_tokens.length);
      clean(log);
    } finally { await page.close(); }
  }
});

test('the other tower\'s page: a whole SigLIP model\'s text tower over its text, a LLaVA\'s vision tower over its patches, linked', async () => {
  const sig = cliPage('image-towers', ['--model', model('small-siglip'), '--image', PIC, 'a photo of a red disc']);
  const d = sig.data();
  let { page, log } = await openPage(browser.ctx, sig.html, { viewport: { width: 1400, height: 1000 } });
  let href;
  try {
    await page.waitForSelector('#view-image[data-drawn="1"]');
    href = await page.$eval('#view-image .iv-card a', a => a.href);
    assert.ok(href.endsWith('image-towers.text.html'), href);
    clean(log);
  } finally { await page.close(); }
  /* the text tower's page: its tokens and layer 0 head 0's weights are the JSON's text attention */
  ({ page, log } = await openPage(browser.ctx, sig.html.replace(/\.html$/, '.text.html'), { viewport: { width: 1400, height: 1000 } }));
  try {
    assert.equal(await page.evaluate(() => document.body.dataset.view), 'head');
    const toks = await page.$$eval('#view-head .hv-left .tok .t', els => els.map(e => e.textContent));
    assert.deepEqual(toks, d.image.text.tokens);
    const A = await page.evaluate(() => Array.from(window.attnviz.data.headMatrix(0, 0)));
    const want = d.image.text.attention[0][0].flat();
    assert.ok(A.every((v, i) => Math.abs(v - want[i]) <= 5.01e-5), 'the text tower\'s weights');
    clean(log);
  } finally { await page.close(); }
  /* a LLaVA run's vision tower: the Image view over the tower's class token and patches */
  const lv = cliPage('image-towers-llava', ['--model', model('small-llava'), '--image', PIC, 'USER: <image> what is in the picture? ASSISTANT:']);
  ({ page, log } = await openPage(browser.ctx, lv.html.replace(/\.html$/, '.vision.html'), { viewport: { width: 1400, height: 1000 } }));
  try {
    await page.waitForSelector('#view-image[data-drawn="1"]');
    assert.equal(await page.getAttribute('#view-image', 'data-query'), '0');
    assert.deepEqual(await page.$$eval('#view-image .iv-q button', bs => bs.map(b => b.textContent)), ['[CLS]', 'every query']);
    assert.equal(await page.evaluate(() => window.attnviz.data.n), 17);
    clean(log);
  } finally { await page.close(); }
});
