// notebook_check.mjs — the outputs of the executed example notebook (written by
// python/tests/test_notebook.py as a host page that sets each text/html output as
// innerHTML, as a notebook front end does) in headless Chromium with every request
// refused: each output's sandboxed iframe draws its page, nothing is requested, no
// console error; the page is isolated from the host and its own CSP holds inside.
// Not a *.test.mjs: tests/ref/python_check.sh runs it after the notebook ran.
//   node tests/browser/notebook_check.mjs HOST.html [SCREENSHOT.png]
// Prints PASS/FAIL lines; exit 1 on a failure.
import fs from 'node:fs';
import { launch, settle } from './lib.mjs';

const [host, shot] = process.argv.slice(2);
let failed = 0;
const result = (name, ok, why) => {
  console.log(ok ? `PASS ${name}` : `FAIL ${name}: ${why}`);
  if (!ok) failed++;
};

const { ctx, close } = await launch();
try {
  const page = await ctx.newPage();
  await page.setViewportSize({ width: 1280, height: 820 });
  const url = 'file://' + host;
  const log = { requests: [], blocked: [], console: [], errors: [] };
  await ctx.route('**/*', route => {
    const u = route.request().url();
    if (u === url) return route.continue();
    log.blocked.push(u);
    return route.abort();
  });
  page.on('request', r => log.requests.push(r.url()));
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e && e.message ? e.message : e)));
  await page.goto(url);
  await page.waitForFunction(() => document.querySelectorAll('iframe').length === 3);
  const frames = page.frames().filter(f => f !== page.mainFrame());
  result('notebook: three outputs, each a srcdoc frame', frames.length === 3 && frames.every(f => f.url() === 'about:srcdoc'),
    frames.map(f => f.url()).join(' '));
  const views = [];
  for (const f of frames) {
    try {
      // Chromium pauses drawing in cross-origin frames scrolled out of view, as a reader's browser would
      await (await f.frameElement()).scrollIntoViewIfNeeded();
      await f.waitForFunction(() => document.body && document.body.dataset.ready === '1', null, { timeout: 30000 });
      await f.waitForFunction(() => document.body.dataset.loaded === '1', null, { timeout: 30000 });
      views.push(await f.evaluate(() => {
        const shown = document.querySelector('main .view:not([hidden])');
        const cvs = [...(shown ? shown.querySelectorAll('canvas') : [])];
        let ink = 0;
        for (const c of cvs) {
          if (!c.width || !c.height) continue;
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          for (let i = 3; i < d.length; i += 4) if (d[i]) ink++;
        }
        let parentBlocked = false;
        try { void window.parent.document.title; } catch { parentBlocked = true; }
        return {
          view: document.body.dataset.view, origin: window.origin, parentBlocked, ink,
          svgs: shown ? shown.querySelectorAll('svg *').length : 0,
          tokens: shown ? shown.querySelectorAll('.tok').length : 0,
          csp: (document.querySelector('meta[http-equiv="Content-Security-Policy"]') || {}).content || '',
          w: document.documentElement.clientWidth, h: document.documentElement.clientHeight,
        };
      }));
    } catch (e) {
      views.push({ error: String(e) });
    }
  }
  const want = ['head', 'model', 'neuron'];
  views.forEach((v, i) => {
    const name = `notebook output ${i + 1} (${want[i]} view)`;
    if (v.error) return result(name + ' draws', false, v.error);
    result(name + ' draws inside its iframe', v.view === want[i] && (v.ink > 1000 || v.svgs > 20),
      JSON.stringify(v));
    result(name + ' is isolated (opaque origin, no access to the notebook)', v.origin === 'null' && v.parentBlocked,
      JSON.stringify(v));
    result(name + ' keeps its CSP', /default-src 'none'/.test(v.csp), v.csp);
    result(name + ' is sized to be read', v.w >= 1000 && v.h >= 500, `${v.w}x${v.h}`);
  });
  if (views[0] && !views[0].error) result('head view lists the pair\'s 15 tokens twice', views[0].tokens === 30, String(views[0].tokens));
  // interaction works inside the sandbox: switch the first output to the matrix view
  try {
    const f = frames[0];
    await (await f.frameElement()).scrollIntoViewIfNeeded();
    const prev = await f.evaluate(() => document.body.dataset.rendered);
    await f.click('#tab-matrix');
    await f.waitForFunction(p => document.body.dataset.rendered !== p, prev, { timeout: 10000 });
    result('clicking a tab inside the iframe redraws it', await f.evaluate(() => document.body.dataset.view) === 'matrix', '');
    await f.click('#tab-head');
    await f.waitForFunction(() => document.body.dataset.view === 'head');
  } catch (e) {
    result('clicking a tab inside the iframe redraws it', false, String(e));
  }
  await settle(page);
  result('no request but the host file', log.blocked.length === 0 && log.requests.every(u => u === url),
    [...log.blocked, ...log.requests].join(' '));
  result('no console errors or page errors', log.console.length === 0 && log.errors.length === 0,
    [...log.console, ...log.errors].join(' | '));
  // the page's CSP still refuses network access from inside the frame (checked last: it logs a violation)
  const viol = await frames[0].evaluate(() => new Promise(resolve => {
    document.addEventListener('securitypolicyviolation', e => resolve(e.violatedDirective), { once: true });
    fetch('https://example.invalid/x').catch(() => {});
    setTimeout(() => resolve('none'), 3000);
  }));
  result('a fetch from inside the frame is refused by the page\'s CSP', /connect-src|default-src/.test(viol), viol);
  result('the refused fetch never reached the network', log.blocked.length === 0, log.blocked.join(' '));
  if (shot) {
    // the first output cell: its code and the head view drawn under it
    await page.evaluate(() => window.scrollTo(0, 0));
    await settle(page);
    const box = await page.$eval('.cell', e => { const r = e.getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
    await page.setViewportSize({ width: 1280, height: Math.ceil(box.y + box.h + 16) });
    await settle(page);
    await page.screenshot({ path: shot, clip: { x: 0, y: 0, width: 1280, height: Math.ceil(box.y + box.h + 16) } });
    const kb = fs.statSync(shot).size / 1024;
    result(`screenshot ${shot} (${kb.toFixed(0)} KB) under 300 KB`, kb < 300, kb.toFixed(0) + ' KB');
  }
} finally {
  await close();
}
process.exit(failed ? 1 : 0);
