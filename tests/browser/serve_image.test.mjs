// serve_image.test.mjs — a picture uploaded on attnviz serve's live page: the file picker of a vision
// model (tests/data's small-vit, small-siglip) sends the file to POST /api/image, and the page boots on
// the Image view of the server's run, its shares the CLI's --image JSON; a whole SigLIP model's text box
// re-runs the same picture with the text (the image-text card's probability the CLI's); a file the
// server refuses shows its error; a vision-language model (small-llava) runs the picture inside its text, the
// box starting with an example that places it. Screenshots of the live page in both themes at 1,400 x 1,000.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ATTNVIZ, OUT, ROOT, SHOTS, canvasHash, ensureBuilt, launch, settle, startServe } from './lib.mjs';

const PIC = path.join(ROOT, 'tests/data/vision-picture.png');
const JPG = path.join(ROOT, 'examples/images/coffee.jpg');
const model = name => path.join(ROOT, 'tests/data', name);
let srv = null, url = null, browser = null;

const cliJson = (args, name) => {
  const json = path.join(OUT, name + '.json');
  execFileSync(ATTNVIZ, ['--quiet', '--json', json, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(fs.readFileSync(json, 'utf8'));
};

before(async () => {
  ensureBuilt();
  srv = await startServe(['--model', model('small-vit'), '--model', model('small-siglip'), '--model', model('small-llava')]);
  url = srv.url;
  browser = await launch();
});
after(async () => {
  if (browser) await browser.close();
  await srv?.stop();
});

async function openLive(theme = 'light') {
  const page = await browser.ctx.newPage();
  await page.setViewportSize({ width: 1400, height: 1000 });
  await page.emulateMedia({ colorScheme: theme });
  const origin = new URL(url).origin;
  const log = { foreign: [], console: [], errors: [], posts: [] };
  page.on('request', r => {
    if (!r.url().startsWith(origin + '/') && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) log.foreign.push(r.url());
    if (r.method() === 'POST') log.posts.push(r.url().replace(origin, '').replace(/token=[0-9a-f]+/, 'token=…') + ' ' + (r.headers()['content-type'] || ''));
  });
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e && e.message ? e.message : e)));
  await page.goto(url);
  await page.waitForSelector('#live', { state: 'visible' });
  return { page, log };
}
/* waits for a run after `act` (a boot of the views on its meta) */
async function afterRun(page, act) {
  const prev = +(await page.evaluate(() => document.body.dataset.runs || 0));
  await act();
  await page.waitForFunction(p => +(document.body.dataset.runs || 0) > p && document.body.dataset.busy !== '1' &&
    document.body.dataset.ready === '1', prev, { timeout: 60000 });
  await settle(page);
}

test('live page: a picture chosen in the file picker runs on the server and opens the Image view (the CLI\'s numbers)', async () => {
  const { page, log } = await openLive();
  try {
    assert.equal(await page.isVisible('#live-image'), true, 'a vision model shows the picker');
    assert.equal(await page.isVisible('#live-text'), false, 'a vision tower alone reads no text');
    assert.match(await page.textContent('#live-status'), /Choose a picture/);
    await afterRun(page, () => page.setInputFiles('#live-image', PIC));
    assert.deepEqual(log.posts, ['/api/image?model=0&name=vision-picture.png image/png']);
    assert.match(await page.textContent('#top'), /vision-picture\.png/, 'the header names the file');
    assert.equal(await page.evaluate(() => document.body.dataset.view), 'image');
    await page.waitForSelector('#view-image[data-drawn="1"]');
    const h = await canvasHash(page, '#view-image .iv-fig canvas');
    assert.ok(h && h.nonzero > 0, 'the overlay is drawn');
    assert.match(await page.textContent('#live-status'), /48 × 40 RGB picture → 17 tokens \(4 × 4 patches\)/);
    /* the class token's shares (layer 0, head 0) are the CLI's --image JSON's */
    const d = cliJson(['--model', model('small-vit'), '--image', PIC], 'serve-image-vit');
    const row = d.attention[0][0][0];
    const shares = await page.$$eval('#view-image .iv-card:nth-child(2) .iv-row:not(.hd)', rs => rs.map(r => [...r.children].map(c => c.textContent)));
    assert.equal(shares[0][0], '[CLS]');
    assert.ok(Math.abs(parseFloat(shares[0][2]) - 100 * row[0]) <= 0.06, shares[0][2] + ' vs ' + row[0]);
    /* a click on a patch asks the server for its row: still drawn */
    const box = await page.$eval('#view-image .iv-fig canvas', c => { c.scrollIntoView({ block: 'center' }); const r = c.getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
    await page.mouse.click(box.x + box.w * 0.9, box.y + box.h * 0.9);
    await settle(page);
    assert.equal(await page.getAttribute('#view-image', 'data-query'), '16');
    for (const theme of ['light', 'dark']) {
      if (await page.evaluate(() => document.documentElement.dataset.theme) !== theme) {
        await page.click('#theme-btn');
        await page.waitForSelector('#view-image[data-drawn="1"]');
        await settle(page);
      }
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme);
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.mouse.move(1390, 10);
      await page.screenshot({ path: path.join(SHOTS, 'serve-image-' + theme + '.png') });
    }
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
    assert.deepEqual(log.foreign, []);
  } finally { await page.close(); }
});

test('live page: a whole SigLIP model takes the picture and a text; a refused file shows the server\'s error', async () => {
  const { page, log } = await openLive();
  try {
    await page.selectOption('#live-model', '1');
    assert.equal(await page.isVisible('#live-text'), true, 'a whole SigLIP model reads a text beside the picture');
    assert.equal(await page.isVisible('#live-text-b'), false);
    await afterRun(page, () => page.setInputFiles('#live-image', JPG));
    await afterRun(page, () => page.fill('#live-text', 'a cup of coffee'));
    assert.equal(log.posts.at(-1), '/api/image?model=1&text=a%20cup%20of%20coffee&name=coffee.jpg image/jpeg');
    const d = cliJson(['--model', model('small-siglip'), '--image', JPG, 'a cup of coffee'], 'serve-image-siglip');
    await page.waitForSelector('#view-image[data-drawn="1"]');
    const text = await page.textContent('#view-image .iv-text');
    assert.ok(text.includes(d.image.text.probability.toFixed(4)), text + ' vs ' + d.image.text.probability);
    /* a file that is not a picture: one line from the server, the page stays */
    fs.writeFileSync(path.join(OUT, 'not-a-picture.png'), 'hello\n');
    await page.setInputFiles('#live-image', path.join(OUT, 'not-a-picture.png'));
    await page.waitForFunction(() => document.querySelector('#live-status').dataset.kind === 'error');
    assert.match(await page.textContent('#live-status'), /Error: not-a-picture\.png: not a PNG or JPEG image/);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.foreign, []);
  } finally { await page.close(); }
});

test('live page: a vision-language model runs the picture inside its text, the box starting with an example that places it', async () => {
  const { page, log } = await openLive();
  try {
    await page.selectOption('#live-model', '2');
    assert.equal(await page.isVisible('#live-text'), true, 'a vision-language model reads a text with the picture');
    assert.equal(await page.isVisible('#live-image'), true);
    assert.equal(await page.isVisible('#live-chat-label'), false, 'the text is run as written');
    const example = await page.inputValue('#live-text');
    assert.match(example, /^USER: <image>\n.+ ASSISTANT:$/);
    await afterRun(page, () => page.setInputFiles('#live-image', PIC));
    assert.equal(log.posts.at(-1), '/api/image?model=2&text=' + encodeURIComponent(example) + '&name=vision-picture.png image/png');
    assert.equal(await page.evaluate(() => document.body.dataset.view), 'image');
    await page.waitForSelector('#view-image[data-drawn="1"]');
    const d = cliJson(['--model', model('small-llava'), '--image', PIC, example], 'serve-image-llava');
    assert.match(await page.textContent('#live-status'), new RegExp('48 × 40 RGB picture → ' + d.tokens.length + ' tokens \\(4 × 4 patches\\)'));
    const h = await canvasHash(page, '#view-image .iv-fig canvas');
    assert.ok(h && h.nonzero > 0, 'the overlay is drawn');
    assert.match(await page.textContent('#top'), /16 image tokens: 4 × 4 patches from position 3; vision tower: 17 tokens × 3 layers/,
      'the header says where the picture is, as the CLI\'s page does');
    for (const theme of ['light', 'dark']) {
      if (await page.evaluate(() => document.documentElement.dataset.theme) !== theme) {
        await page.click('#theme-btn');
        await page.waitForSelector('#view-image[data-drawn="1"]');
        await settle(page);
      }
      await page.evaluate(() => window.scrollTo(0, 0));
      await page.mouse.move(1390, 10);
      await page.screenshot({ path: path.join(SHOTS, 'serve-image-llava-' + theme + '.png') });
    }
    /* a text without the placeholder: the page says where to write it, and sends nothing */
    const sent = log.posts.length;
    await page.fill('#live-text', 'What is in the picture?');
    await page.waitForFunction(() => /Write <image> in the text where the picture goes/.test(document.querySelector('#live-status').textContent));
    await new Promise(r => setTimeout(r, 600));
    assert.equal(log.posts.length, sent);
    assert.deepEqual(log.errors, []);
    assert.deepEqual(log.console, []);
    assert.deepEqual(log.foreign, []);
  } finally { await page.close(); }
});
