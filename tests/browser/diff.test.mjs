// attnviz diff pages in Chromium: two texts on the demo model ("the cat sat on the mat" vs "the
// dog sat on a mat": 6 aligned tokens, 2 only in each) and one text on the demo and a copy with one
// head's queries zeroed. The diff view opens first on the most divergent head; its grid shows the
// JSON's per-head divergences; every cell of the B − A matrix shows, in its tooltip, exactly
// round(b·1e4) − round(a·1e4) of the JSON's attentions over the merged token axis (unaligned query
// rows: no value); a grid click switches the head; the other views still draw A; exports work;
// screenshots in both themes; an ordinary page has no diff tab.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { OUT, SHOTS, ATTNVIZ, DEMO, launch, openPage, settle, clean, ensureBuilt, cliPage, clickAndRender } from './lib.mjs';

const A = 'the cat sat on the mat', B = 'the dog sat on a mat';
let browser, html, data, html2, data2;

function diffPage(name, args) {
  const h = path.join(OUT, name + '.html'), j = path.join(OUT, name + '.json');
  execFileSync(ATTNVIZ, ['diff', '--quiet', '--html', h, '--json', j, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  return { h, d: JSON.parse(fs.readFileSync(j, 'utf8')) };
}

/* a copy of the demo whose layer l head h query weights and bias are zero */
function editedDemo(l, h) {
  const dir = path.join(OUT, 'demo-edit');
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(DEMO, dir, { recursive: true });
  const p = path.join(dir, 'model.safetensors'), b = fs.readFileSync(p);
  const n = Number(b.readBigUInt64LE(0)), hdr = JSON.parse(b.subarray(8, 8 + n).toString());
  for (const [name, rows] of [['weight', 768], ['bias', 1]]) {
    const o = 8 + n + hdr[`encoder.layer.${l}.attention.self.query.${name}`].data_offsets[0] + h * 64 * rows * 4;
    b.fill(0, o, o + 64 * rows * 4);
  }
  fs.writeFileSync(p, b);
  return dir;
}

before(async () => {
  ensureBuilt();
  ({ h: html, d: data } = diffPage('diff', ['--model', DEMO, A, B]));
  ({ h: html2, d: data2 } = diffPage('diff-models', ['--model', DEMO, '--model', editedDemo(1, 3), 'time flies like an arrow']));
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

/* the merged axis as the page builds it from the alignment: [{a, b}] */
function axis(al) {
  const out = [];
  let i = 0, j = 0;
  while (i < al.a_to_b.length || j < al.b_to_a.length) {
    if (i < al.a_to_b.length && al.a_to_b[i] === j && j < al.b_to_a.length) out.push({ a: i++, b: j++ });
    else if (i < al.a_to_b.length && al.a_to_b[i] < 0) out.push({ a: i++, b: -1 });
    else out.push({ a: -1, b: j++ });
  }
  return out;
}
const code = v => Math.round(v * 10000);
const fmtCode = c => (c > 0 ? '+' : c < 0 ? '-' : '') + (Math.abs(c) / 10000).toFixed(4);

/* hovers every cell of the B − A matrix: the tooltip's B − A text, or null (no value) */
async function shownDeltas(page) {
  const ov = await page.$('#view-diff canvas.df-overlay');
  await ov.scrollIntoViewIfNeeded();
  const box = await ov.boundingBox();
  const d = await ov.evaluate(c => ({ labw: +c.dataset.labw, labh: +c.dataset.labh, cell: +c.dataset.cell, n: +c.dataset.n }));
  const out = [];
  for (let r = 0; r < d.n; r++) {
    const row = [];
    for (let c = 0; c < d.n; c++) {
      await page.mouse.move(box.x + d.labw + (c + 0.5) * d.cell, box.y + d.labh + (r + 0.5) * d.cell);
      row.push(await page.evaluate(() => {
        const t = document.getElementById('tooltip');
        const v = t.querySelector('.df-delta');
        return t.hidden ? 'hidden' : v ? v.textContent : null;
      }));
    }
    out.push(row);
  }
  return { n: d.n, rows: out };
}

describe('attnviz diff page', () => {
  test('opens on the diff view at the most divergent head; the grid holds the JSON\'s divergences', async () => {
    const { page, log } = await openPage(browser.ctx, html);
    await settle(page);
    assert.equal(await page.evaluate(() => document.body.dataset.view), 'diff');
    const top = data.divergence.ranking[0];
    assert.equal(await page.evaluate(() => document.body.dataset.layer), String(top.layer));
    const cells = await page.$$eval('#view-diff .df-cell', els => els.map(e => ({ li: +e.dataset.li, h: +e.dataset.h, v: +e.dataset.jsd, cur: e.classList.contains('cur') })));
    assert.equal(cells.length, 24);
    for (const c of cells) assert.equal(c.v, data.divergence.per_head[c.li][c.h], `L${c.li} H${c.h}`);
    const cur = cells.filter(c => c.cur);
    assert.deepEqual(cur.map(c => [c.li, c.h]), [[top.layer, top.head]]);
    /* the labels: both inputs' tokens, unaligned ones marked −/+ */
    assert.match(await page.textContent('#diff-note'), /the dog sat on a mat/);
    clean(log);
    await page.close();
  });

  test('every B − A cell shown equals round(b·1e4) − round(a·1e4) of the JSON (unaligned query rows: none)', async () => {
    const { page, log } = await openPage(browser.ctx, html);
    await settle(page);
    const top = data.divergence.ranking[0];
    const ax = axis(data.alignment);
    const got = await shownDeltas(page);
    assert.equal(got.n, ax.length);
    assert.equal(ax.length, 10); /* 6 aligned + 2 + 2 */
    let compared = 0;
    const Aat = data.a.attention[top.layer][top.head], Bat = data.b.attention[top.layer][top.head];
    ax.forEach((R, r) => ax.forEach((C, c) => {
      const shown = got.rows[r][c];
      if (R.a < 0 || R.b < 0) { assert.equal(shown, null, `row ${r} has no counterpart`); return; }
      const want = (C.b >= 0 ? code(Bat[R.b][C.b]) : 0) - (C.a >= 0 ? code(Aat[R.a][C.a]) : 0);
      assert.equal(shown.replace('−', '-'), fmtCode(want), `cell ${r},${c}`);
      compared++;
    }));
    assert.equal(compared, 6 * 10);
    /* the head's A − B really differs somewhere (the most divergent head) */
    assert.ok(got.rows.flat().some(v => v && v !== '0.0000'));
    clean(log);
    await page.close();
  });

  test('a grid click shows that head; the other views draw A; exports; keyboard', async () => {
    const { page, log } = await openPage(browser.ctx, html);
    await settle(page);
    await clickAndRender(page, '#view-diff .df-cell[data-li="0"][data-h="4"]');
    assert.match(await page.textContent('#view-diff .df-mtitle h2'), /layer 0, head 4/);
    assert.equal(await page.evaluate(() => document.body.dataset.layer), '0');
    const svg = await page.evaluate(() => window.attnviz.exportSVG());
    assert.match(svg, /^<\?xml/);
    assert.ok(svg.includes('+dog') && svg.includes('−cat'), 'the export labels the unaligned tokens');
    for (const v of ['head', 'model', 'matrix', 'neuron']) {
      await page.evaluate(x => window.attnviz.setView(x), v);
      await settle(page);
      assert.equal(await page.evaluate(() => document.body.dataset.view), v);
      assert.equal(await page.$$eval('#view-' + v + ' .empty', els => els.filter(e => /Could not draw/.test(e.textContent)).length), 0);
    }
    await page.keyboard.press('5');
    await settle(page);
    assert.equal(await page.evaluate(() => document.body.dataset.view), 'diff');
    clean(log);
    await page.close();
  });

  test('one text on two models: every token aligned, only the edited head diverges in its layer', async () => {
    const { page, log } = await openPage(browser.ctx, html2);
    await settle(page);
    assert.equal(data2.mode, 'models');
    const cells = await page.$$eval('#view-diff .df-cell', els => els.map(e => ({ li: +e.dataset.li, h: +e.dataset.h, v: +e.dataset.jsd })));
    for (const c of cells.filter(x => x.li === 1)) assert.equal(c.v > 0, c.h === 3, `L1 H${c.h}: ${c.v}`);
    const got = await shownDeltas(page);
    assert.equal(got.n, data2.a.tokens.length);
    assert.ok(got.rows.flat().every(v => v !== null), 'every row aligned');
    assert.match(await page.textContent('#view-diff .view-title .sub'), /A: demo, B: demo-edit/);
    clean(log);
    await page.close();
  });

  test('screenshots in both themes', async () => {
    for (const theme of ['light', 'dark']) {
      const { page, log } = await openPage(browser.ctx, html, { theme });
      await settle(page);
      await page.waitForTimeout(100);
      const shot = path.join(SHOTS, 'diff-' + theme + '.png');
      await (await page.$('#main')).screenshot({ path: shot });
      assert.ok(fs.statSync(shot).size > 10000);
      /* the matrix is painted: red and blue cells present */
      const colors = await page.evaluate(() => {
        const cv = document.querySelector('#view-diff .mx-wrap canvas');
        const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
        let red = 0, blue = 0;
        for (let i = 0; i < d.length; i += 4) {
          if (d[i] > d[i + 2] + 80) red++;
          if (d[i + 2] > d[i] + 80) blue++;
        }
        return { red, blue };
      });
      assert.ok(colors.red > 100 && colors.blue > 100, JSON.stringify(colors));
      clean(log);
      await page.close();
    }
  });

  test('an ordinary page has no diff tab', async () => {
    const p = cliPage('diff-plain', ['the cat sat']);
    const { page, log } = await openPage(browser.ctx, p.html);
    assert.equal(await page.$('#tab-diff'), null);
    assert.equal(await page.$$eval('#tabs [data-view]', els => els.length), 7); /* head, model, neuron, matrix, lens, attribution, flow */
    clean(log);
    await page.close();
  });
});
