// bench_page.mjs — size and speed of the page (a report, not a pass/fail test).
//   node tests/browser/bench_page.mjs [--runs N]
// For each case: file size (and the payload's share), the time html_write_doc
// took, and in headless chromium the time from navigation start to
// "interactive" (document.body.dataset.ready = "1": the first view drawn and
// answering input), to every layer decoded, and to the model view drawn.
// Cases: "time flies like an arrow" through ./attnviz and the demo model
// (2 x 12 heads), the same 7 tokens and 512 tokens in bert-base shape
// (12 x 12 heads, d_head 64) from the synthetic fixture, with queries/keys.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { ATTNVIZ, DEMO, OUT, ensureFixture, launch, openPage } from './lib.mjs';

const runs = +(process.argv[process.argv.indexOf('--runs') + 1] || 0) || 3;

function writeCli(name, args) {
  const html = OUT + '/' + name + '.html';
  const out = execFileSync(ATTNVIZ, ['--model', DEMO, '--profile', '--quiet', '--html', html, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  void out;
  return { html, writeMs: null };
}
function writeFixture(name, args) {
  const fx = ensureFixture();
  const html = OUT + '/' + name + '.html';
  const r = execFileSync(fx, [html, '/dev/null', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  void r;
  /* the fixture prints html_write_doc's time on stderr; run again to capture it */
  const err = execFileSync('sh', ['-c', `"${fx}" "${html}" /dev/null ${args.map(a => `'${a}'`).join(' ')} 2>&1 >/dev/null`]).toString();
  const m = /html_write_doc: ([\d.]+) ms/.exec(err);
  return { html, writeMs: m ? +m[1] : null };
}
function payloadBytes(html) {
  const s = fs.readFileSync(html, 'latin1');
  let att = 0, qk = 0;
  for (const m of s.matchAll(/id="av-(att|qk)-\d+" data-z="\d+">([^<]*)</g)) (m[1] === 'att' ? (att += m[2].length) : (qk += m[2].length));
  return { total: s.length, att, qk };
}
const median = a => { const b = [...a].sort((x, y) => x - y); return b[Math.floor(b.length / 2)]; };
const mb = b => (b / 1e6).toFixed(2) + ' MB';
const kb = b => (b / 1e3).toFixed(1) + ' KB';

const cases = [
  { name: 'demo 7 tokens (2x12, --qk)', budget: '300 KB + q/k, 200 ms', make: () => writeCli('bench-demo7', ['--qk', 'time flies like an arrow']) },
  { name: 'bert-base shape, 7 tokens, no q/k', budget: '300 KB, 200 ms', make: () => writeFixture('bench-7', ['--n', '7', '--no-qk']) },
  { name: 'bert-base shape, 7 tokens, q/k', budget: '300 KB + q/k, 200 ms', make: () => writeFixture('bench-7qk', ['--n', '7']) },
  { name: 'bert-base shape, 512 tokens, no q/k', budget: '40 MB, 2 s', make: () => writeFixture('bench-512', ['--n', '512', '--no-qk', '--pair']) },
  { name: 'bert-base shape, 512 tokens, q/k', budget: '40 MB, 2 s', make: () => writeFixture('bench-512qk', ['--n', '512', '--pair']) },
];

const browser = await launch();
console.log('attnviz page benchmark (' + runs + ' runs each after a warm-up, median)\n');
for (const c of cases) {
  const { html, writeMs } = c.make();
  const size = payloadBytes(html);
  const ready = [], loaded = [], model = [];
  { const w = await openPage(browser.ctx, html); await w.page.close(); } /* warm-up: file cache, code cache */
  for (let r = 0; r < runs; r++) {
    const { page, log } = await openPage(browser.ctx, html);
    ready.push(await page.evaluate(() => window.attnviz.readyMs));
    await page.waitForFunction(() => document.body.dataset.loaded === '1', null, { timeout: 120000 });
    loaded.push(await page.evaluate(() => performance.now()));
    const t0 = await page.evaluate(() => performance.now());
    await page.click('#tab-model');
    await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1', null, { timeout: 120000 });
    model.push((await page.evaluate(() => performance.now())) - t0);
    if (log.errors.length || log.console.length || log.blocked.length) console.log('  !! errors:', log.errors, log.console, log.blocked);
    await page.close();
  }
  console.log(c.name + '   (budget ' + c.budget + ')');
  console.log('  file ' + (size.total > 2e6 ? mb(size.total) : kb(size.total)) + '  (attention ' + (size.att > 2e6 ? mb(size.att) : kb(size.att)) +
    ', q/k ' + (size.qk > 2e6 ? mb(size.qk) : kb(size.qk)) + ', page code+meta ' + kb(size.total - size.att - size.qk) + ')');
  if (writeMs !== null) console.log('  html_write_doc ' + writeMs.toFixed(0) + ' ms');
  console.log('  interactive ' + median(ready).toFixed(0) + ' ms after navigation start; all layers decoded ' + median(loaded).toFixed(0) +
    ' ms; model view drawn in ' + median(model).toFixed(0) + ' ms');
}
await browser.close();
