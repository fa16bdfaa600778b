// views.test.mjs — views register themselves (templates/views.js): every templates/view_*.js is one
// registered view, the tabs and keys 1..n are the registered views in their order (head, model, neuron,
// matrix; diff on attnviz diff's pages), a view added as one more file in a --templates folder gets its
// tab, key and section with nothing else changed, and a clash in the registry is a page error. --view
// is checked against the same registrations: a bad name is one line listing them, exit 2. The page
// reads the config's feature flags: the q/k-norm note comes from "qk_norm", not the model's name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { ROOT, OUT, ATTNVIZ, DEMO, launch, openPage, settle, clean, ensureBuilt, cliPage } from './lib.mjs';

const TEMPLATES = path.join(ROOT, 'templates');
const FILES = fs.readdirSync(TEMPLATES).filter(f => /^view_.*\.js$/.test(f)).map(f => f.slice(5, -3));
let browser;
before(async () => {
  ensureBuilt();
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

function diffPage(name, args) {
  const h = path.join(OUT, name + '.html');
  execFileSync(ATTNVIZ, ['diff', '--quiet', '--html', h, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  return h;
}
/* the page's tabs, its registered views, and the view keys 1..n select in turn (keyed: the
 * views they opened, each in its place; a tab this page cannot show is disabled, and its key
 * leaves the view as it was) */
async function tabsAndKeys(page) {
  const tabs = await page.$$eval('#tabs [data-view]', bs => bs.map(b => b.dataset.view));
  const disabled = await page.$$eval('#tabs [data-view]', bs => bs.filter(b => b.disabled).map(b => b.dataset.view));
  const sections = await page.$$eval('main .view', ss => ss.map(s => s.dataset.view));
  const views = await page.evaluate(() => window.attnviz.views);
  const keyed = [];
  for (let k = tabs.length; k >= 1; k--) {
    const prev = await page.evaluate(() => document.body.dataset.rendered);
    if (disabled.includes(tabs[k - 1])) {
      const was = await page.evaluate(() => document.body.dataset.view);
      await page.keyboard.press(String(k));
      await settle(page);
      assert.equal(await page.evaluate(() => document.body.dataset.view), was, 'the key of disabled ' + tabs[k - 1]);
      keyed.unshift(tabs[k - 1]);
      continue;
    }
    await page.keyboard.press(String(k));
    await page.waitForFunction(p => document.body.dataset.rendered !== p, prev);
    keyed.unshift(await page.evaluate(() => document.body.dataset.view));
  }
  await settle(page);
  return { tabs, sections, views, keyed, disabled };
}

test('the tabs, sections and keys are the registered views in order, one per view_*.js file', async () => {
  const plain = cliPage('views-plain', ['--qk', 'time flies like an arrow']);
  const diff = diffPage('views-diff', ['--model', DEMO, 'the cat sat on the mat', 'the dog sat on a mat']);
  const image = cliPage('views-image', ['--model', path.join(ROOT, 'tests/data/small-vit'), '--image', path.join(ROOT, 'tests/data/vision-picture.png'),
    '--measure', 'alti,rollout']);
  /* a page has the views it can show: the diff view on diff pages, the Image view on an image run's, Compare on a
   * page with a measure (--measure) */
  for (const [html, want, off] of [[plain.html, ['head', 'model', 'neuron', 'matrix', 'lens', 'attribution', 'flow'], ['lens', 'attribution', 'flow']],
    [diff, ['head', 'model', 'neuron', 'matrix', 'diff', 'lens', 'attribution', 'flow'], ['lens', 'attribution', 'flow']],
    [image.html, ['head', 'model', 'neuron', 'matrix', 'lens', 'attribution', 'flow', 'compare', 'image'], ['lens', 'attribution', 'flow']]]) {
    const { page, log } = await openPage(browser.ctx, html);
    try {
      const r = await tabsAndKeys(page);
      assert.deepEqual(r.views, want);
      assert.deepEqual(r.tabs, want);
      assert.deepEqual(r.sections, want);
      assert.deepEqual(r.keyed, want);
      /* the lens and flow views need --logit-lens / --attribution / --ablate / --flow data, which these pages lack */
      assert.deepEqual(r.disabled, off);
      clean(log);
    } finally { await page.close(); }
  }
  /* the diff and image pages have every view there is between them: one per file */
  assert.deepEqual([...FILES].sort(), ['attribution', 'compare', 'diff', 'flow', 'head', 'image', 'lens', 'matrix', 'model', 'neuron']);
});

test('a view is one file: a --templates folder with one more view_*.js has its tab, key and section', async () => {
  const dir = path.join(OUT, 'views-templates');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(TEMPLATES, dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'view_extra.js'), `/* global Draw, Views */
(() => {
Views.register({
  id: 'extra',
  order: 9,
  label: 'Extra view',
  uses: { layer: true, mode: false, heads: true, merge: false, contrast: false },
  picksHead: () => true,
  draw(host, c) {
    host.textContent = '';
    host.appendChild(Draw.el('div', 'extra-out', 'layer ' + c.li + ' head ' + c.focus));
    return null;
  },
  exportTitle: m => m + ' · extra',
});
})();
`);
  const p = cliPage('views-extra', ['--templates', dir, '--layer', '1', '--head', '3', 'time flies like an arrow']);
  const { page, log } = await openPage(browser.ctx, p.html);
  try {
    const r = await tabsAndKeys(page);
    assert.deepEqual(r.tabs, ['head', 'model', 'neuron', 'matrix', 'lens', 'attribution', 'flow', 'extra']);
    assert.deepEqual(r.keyed, r.tabs);
    assert.equal(await page.textContent('#tab-extra'), 'Extra view');
    await page.keyboard.press('8');
    await page.waitForSelector('#view-extra .extra-out');
    assert.equal(await page.textContent('#view-extra .extra-out'), 'layer 1 head 3');
    assert.equal(await page.isVisible('#heads-bar'), true);
    assert.equal(await page.isVisible('#ctl-mode'), false);
    clean(log);
  } finally { await page.close(); }

  fs.rmSync(dir, { recursive: true, force: true });
});

test('the registry refuses a clash with a page error', async () => {
  const dir = path.join(OUT, 'views-clash-templates');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(TEMPLATES, dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'view_zz.js'), "/* global Views */\nViews.register({ id: 'zz', order: 2, label: 'Z', uses: {}, picksHead: () => false, draw: () => null });\n");
  const p = cliPage('views-clash', ['--templates', dir, 'time flies like an arrow']);
  const page = await browser.ctx.newPage();
  const errors = [];
  page.on('pageerror', e => errors.push(String(e.message)));
  try {
    await page.goto('file://' + p.html);
    await page.waitForTimeout(300);
    assert.deepEqual(errors, ['Views.register: zz has the id or order of model']);
    assert.notEqual(await page.evaluate(() => document.body.dataset.ready), '1');
  } finally { await page.close(); }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('--view is checked against the registered views: one line naming them, exit 2', async () => {
  const run = args => spawnSync(ATTNVIZ, args, { encoding: 'utf8', input: '' });
  const names = 'head, model, neuron, matrix, lens, attribution, flow, compare or image';
  let r = run(['--model', DEMO, '--view', 'nope', 'time flies']);
  assert.equal(r.status, 2);
  assert.equal(r.stdout, '');
  assert.equal(r.stderr, `attnviz: --view is ${names}, not 'nope' (see attnviz --help)\n`);
  r = run(['--model', DEMO, '--view', 'diff', 'time flies']);
  assert.equal(r.status, 2);
  assert.equal(r.stderr, `attnviz: --view is ${names}, not 'diff' (see attnviz --help)\n`);
  r = run(['diff', '--model', DEMO, '--view', 'Head', 'time flies', 'fruit flies']);
  assert.equal(r.status, 2);
  assert.equal(r.stderr, `attnviz: --view is ${names} (or diff), not 'Head' (see attnviz --help)\n`);
  /* the names are the pages' registered views, in tab order: an ordinary page's, then the diff page's others */
  const join = a => (a.length === 1 ? a[0] : a.slice(0, -1).join(', ') + ' or ' + a[a.length - 1]);
  const h = diffPage('views-diff-open', ['--model', DEMO, '--view', 'neuron', 'the cat sat', 'the dog sat']);
  const p = cliPage('views-plain-open', ['--measure', 'norm', '--view', 'matrix', 'time flies']); /* with Compare (needs: 'measures') */
  const seen = {};
  for (const [k, file, opened] of [['diff', h, 'neuron'], ['plain', p.html, 'matrix']]) {
    const { page, log } = await openPage(browser.ctx, file);
    try {
      seen[k] = await page.evaluate(() => window.attnviz.views);
      assert.equal(await page.evaluate(() => document.body.dataset.view), opened);
      clean(log);
    } finally { await page.close(); }
  }
  /* an image run's page adds its Image view (needs: 'image'), a diff page its diff view */
  assert.equal(join([...seen.plain, 'image']), names);
  assert.equal(join([...seen.plain, 'image']) + ' (or ' + join(seen.diff.filter(v => !seen.plain.includes(v))) + ')', names + ' (or diff)');
  /* every registered view opens with --view */
  for (const v of ['head', 'model', 'neuron', 'matrix']) {
    const p = cliPage('views-open-' + v, ['--qk', '--view', v, 'time flies like an arrow']);
    const o = await openPage(browser.ctx, p.html);
    try {
      assert.equal(await o.page.evaluate(() => document.body.dataset.view), v);
      clean(o.log);
    } finally { await o.page.close(); }
  }
});

test('the q/k-norm note follows the config\'s qk_norm flag, not the model\'s name', async () => {
  const pages = {};
  for (const fam of ['qwen3', 'mistral']) {
    const dir = path.join(OUT, 'views-' + fam);
    fs.mkdirSync(dir, { recursive: true });
    for (const f of ['config.json', 'model.safetensors']) fs.copyFileSync(path.join(ROOT, 'tests/data/small-' + fam, f), path.join(dir, f));
    fs.copyFileSync(path.join(ROOT, 'tests/data/small-llama/tokenizer.json'), path.join(dir, 'tokenizer.json'));
    pages[fam] = cliPage('views-' + fam, ['--model', dir, 'the cat sat in the sun']);
  }
  assert.equal(pages.qwen3.data().config.qk_norm, true);
  assert.equal('qk_norm' in pages.mistral.data().config, false);
  for (const [fam, want] of [['qwen3', true], ['mistral', false]]) {
    const { page, log } = await openPage(browser.ctx, pages[fam].html);
    try {
      const notes = await page.textContent('#notes');
      assert.match(notes, /after rotary positions/);
      assert.equal(/and the per-head q\/k norm/.test(notes), want, fam);
      clean(log);
    } finally { await page.close(); }
  }
  /* the same qwen3 document with its model_type renamed: the note stays (the flag decides) */
  const meta = path.join(OUT, 'views-qwen3.html');
  const renamed = path.join(OUT, 'views-qwen3-renamed.html');
  fs.writeFileSync(renamed, fs.readFileSync(meta, 'utf8').replace('"model_type":"qwen3"', '"model_type":"renamed"'));
  const { page, log } = await openPage(browser.ctx, renamed);
  try {
    assert.match(await page.textContent('#model-config'), /^RENAMED/);
    assert.match(await page.textContent('#notes'), /and the per-head q\/k norm/);
    clean(log);
  } finally { await page.close(); }
});
