// bench_page_size.mjs — what a page's size costs the browser (a report, not a
// pass/fail test): for each page file given, in headless chromium at
// 1,400 x 1,000, the time to interactive (the first view drawn), the time to
// every layer decoded, the JS heap then, the model view's drawing time, and the peak resident memory of
// chromium's processes (every process under this one, sampled from /proc).
// docs/long-inputs.md chose the long page's bound from these figures.
//   node tests/browser/bench_page_size.mjs PAGE.html...
import fs from 'node:fs';
import { launch, openPage } from './lib.mjs';

function descendants(pid) {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = fs.readFileSync('/proc/' + d + '/stat', 'utf8');
      const ppid = +st.slice(st.lastIndexOf(')') + 2).split(' ')[1];
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(+d);
    } catch { /* gone */ }
  }
  const out = [], todo = [pid];
  while (todo.length) for (const k of kids.get(todo.pop()) || []) { out.push(k); todo.push(k); }
  return out;
}
function rssMB() {
  let kb = 0;
  for (const p of descendants(process.pid)) {
    try { kb += +/VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/' + p + '/status', 'utf8'))[1]; } catch { /* gone */ }
  }
  return kb / 1024;
}

const files = process.argv.slice(2);
console.log('page size vs the browser: file MB, interactive s, all layers decoded s, JS heap MB, model view drawn s, chromium peak RSS MB');
for (const file of files) {
  const browser = await launch();
  const base = rssMB();
  let peak = base;
  const timer = setInterval(() => { peak = Math.max(peak, rssMB()); }, 100);
  const t0 = Date.now();
  let ready = NaN, loaded = NaN, heap = NaN, model = NaN, note = '';
  try {
    const { page, log } = await openPage(browser.ctx, file, { viewport: { width: 1400, height: 1000 } });
    ready = (Date.now() - t0) / 1e3;
    /* a long input's page (zoom tiles: no whole layer to decode) is loaded once it is interactive */
    const long = await page.evaluate(() => /"tiles":\{/.test((document.getElementById('av-meta') || {}).textContent || ''));
    if (!long) await page.waitForFunction(() => document.body.dataset.loaded === '1', null, { timeout: 300000 });
    loaded = (Date.now() - t0) / 1e3;
    const m = await page.evaluate(() => performance.memory ? performance.memory.usedJSHeapSize : NaN);
    heap = m / 1048576;
    const t1 = Date.now();
    await page.click('#tab-model');
    await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1', null, { timeout: 300000 });
    model = (Date.now() - t1) / 1e3;
    if (log.errors.length) note = ' errors: ' + log.errors.join('; ').slice(0, 200);
  } catch (err) {
    note = ' FAILED: ' + String(err.message || err).split('\n')[0];
  }
  clearInterval(timer);
  peak = Math.max(peak, rssMB());
  console.log([file.split('/').pop(), (fs.statSync(file).size / 1e6).toFixed(1), ready.toFixed(1), loaded.toFixed(1),
    heap.toFixed(0), model.toFixed(1), peak.toFixed(0)].join('  ') + note);
  await browser.close();
}
