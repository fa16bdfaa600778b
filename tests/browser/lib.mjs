// lib.mjs — shared helpers for the page's browser tests and benchmark:
// building pages (through ./attnviz and the synthetic tests/browser/page_fixture.c),
// starting `attnviz serve` on a free port, launching Debian's chromium through
// playwright-core, and watching every request and console message.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const OUT = path.join(ROOT, 'tests/out/browser');
export const SHOTS = path.join(ROOT, 'tests/browser/screenshots');
export const ATTNVIZ = path.join(ROOT, 'attnviz');
export const DEMO = path.join(ROOT, 'weights/demo');
export const FIXTURE = path.join(ROOT, 'build/page_fixture');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

fs.mkdirSync(OUT, { recursive: true });
fs.mkdirSync(SHOTS, { recursive: true });

function mtime(p) {
  try { return fs.statSync(p).mtimeMs; } catch { return 0; }
}

let built = false;
/** Brings ./attnviz (templates included) and the demo model up to date, once per run. */
export function ensureBuilt() {
  if (built || process.env.ATTNVIZ_NO_MAKE) return;
  execFileSync('make', ['-s', '-C', ROOT, 'attnviz', 'demo-model'], { stdio: ['ignore', 'ignore', 'inherit'] });
  built = true;
}

/** Builds build/page_fixture (synthetic pages) against build/libattnviz.a when stale. */
export function ensureFixture() {
  ensureBuilt();
  const lib = path.join(ROOT, 'build/libattnviz.a');
  const src = path.join(ROOT, 'tests/browser/page_fixture.c');
  if (mtime(FIXTURE) > Math.max(mtime(src), mtime(lib))) return FIXTURE;
  const libs = execFileSync('pkg-config', ['--libs', 'libcjson', 'libutf8proc', 'openblas', 'zlib', 'oniguruma', 'libpng', 'libjpeg']).toString().trim().split(/\s+/);
  // the public header's folder and every source folder (private headers sit beside their sources)
  const incs = [path.join(ROOT, 'include'), ...fs.readdirSync(path.join(ROOT, 'src'), { recursive: true })
    .map((d) => path.join(ROOT, 'src', d)).filter((d) => fs.statSync(d).isDirectory())].map((d) => '-I' + d);
  execFileSync('cc', ['-std=c11', '-D_GNU_SOURCE', '-O2', '-Wall', '-Wextra', '-Werror', ...incs,
    '-o', FIXTURE, src, lib, ...libs, '-lm', '-lpthread'], { stdio: 'inherit' });
  return FIXTURE;
}

/** Writes a page with ./attnviz; returns {html, json, stderr}. */
export function cliPage(name, args) {
  ensureBuilt();
  if (!fs.existsSync(ATTNVIZ)) throw new Error('build attnviz first: make attnviz');
  const html = path.join(OUT, name + '.html'), json = path.join(OUT, name + '.json');
  const all = ['--quiet', '--html', html, '--json', json, ...args];
  if (!args.includes('--model')) all.unshift('--model', DEMO);
  execFileSync(ATTNVIZ, all, { stdio: ['ignore', 'ignore', 'pipe'] });
  return { html, json, data: () => JSON.parse(fs.readFileSync(json, 'utf8')) };
}

/** Writes a synthetic page with build/page_fixture; returns {html, json, writeMs}. */
export function fixturePage(name, args = [], { json = true } = {}) {
  ensureFixture();
  const html = path.join(OUT, name + '.html'), jpath = json ? path.join(OUT, name + '.json') : '/dev/null';
  const r = execFileSync(FIXTURE, [html, jpath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  void r;
  return { html, json: jpath, data: () => JSON.parse(fs.readFileSync(jpath, 'utf8')) };
}

const serving = new Set(); /* servers still running: killed on every exit path of the test process */
const killAll = () => { for (const p of serving) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL'); };
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { killAll(); process.exit(130); });

/**
 * Starts `attnviz serve --port 0 ...args` and waits for the URL it prints (token included).
 * Resolves with {url, port, proc, stderr(), stop()}; stop() kills it (SIGKILL) and resolves once it
 * has exited. Rejects, the server killed, when it exits first or prints no URL within timeoutMs;
 * the message carries what it wrote to stderr.
 */
export function startServe(args, { timeoutMs = 60000 } = {}) {
  const proc = spawn(ATTNVIZ, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  serving.add(proc);
  let err = '', out = '';
  const exited = new Promise(resolve => proc.once('exit', () => { serving.delete(proc); resolve(); }));
  const stop = () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    return exited;
  };
  proc.stderr.on('data', d => { err += d; });
  return new Promise((resolve, reject) => {
    const fail = why => { clearTimeout(t); stop(); reject(new Error(`attnviz serve ${args.join(' ')}: ${why}: ${err.trim() || '(nothing on stderr)'}`)); };
    const t = setTimeout(() => fail(`printed no URL in ${timeoutMs / 1000} s`), timeoutMs);
    proc.stdout.on('data', d => {
      out += d;
      const m = /http:\/\/\S+\?token=[0-9a-f]{32}/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve({ url: m[0], port: Number(new URL(m[0]).port), proc, stderr: () => err, stop });
      }
    });
    proc.once('exit', (code, sig) => fail(`exited (${code ?? sig}) before printing its URL`));
    proc.once('error', e => fail(`could not start: ${e.message}`));
  });
}

export const LAUNCH_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-quic', '--disable-default-apps', '--disable-extensions'];

/** Launches chromium with a fresh profile directory. */
export async function launch() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnviz-chromium-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, headless: true, args: LAUNCH_ARGS, viewport: { width: 1400, height: 900 },
    acceptDownloads: true, deviceScaleFactor: 1,
  });
  const close = async () => { await ctx.close(); fs.rmSync(dir, { recursive: true, force: true }); };
  return { ctx, close };
}

/**
 * Opens a page file and watches it: every request (routed: only the file
 * itself is let through), console errors/warnings, page errors, and alert()
 * calls (the page's own alert is replaced before any script runs).
 */
export async function openPage(ctx, file, { theme = 'light', viewport } = {}) {
  const page = await ctx.newPage();
  if (viewport) await page.setViewportSize(viewport);
  await page.emulateMedia({ colorScheme: theme });
  const url = 'file://' + file;
  const log = { requests: [], routed: [], blocked: [], console: [], errors: [], alerts: [] };
  await page.route('**/*', route => {
    const u = route.request().url();
    log.routed.push(u);
    if (u === url) return route.continue();
    log.blocked.push(u);
    return route.abort();
  });
  page.on('request', r => log.requests.push(r.url()));
  page.on('console', m => { if (m.type() === 'error' || m.type() === 'warning') log.console.push(m.type() + ': ' + m.text()); });
  page.on('pageerror', e => log.errors.push(String(e && e.message ? e.message : e)));
  page.on('dialog', d => { log.alerts.push(d.message()); d.dismiss().catch(() => {}); });
  await page.exposeFunction('__alertCalled', msg => { log.alerts.push(String(msg)); });
  await page.addInitScript(() => {
    window.alert = m => window.__alertCalled(String(m));
    window.confirm = m => { window.__alertCalled('confirm:' + m); return false; };
    window.prompt = m => { window.__alertCalled('prompt:' + m); return null; };
  });
  await page.goto(url);
  await page.waitForFunction(() => document.body && document.body.dataset.ready === '1', null, { timeout: 30000 });
  return { page, log, url };
}

/** Waits until the page has drawn after the last state change. */
export async function settle(page) {
  await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
  await page.waitForTimeout(30);
}

/** 4-decimal formatting exactly as the page does it (from an attention float). */
export function fmt4(v) {
  const c = Math.round(v * 10000);
  return (c / 10000).toFixed(4);
}
/** Value rounded to dec decimals, as text. */
export function fmtDec(v, dec) {
  const c = Math.round(v * Math.pow(10, dec));
  const neg = c < 0;
  let s = String(Math.abs(c));
  if (dec <= 0) return (neg ? '-' : '') + s;
  while (s.length <= dec) s = '0' + s;
  return (neg ? '-' : '') + s.slice(0, s.length - dec) + '.' + s.slice(s.length - dec);
}

/** Hash of a canvas's pixels (to tell redraws apart). */
export async function canvasHash(page, selector) {
  return page.evaluate(sel => {
    const cv = document.querySelector(sel);
    if (!cv) return null;
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    let h = 2166136261 >>> 0, nz = 0;
    for (let i = 0; i < d.length; i += 1) { h = Math.imul(h ^ d[i], 16777619) >>> 0; }
    for (let i = 3; i < d.length; i += 4) if (d[i]) nz++;
    return { hash: h, nonzero: nz };
  }, selector);
}

/** The page stayed clean: no errors, no console messages, no request but the file, no alert(). */
export function clean(log) {
  assert.deepEqual(log.errors, [], 'page errors');
  assert.deepEqual(log.console, [], 'console errors/warnings');
  assert.deepEqual(log.blocked, [], 'requests other than the page file');
  assert.ok(log.requests.every(u => u === log.requests[0] || u.startsWith('blob:')), 'requests: ' + log.requests.join(' '));
  assert.deepEqual(log.alerts, [], 'alert/confirm/prompt calls');
}

/** |page - json| within tol for every shown value; returns how many equal the JSON at 4 decimals. */
export function closeAll(got, want, tol, what) {
  assert.equal(got.length, want.length, what + ': count');
  let same = 0;
  got.forEach((g, i) => {
    assert.ok(Math.abs(parseFloat(g) - want[i]) <= tol, `${what}[${i}]: page ${g}, JSON ${want[i]}`);
    if (g === fmt4(want[i])) same++;
  });
  return same;
}

/** Waits for the next render after `prev` (document.body.dataset.rendered). */
export async function rendered(page, prev) {
  await page.waitForFunction(p => document.body.dataset.rendered !== p, prev);
  await settle(page);
}
/** Clicks and waits for the render it causes. */
export async function clickAndRender(page, selector, opts) {
  const prev = await page.evaluate(() => document.body.dataset.rendered);
  await page.click(selector, opts);
  await rendered(page, prev);
}
