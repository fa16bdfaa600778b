// page.test.mjs — the HTML page in a real browser (Debian chromium through
// playwright-core). Run from the repository root after `make attnviz`:
//   node --test tests/browser/
// Pages come from ./attnviz with the demo model and from the synthetic
// tests/browser/page_fixture.c (hostile tokens, selections, 512 tokens); numbers are
// checked against the JSON written alongside.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cliPage, fixturePage, launch, openPage, settle, fmt4, fmtDec, canvasHash, SHOTS, clean, closeAll, rendered, clickAndRender } from './lib.mjs';

let browser;
const pages = {};

before(async () => {
  pages.demo = cliPage('demo7', ['--qk', '--layer', '1', '--head', '8', 'time flies like an arrow']);
  /* head 0 focused: these read one head's weights (a page opens on every head) */
  pages.pair = cliPage('pair', ['--qk', '--head', '0', 'the quick brown fox jumps over the lazy dog', 'it was tired']);
  pages.pieces = cliPage('pieces', ['--qk', '--head', '0', 'flies unbelievable playing']);
  pages.injectCli = cliPage('inject-cli', ['</script><script>alert(1)</script>', '<img src=x onerror=alert(1)>']);
  pages.inject = fixturePage('inject', ['--n', '12', '--inject', '--demo', '--layers', '2', '--heads', '3']);
  pages.sel = fixturePage('selection', ['--n', '9', '--layers', '8', '--heads', '12', '--sel-layers', '3,7', '--sel-heads', '2,5,9', '--init-layer', '7', '--init-head', '5']);
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function open(name, opts) {
  const r = await openPage(browser.ctx, pages[name].html, opts);
  r.data = pages[name].data();
  return r;
}
const selIdx = (arr, v) => arr.indexOf(v);
async function vTexts(page, side) {
  return page.$$eval('.hv-' + (side === 'R' ? 'right' : 'left') + ' .tok .v', els => els.map(e => e.textContent));
}
async function tokTexts(page, side) {
  return page.$$eval('.hv-' + (side === 'R' ? 'right' : 'left') + ' .tok .t', els => els.map(e => e.textContent));
}
async function activeChips(page) {
  return page.$$eval('.head-chip', els => els.filter(e => !e.classList.contains('off')).map(e => e.querySelector('.num').textContent));
}

describe('page', () => {
  test('loads offline: no requests but the file, no console errors, CSP forbids network', async () => {
    const { page, log, url } = await open('demo');
    try {
      /* exercise every view, then count: the page file is the only request */
      for (const v of ['model', 'neuron', 'matrix', 'head']) await clickAndRender(page, '#tab-' + v);
      await page.waitForFunction(() => document.body.dataset.loaded === '1');
      assert.deepEqual(log.requests, [url]);
      assert.deepEqual(log.routed, [url]);
      const csp = await page.$eval('meta[http-equiv="Content-Security-Policy"]', e => e.content);
      assert.match(csp, /default-src 'none'/);
      assert.doesNotMatch(csp, /connect-src|https?:/);
      assert.equal(await page.$$eval('script[src], link[href], img[src], iframe', els => els.length), 0);
      clean(log);
    } finally { await page.close(); }
  });

  test('header states the model, config, dtype, input, demo note and head patterns', async () => {
    const { page, log, data } = await open('demo');
    try {
      assert.equal(await page.textContent('#model-name'), data.model);
      assert.equal(await page.textContent('#model-dtype'), data.dtype);
      const cfg = await page.textContent('#model-config');
      assert.match(cfg, new RegExp(data.config.layers + ' layers'));
      assert.match(cfg, /12 heads/);
      assert.match(cfg, /hidden 768/);
      assert.match(await page.textContent('#input-line'), /time flies like an arrow/);
      const note = await page.textContent('#demo-note');
      assert.match(note, /not trained/);
      assert.match(note, /make weights/);
      assert.ok(await page.isVisible('#demo-note'));
      const chips = await page.$$eval('.head-chip', els => els.map(e => [e.querySelector('.num').textContent, e.querySelector('.pat').textContent]));
      const li = await page.evaluate(() => window.attnviz.state.layer);
      chips.forEach(([num, pat], h) => {
        assert.equal(num, String(data.heads[h]));
        assert.equal(pat, data.head_patterns[li][h]);
      });
      clean(log);
    } finally { await page.close(); }
  });

  test('initial layer and head come from --layer/--head', async () => {
    const { page, log } = await open('demo');
    try {
      assert.equal(await page.$eval('#layer-select', e => e.selectedOptions[0].textContent), 'Layer 1');
      assert.deepEqual(await activeChips(page), ['8']);
      assert.equal(await page.evaluate(() => document.body.dataset.layer), '1');
      clean(log);
    } finally { await page.close(); }
  });

  test('layer change redraws the head view', async () => {
    const { page, log } = await open('demo');
    try {
      const before1 = await canvasHash(page, '#view-head .hv-lines');
      assert.ok(before1.nonzero > 0, 'lines drawn');
      const prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.selectOption('#layer-select', '0');
      await rendered(page, prev);
      assert.equal(await page.evaluate(() => document.body.dataset.layer), '0');
      const after1 = await canvasHash(page, '#view-head .hv-lines');
      assert.notEqual(after1.hash, before1.hash);
      await clickAndRender(page, '#layer-next');
      assert.equal(await page.evaluate(() => document.body.dataset.layer), '1');
      assert.equal((await canvasHash(page, '#view-head .hv-lines')).hash, before1.hash);
      clean(log);
    } finally { await page.close(); }
  });

  test('head squares: click toggles a head, double-click solos it, double-click again shows all', async () => {
    const { page, log } = await open('demo');
    try {
      /* solo head 8 from --head; double-click it: all heads */
      await page.dblclick('.head-chip[data-h="8"]');
      await settle(page);
      assert.equal((await activeChips(page)).length, 12);
      const all = await canvasHash(page, '#view-head .hv-lines');
      await clickAndRender(page, '.head-chip[data-h="3"]');
      assert.equal((await activeChips(page)).length, 11);
      assert.ok(await page.$eval('.head-chip[data-h="3"]', e => e.classList.contains('off')));
      assert.notEqual((await canvasHash(page, '#view-head .hv-lines')).hash, all.hash);
      await clickAndRender(page, '.head-chip[data-h="3"]');
      assert.equal((await activeChips(page)).length, 12);
      await page.dblclick('.head-chip[data-h="5"]');
      await settle(page);
      assert.deepEqual(await activeChips(page), ['5']);
      await page.dblclick('.head-chip[data-h="5"]');
      await settle(page);
      assert.equal((await activeChips(page)).length, 12);
      clean(log);
    } finally { await page.close(); }
  });

  test('hover isolates a token\'s lines and shows its weights; click pins; per-head values on the other side', async () => {
    const { page, log, data } = await open('demo');
    try {
      const li = 1, h = 8;
      const row = data.attention[li][h][2];
      await page.hover('.hv-left .tok[data-k="2"]');
      await settle(page);
      assert.equal(await page.$eval('#view-head .hv', e => e.dataset.iso), 'L2');
      const expectLines = row.filter(w => w >= 0.0015).length;
      assert.equal(await page.$eval('#view-head .hv', e => +e.dataset.lines), expectLines);
      const same = closeAll(await vTexts(page, 'R'), row, 0.5e-4 + 2e-6, 'weights of token 2');
      assert.ok(same >= row.length - 1, 'shown weights equal the JSON at 4 decimals');
      /* keys side */
      await page.hover('.hv-right .tok[data-k="4"]');
      await settle(page);
      assert.equal(await page.$eval('#view-head .hv', e => e.dataset.iso), 'R4');
      closeAll(await vTexts(page, 'L'), data.attention[li][h].map(r => r[4]), 0.5e-4 + 2e-6, 'weights into token 4');
      /* all heads, pin query 1, hover key 3: one row per head */
      await page.mouse.move(5, 5);
      await page.dblclick('.head-chip[data-h="8"]');
      await settle(page);
      await page.click('.hv-left .tok[data-k="1"]');
      await page.hover('.hv-right .tok[data-k="3"]');
      await settle(page);
      assert.ok(await page.isVisible('#tooltip'));
      const rows = await page.$$eval('#tooltip .tt-row', els => els.map(e => e.querySelector('.tt-val').textContent));
      assert.equal(rows.length, 12);
      closeAll(rows, data.attention[li].map(hh => hh[1][3]), 0.5e-4 + 2e-6, 'per-head values');
      assert.equal(await page.$eval('#view-head .hv', e => e.dataset.iso), 'L1', 'pinned token keeps its lines');
      await page.keyboard.press('Escape');
      await settle(page);
      clean(log);
    } finally { await page.close(); }
  });

  test('model view: a thumbnail per layer x head, drawn on canvas; click opens it large', async () => {
    const { page, log, data } = await open('demo');
    try {
      await clickAndRender(page, '#tab-model');
      await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
      const n = await page.$$eval('#view-model .thumb canvas', els => els.length);
      assert.equal(n, data.config.layers * 12);
      assert.equal(await page.$$eval('#view-model svg line', els => els.length), 0, 'no per-line SVG');
      const h = await canvasHash(page, '#view-model .thumb[data-li="1"][data-h="4"] canvas');
      assert.ok(h.nonzero > 0);
      await page.click('#view-model .thumb[data-li="1"][data-h="4"]');
      await page.waitForFunction(() => document.getElementById('modal').dataset.drawn === '1');
      assert.ok(await page.isVisible('#modal'));
      const title = await page.textContent('#modal-title');
      assert.match(title, /Layer 1 · head 4/);
      assert.ok(title.includes(data.head_patterns[1][4]));
      assert.ok((await canvasHash(page, '#modal-body canvas.hv-lines')).nonzero > 0);
      await page.keyboard.press('Escape');
      assert.ok(await page.isHidden('#modal'));
      /* open from the modal into the matrix view */
      await page.click('#view-model .thumb[data-li="0"][data-h="2"]');
      await page.waitForFunction(() => document.getElementById('modal').dataset.drawn === '1');
      await clickAndRender(page, '#modal [data-open="matrix"]');
      assert.equal(await page.evaluate(() => document.body.dataset.view), 'matrix');
      assert.match(await page.textContent('#view-matrix h2'), /layer 0, head 2/);
      clean(log);
    } finally { await page.close(); }
  });

  test('neuron view: q, k, q x k, q.k/sqrt(d) and softmax equal the JSON', async () => {
    const { page, log, data } = await open('demo');
    try {
      await clickAndRender(page, '#tab-neuron');
      const li = 1, h = 8, qi = 2;
      await page.hover('#view-neuron .nv-queries .tok[data-pos="' + qi + '"]');
      await settle(page);
      assert.equal(await page.$eval('#view-neuron', e => e.dataset.query), String(qi));
      const [dq, dk] = await page.evaluate(([a, b]) => window.attnviz.meta.qk.dec[a][b], [li, h]);
      const q = data.queries[li][h][qi], K = data.keys[li][h], d = q.length;
      /* softmax column = the captured weights */
      const sm = await page.$$eval('#view-neuron .nv-row .val', els => els.map(e => e.textContent));
      const same = closeAll(sm, data.attention[li][h][qi], 0.5e-4 + 2e-6, 'softmax');
      assert.ok(same >= sm.length - 1);
      /* q.k/sqrt(d) from the shown (rounded) q and k */
      const rq = q.map(v => Math.round(v * 10 ** dq) / 10 ** dq);
      const scores = await page.$$eval('#view-neuron .nv-row .nv-num', els => els.map(e => parseFloat(e.textContent)));
      K.forEach((k, j) => {
        const s = k.reduce((acc, kv, x) => acc + rq[x] * Math.round(kv * 10 ** dk) / 10 ** dk, 0) / Math.sqrt(d);
        assert.ok(Math.abs(scores[j] - s) <= 1e-3 * Math.max(1, Math.abs(s)), `score ${j}: ${scores[j]} vs ${s}`);
        /* and close to the model's own q.k/sqrt(d) */
        const exact = k.reduce((acc, kv, x) => acc + q[x] * kv, 0) / Math.sqrt(d);
        assert.ok(Math.abs(scores[j] - exact) <= 0.05 * Math.max(1, Math.abs(exact)), `score ${j} vs exact ${exact}`);
      });
      /* hover cells: q, k and q x k values */
      const geo = await page.$eval('#view-neuron .nv-canvas', e => ({ cw: +e.dataset.cw, rh: +e.dataset.rh, gap: +e.dataset.gap }));
      const qBox = await page.$eval('#view-neuron .nv-qrow canvas', e => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, h: r.height }; });
      const kBox = await page.$eval('#view-neuron .nv-canvas', e => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top }; });
      const tipVals = () => page.$$eval('#tooltip .tt-row', els => Object.fromEntries(els.map(e => [e.querySelector('.k').textContent, e.querySelector('.tt-val').textContent])));
      for (const dim of [0, 3, 17, d - 1]) {
        await page.mouse.move(qBox.x + dim * geo.cw + geo.cw / 2, qBox.y + qBox.h / 2);
        await settle(page);
        assert.equal((await tipVals()).q, fmtDec(q[dim], dq), 'q[' + dim + ']');
        for (const j of [0, 3]) {
          await page.mouse.move(kBox.x + dim * geo.cw + geo.cw / 2, kBox.y + j * geo.rh + geo.rh / 2);
          await settle(page);
          let t = await tipVals();
          assert.equal(t.k, fmtDec(K[j][dim], dk), `k[${j}][${dim}]`);
          await page.mouse.move(kBox.x + (d + dim) * geo.cw + geo.gap + geo.cw / 2, kBox.y + j * geo.rh + geo.rh / 2);
          await settle(page);
          t = await tipVals();
          const prod = Math.round(q[dim] * 10 ** dq) * Math.round(K[j][dim] * 10 ** dk);
          assert.equal(t['q × k'], fmtDec(prod / 10 ** (dq + dk), dq + dk), `q x k [${j}][${dim}]`);
          assert.match(await page.textContent('#tooltip .tt-title'), /^q × k/);
        }
      }
      /* colored cells, sign distinct */
      assert.ok((await canvasHash(page, '#view-neuron .nv-canvas')).nonzero > 0);
      clean(log);
    } finally { await page.close(); }
  });

  test('matrix view: the head as an n x n heat map with tokens on both axes; values on hover', async () => {
    const { page, log, data } = await open('demo');
    try {
      await clickAndRender(page, '#tab-matrix');
      const box = await page.$eval('#view-matrix canvas[data-cell]', e => { const r = e.getBoundingClientRect(); return { x: r.left, y: r.top, cell: +e.dataset.cell, lw: +e.dataset.labw, lh: +e.dataset.labh }; });
      assert.ok(box.cell >= 9, 'labels shown');
      for (const [r, c] of [[0, 0], [2, 1], [6, 5]]) {
        await page.mouse.move(box.x + box.lw + c * box.cell + box.cell / 2, box.y + box.lh + r * box.cell + box.cell / 2);
        await settle(page);
        const v = await page.textContent('#tooltip .tt-val');
        assert.equal(v, fmt4(data.attention[1][8][r][c]));
        assert.equal(await page.textContent('#tooltip .tt-title'), data.tokens[r] + '  →  ' + data.tokens[c]);
      }
      clean(log);
    } finally { await page.close(); }
  });

  test('aggregates: mean and max over the selected heads, and attention rollout', async () => {
    const { page, log, data } = await open('demo');
    try {
      await page.dblclick('.head-chip[data-h="8"]'); /* all heads */
      await settle(page);
      const A = data.attention, n = data.tokens.length, H = 12;
      const qi = 3;
      await clickAndRender(page, '#mode-seg [data-mode="mean"]');
      await page.hover('.hv-left .tok[data-k="' + qi + '"]');
      await settle(page);
      const mean = Array.from({ length: n }, (_, j) => A[1].reduce((s, hh) => s + hh[qi][j], 0) / H);
      closeAll(await vTexts(page, 'R'), mean, 1.0e-4 + 2e-6, 'mean');
      await page.mouse.move(5, 5);
      await clickAndRender(page, '#mode-seg [data-mode="max"]');
      await page.hover('.hv-left .tok[data-k="' + qi + '"]');
      await settle(page);
      const mx = Array.from({ length: n }, (_, j) => Math.max(...A[1].map(hh => hh[qi][j])));
      closeAll(await vTexts(page, 'R'), mx, 0.5e-4 + 2e-6, 'max');
      await page.mouse.move(5, 5);
      await clickAndRender(page, '#mode-seg [data-mode="rollout"]');
      await page.waitForSelector('#view-head .hv');
      await page.hover('.hv-left .tok[data-k="' + qi + '"]');
      await settle(page);
      /* Abnar & Zuidema: average heads, add identity, renormalize, multiply through layers */
      const hat = l => A[l][0].map((_, i) => {
        const r = Array.from({ length: n }, (_, j) => A[l].reduce((s, hh) => s + hh[i][j], 0) / H + (i === j ? 1 : 0));
        const s = r.reduce((a, b) => a + b, 0);
        return r.map(v => v / s);
      });
      const R0 = hat(0), A1 = hat(1);
      const R1 = A1.map(row => Array.from({ length: n }, (_, j) => row.reduce((s, a, k) => s + a * R0[k][j], 0)));
      closeAll(await vTexts(page, 'R'), R1[qi], 3e-4, 'rollout');
      /* and in the matrix view */
      await page.mouse.move(5, 5);
      await clickAndRender(page, '#tab-matrix');
      assert.match(await page.textContent('#view-matrix h2'), /rollout through layer 1/);
      clean(log);
    } finally { await page.close(); }
  });

  test('sentence pairs: All / A→A / A→B / B→A / B→B', async () => {
    const { page, log, data } = await open('pair');
    try {
      const bs = data.sentence_b_start, toks = data.tokens;
      const A = toks.slice(0, bs), B = toks.slice(bs);
      const cases = { all: [toks, toks], AA: [A, A], AB: [A, B], BA: [B, A], BB: [B, B] };
      for (const [f, [l, r]] of Object.entries(cases)) {
        await clickAndRender(page, '#filter-seg [data-filter="' + f + '"]');
        assert.deepEqual(await tokTexts(page, 'L'), l, f + ' left');
        assert.deepEqual(await tokTexts(page, 'R'), r, f + ' right');
      }
      /* A→B weights are the JSON's, not renormalized */
      await clickAndRender(page, '#filter-seg [data-filter="AB"]');
      await page.hover('.hv-left .tok[data-k="1"]');
      await settle(page);
      closeAll(await vTexts(page, 'R'), data.attention[0][0][1].slice(bs), 0.5e-4 + 2e-6, 'A→B');
      /* the model view follows the filter */
      await clickAndRender(page, '#tab-model');
      await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
      clean(log);
    } finally { await page.close(); }
  });

  test('hide [CLS]/[SEP] renormalizes rows; merge ## joins word pieces', async () => {
    const { page, log, data } = await open('demo');
    try {
      await page.check('#hide-special');
      await settle(page);
      const toks = await tokTexts(page, 'L');
      assert.deepEqual(toks, data.tokens.filter(t => t !== '[CLS]' && t !== '[SEP]'));
      await page.hover('.hv-left .tok[data-k="1"]'); /* "flies" */
      await settle(page);
      const row = data.attention[1][8][2];
      const keep = row.slice(1, -1), s = keep.reduce((a, b) => a + b, 0);
      closeAll(await vTexts(page, 'R'), keep.map(v => v / s), 3e-4, 'renormalized');
      clean(log);
    } finally { await page.close(); }
    const r2 = await open('pieces');
    try {
      const { page, data } = r2;
      await page.check('#merge-pieces');
      await settle(page);
      const toks = await tokTexts(page, 'L');
      assert.ok(toks.includes('unbelievable'), toks.join(' '));
      assert.ok(!toks.some(t => t.startsWith('##')));
      /* to a word: summed over its pieces; from a word: averaged */
      const groups = [];
      data.tokens.forEach((t, i) => {
        if (t.startsWith('##') && groups.length && !['[CLS]', '[SEP]'].includes(groups[groups.length - 1].label)) {
          groups[groups.length - 1].m.push(i);
          groups[groups.length - 1].label += t.slice(2);
        } else groups.push({ label: t, m: [i] });
      });
      assert.deepEqual(toks, groups.map(g => g.label));
      const li = await page.evaluate(() => window.attnviz.state.layer);
      const h = (await page.evaluate(() => window.attnviz.state.active)).indexOf(true);
      const A = data.attention[li][h];
      const gi = groups.findIndex(g => g.label === 'unbelievable');
      await page.hover('.hv-left .tok[data-k="' + gi + '"]');
      await settle(page);
      const want = groups.map(gc => groups[gi].m.reduce((s, i) => s + gc.m.reduce((t, j) => t + A[i][j], 0), 0) / groups[gi].m.length);
      closeAll(await vTexts(page, 'R'), want, 8e-4, 'merged');
      clean(r2.log);
    } finally { await r2.page.close(); }
  });

  test('theme toggle switches light/dark and redraws', async () => {
    const { page, log } = await open('demo');
    try {
      const bg0 = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const theme0 = await page.evaluate(() => document.documentElement.dataset.theme);
      await clickAndRender(page, '#theme-btn');
      const theme1 = await page.evaluate(() => document.documentElement.dataset.theme);
      assert.notEqual(theme1, theme0);
      assert.notEqual(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), bg0);
      await clickAndRender(page, '#theme-btn');
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme0);
      clean(log);
    } finally { await page.close(); }
  });

  test('export: every view as a non-empty PNG and a valid SVG', async () => {
    const { page, log, data } = await open('demo');
    try {
      for (const view of ['head', 'model', 'neuron', 'matrix']) {
        await clickAndRender(page, '#tab-' + view);
        if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
        const [png] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
        assert.match(png.suggestedFilename(), new RegExp('^attnviz-' + view + '.*\\.png$'));
        const buf = fs.readFileSync(await png.path());
        assert.ok(buf.length > 2000, view + ' PNG size ' + buf.length);
        assert.deepEqual([...buf.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
        assert.ok(buf.readUInt32BE(16) > 100 && buf.readUInt32BE(20) > 100, 'PNG dimensions');
        const [svg] = await Promise.all([page.waitForEvent('download'), page.click('#export-svg')]);
        assert.match(svg.suggestedFilename(), /\.svg$/);
        const text = fs.readFileSync(await svg.path(), 'utf8');
        assert.ok(text.startsWith('<?xml'));
        const check = await page.evaluate(s => {
          const doc = new DOMParser().parseFromString(s, 'image/svg+xml');
          const err = doc.querySelector('parsererror');
          return { err: err ? err.textContent : null, root: doc.documentElement.nodeName, texts: [...doc.querySelectorAll('text')].map(t => t.textContent), scripts: doc.querySelectorAll('script').length };
        }, text);
        assert.equal(check.err, null, view + ' SVG parses');
        assert.equal(check.root, 'svg');
        assert.equal(check.scripts, 0);
        if (view !== 'model') assert.ok(check.texts.includes('flies'), view + ' SVG has the tokens as text');
        else assert.ok(check.texts.includes('L1') && check.texts.includes('H11'));
        fs.writeFileSync(path.join(SHOTS, 'export-' + view + '.svg'), text);
        fs.writeFileSync(path.join(SHOTS, 'export-' + view + '.png'), buf);
      }
      void data;
      clean(log);
    } finally { await page.close(); }
  });

  test('hostile tokens and input show literally and never run', async () => {
    for (const name of ['inject', 'injectCli']) {
      const { page, log, data } = await open(name);
      try {
        const body = await page.evaluate(() => document.body.innerText);
        assert.ok(body.includes('</script><script>alert(1)</script>'), name + ': text shown literally');
        assert.ok(body.includes('<img src=x onerror=alert(1)>'));
        assert.equal(await page.$$eval('img', els => els.length), 0);
        assert.equal(await page.$$eval('script', els => els.filter(e => !e.type || e.type === 'text/javascript').length), 1, 'only the page\'s own script');
        assert.equal(await page.title(), 'attnviz — ' + data.text + (data.text_b ? ' / ' + data.text_b : '') );
        for (const view of ['model', 'neuron', 'matrix', 'head']) {
          await clickAndRender(page, '#tab-' + view);
          if (view === 'model') await page.waitForFunction(() => document.getElementById('view-model').dataset.drawn === '1');
        }
        const toks = await tokTexts(page, 'L');
        assert.deepEqual(toks, data.tokens);
        await page.hover('.hv-left .tok[data-k="1"]');
        const svg = await page.evaluate(() => window.attnviz.exportSVG());
        assert.ok(!svg.includes('<script>alert'));
        assert.ok(!/<img/i.test(svg));
        const ok = await page.evaluate(s => !new DOMParser().parseFromString(s, 'image/svg+xml').querySelector('parsererror'), svg);
        assert.ok(ok);
        if (name === 'inject') {
          const chips = await page.$$eval('.head-chip .pat', els => els.map(e => e.textContent));
          assert.ok(chips.length === 3);
        }
        clean(log);
      } finally { await page.close(); }
    }
  });

  test('a selection of layers and heads is labeled by the real indices', async () => {
    const { page, log, data } = await open('sel');
    try {
      assert.deepEqual(await page.$$eval('#layer-select option', els => els.map(e => e.textContent)), ['Layer 3', 'Layer 7']);
      assert.equal(await page.$eval('#layer-select', e => e.selectedOptions[0].textContent), 'Layer 7');
      assert.deepEqual(await page.$$eval('.head-chip .num', els => els.map(e => e.textContent)), ['2', '5', '9']);
      assert.deepEqual(await activeChips(page), ['5']);
      assert.match(await page.textContent('#notes'), /layers 3, 7 and heads 2, 5, 9/);
      /* values: selection index 1 = layer 7, head index 1 = head 5 */
      await page.hover('.hv-left .tok[data-k="2"]');
      await settle(page);
      closeAll(await vTexts(page, 'R'), data.attention[1][1][2], 0.5e-4 + 2e-6, 'selected head');
      await clickAndRender(page, '#tab-model');
      assert.deepEqual(await page.$$eval('#view-model .rowlab', els => els.map(e => e.textContent)), ['L3', 'L7']);
      clean(log);
    } finally { await page.close(); }
  });

  test('keyboard: [ ] change layer, 1-4 switch views, T theme, Esc unpins', async () => {
    const { page, log } = await open('demo');
    try {
      let prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.keyboard.press('[');
      await rendered(page, prev);
      assert.equal(await page.evaluate(() => document.body.dataset.layer), '0');
      for (const [k, v] of [['2', 'model'], ['3', 'neuron'], ['4', 'matrix'], ['1', 'head']]) {
        prev = await page.evaluate(() => document.body.dataset.rendered);
        await page.keyboard.press(k);
        await rendered(page, prev);
        assert.equal(await page.evaluate(() => document.body.dataset.view), v);
      }
      clean(log);
    } finally { await page.close(); }
  });
});
