// predict.test.mjs — the page's predictions and generation UI
// (templates/predictions.js) on pages written by ./attnviz with
// tests/data/small-gpt2 (--predict, --generate), numbers checked against the
// JSON written by the same run; a masked-model page from the demo model with
// predictions put into its metadata (no committed fixture has a masked-LM head).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ROOT, OUT, cliPage, launch, openPage, settle, clean, clickAndRender, rendered } from './lib.mjs';

const GPT2 = path.join(ROOT, 'tests/data/small-gpt2');
const INJECT = 'hello <img src=x onerror=alert(1)> world';
let browser;
const pages = {};
before(async () => {
  pages.gen = cliPage('predict-gen', ['--model', GPT2, '--qk', '--generate', '6', '--predict', '4', INJECT]);
  pages.sample = cliPage('predict-sample', ['--model', GPT2, '--generate', '5', '--temperature', '0.9', '--top-p', '0.95', '--seed', '7', 'hello world']);
  pages.plain = cliPage('predict-plain', ['--model', GPT2, 'hello world']);
  pages.mlm = maskedPage();
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

/* A demo (BERT) page with hand-made fill-ins at its [MASK], written into the
 * page's metadata the way html.c writes strings (< > & as \u escapes). */
function maskedPage() {
  const p = cliPage('predict-mlm-base', ['the cat [MASK] on the mat']);
  const data = p.data();
  const at = data.tokens.indexOf('[MASK]');
  const top = [['sat', 0.61], ['<b>lay</b>', 0.2], ['##s', 0.05]].map(([t, pr], i) => ({ token: t, display: t, id: 100 + i, prob: pr }));
  const html = fs.readFileSync(p.html, 'utf8');
  const re = /(<script type="application\/json" id="av-meta">)([\s\S]*?)(<\/script>)/;
  const meta = JSON.parse(html.match(re)[2]);
  meta.predictions = [{ position: at, top }];
  const esc = JSON.stringify(meta).replace(/[<>&]/g, c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  const file = path.join(OUT, 'predict-mlm.html');
  fs.writeFileSync(file, html.replace(re, (_, a, __, c) => a + esc + c));
  return { html: file, data: () => ({ ...data, predictions: meta.predictions }) };
}

async function open(name, opts) {
  const r = await openPage(browser.ctx, pages[name].html, opts);
  r.data = pages[name].data();
  return r;
}

/* How the page is meant to show a candidate: leading/trailing spaces as ␣,
 * whitespace-only text as glyphs, control characters as their symbols. */
const WS = { ' ': '␣', '\n': '↵', '\r': '␍', '\t': '⇥', '\f': '␌', '\v': '␋' };
const ctl = c => WS[c] || (c === '\x7f' ? '␡' : String.fromCharCode(0x2400 + c.charCodeAt(0)));
function shown(s) {
  if (s === '') return '∅';
  if (/^\s+$/.test(s)) return s.replace(/\s/g, c => WS[c] || '␣');
  const m = /^( *)([\s\S]*?)( *)$/.exec(s);
  return '␣'.repeat(m[1].length) + m[2].replace(/[\x00-\x1f\x7f]/g, ctl) + '␣'.repeat(m[3].length);
}
/* a token of the sequence as the page labels it (a leading space stays a space) */
const label = s => (s === '' ? '∅' : /^\s+$/.test(s) ? s.replace(/\s/g, c => WS[c] || '␣') : s.replace(/[\x00-\x1f\x7f]/g, ctl));
/* percentages as the page prints them */
function pct(p) {
  const pc = p * 100;
  if (pc >= 99.95 && p < 1) return '>99.9%';
  if (pc >= 1) return pc.toFixed(1) + '%';
  if (pc >= 1e-4) return pc.toPrecision(2) + '%';
  return p > 0 ? '<0.0001%' : '0%';
}
const cardRows = page => page.$$eval('#pred-card .pk-row', els => els.map(e => ({
  id: +e.dataset.id, prob: e.dataset.prob === undefined ? null : +e.dataset.prob, text: e.querySelector('.pk-tok').textContent,
  p: e.querySelector('.pk-p').textContent, width: parseFloat(e.querySelector('.pk-bar').style.width),
  mark: e.classList.contains('mark'), extra: e.classList.contains('extra'),
})));
const cardShown = page => page.evaluate(() => !document.getElementById('pred-card').hidden);
/* moves the mouse off every token (onto the page title) */
const away = page => page.hover('.brand');

function checkRows(rows, top, what) {
  assert.equal(rows.length, top.length, what + ': one bar per candidate');
  top.forEach((c, i) => {
    assert.equal(rows[i].id, c.id, what + ' id ' + i);
    assert.equal(rows[i].prob, c.prob, what + ' prob ' + i);
    assert.equal(rows[i].text, shown(c.display), what + ' text ' + i);
    assert.equal(rows[i].p, pct(c.prob), what + ' percentage ' + i);
    assert.ok(Math.abs(rows[i].width - c.prob * 100) < 1e-6, what + ' bar width ' + i + ': ' + rows[i].width);
  });
}

describe('predictions and generation', () => {
  test('the strip shows the top-1 of every position from the JSON; generated positions are marked', async () => {
    const { page, log, data } = await open('gen');
    try {
      assert.equal(data.predictions.length, data.tokens.length, 'causal: one prediction per position');
      const cells = await page.$$eval('#pred-strip .pred-cell', els => els.map(e => ({
        pos: +e.dataset.pos, tok: e.querySelector('.pc-tok').textContent, top: e.querySelector('.pc-top').textContent,
        p: e.querySelector('.pc-p').textContent, prob: +e.dataset.prob, gen: e.classList.contains('gen'),
      })));
      assert.equal(cells.length, data.predictions.length);
      const P = data.generation.prompt_tokens;
      data.predictions.forEach((pr, i) => {
        assert.equal(cells[i].pos, pr.position);
        assert.equal(cells[i].top, shown(pr.top[0].display), 'top-1 text at ' + i);
        assert.equal(cells[i].prob, pr.top[0].prob, 'top-1 probability at ' + i);
        assert.equal(cells[i].p, pct(pr.top[0].prob));
        assert.equal(cells[i].tok, label(data.display_tokens[pr.position]), 'token at ' + i);
        assert.equal(cells[i].gen, pr.position >= P, 'generated marker at ' + i);
      });
      /* greedy generation: each generated token is the previous position's top-1 */
      data.generation.steps.forEach(s => assert.equal(data.predictions[s.position - 1].top[0].id, s.id));
      clean(log);
    } finally { await page.close(); }
  });

  test('hovering or pinning a token shows its top-K as bars with the JSON probabilities', async () => {
    const { page, log, data } = await open('gen');
    try {
      const K = data.predictions[0].top.length;
      assert.equal(K, 4);
      assert.equal(await cardShown(page), false);
      for (const pos of [0, 5, data.tokens.length - 1]) {
        await page.hover(`.hv-left .tok[data-pos="${pos}"]`);
        assert.equal(await cardShown(page), true, 'card at ' + pos);
        assert.equal(await page.getAttribute('#pred-card', 'data-pos'), String(pos));
        const title = await page.textContent('#pred-card .pk-title');
        assert.ok(title.startsWith('Next token after '), title);
        const rows = await cardRows(page);
        checkRows(rows.filter(r => !r.extra), data.predictions[pos].top, 'position ' + pos);
        /* the token that follows in the sequence is marked (or named below the bars) */
        if (pos + 1 < data.tokens.length) {
          const next = data.input_ids[pos + 1];
          const inTop = data.predictions[pos].top.some(c => c.id === next);
          const marked = rows.filter(r => r.mark).map(r => r.id);
          if (inTop || pos + 1 >= data.generation.prompt_tokens) assert.deepEqual(marked, [next]);
          else assert.match(await page.textContent('#pred-card .pk-note'), /not in the top 4/);
        }
      }
      /* the right column and the strip show the same card */
      await page.hover('.hv-right .tok[data-pos="2"]');
      checkRows(await cardRows(page), data.predictions[2].top, 'right column');
      await page.hover('#pred-strip .pred-cell[data-pos="7"]');
      assert.equal(await page.getAttribute('#pred-card', 'data-pos'), '7');
      checkRows((await cardRows(page)).filter(r => !r.extra), data.predictions[7].top, 'strip cell');
      await away(page);
      assert.equal(await cardShown(page), false, 'hover card goes with the mouse');
      /* click pins (the head view's own pin): the card stays until Esc */
      await page.click('.hv-left .tok[data-pos="3"]');
      await away(page);
      assert.equal(await cardShown(page), true, 'pinned card stays');
      assert.equal(await page.getAttribute('#pred-card', 'data-pos'), '3');
      assert.equal(await page.$eval('.hv', e => e.dataset.iso), 'L3');
      await page.hover('.hv-left .tok[data-pos="8"]');
      assert.equal(await page.getAttribute('#pred-card', 'data-pos'), '3', 'hover does not replace a pinned card');
      await page.keyboard.press('Escape');
      await settle(page);
      assert.equal(await cardShown(page), false, 'Esc unpins');
      clean(log);
    } finally { await page.close(); }
  });

  test('the step control moves the highlighted query (head view) and the matrix row, and shows the step\'s top-K', async () => {
    const { page, log, data } = await open('gen');
    try {
      const g = data.generation, P = g.prompt_tokens;
      assert.equal(g.generated_tokens, 6);
      assert.equal(await page.$eval('.hv', e => e.dataset.iso), '', 'no step: every line');
      assert.equal(await page.isVisible('#gen-chart'), false);
      const check = async (i, head = true) => {
        const s = g.steps[i];
        assert.equal(s.position, P + i);
        assert.equal(await page.$eval('#step-range', e => e.value), String(i + 1));
        assert.match(await page.textContent('#step-label'), new RegExp('^Step ' + (i + 1) + ' of 6 · position ' + s.position + ' '));
        if (head) {
          assert.deepEqual(await page.$$eval('.hv-left .tok.pinned', els => els.map(e => +e.dataset.pos)), [s.position]);
          assert.equal(await page.$eval('.hv', e => e.dataset.iso), 'L' + s.position);
        }
        assert.deepEqual(await page.$$eval('.pred-cell.step', els => els.map(e => +e.dataset.pos)), [s.position]);
        const rows = await page.$$eval('#gen-chart .pk-row', els => els.map(e => ({ id: +e.dataset.id, prob: +e.dataset.prob, mark: e.classList.contains('mark') })));
        assert.deepEqual(rows.map(r => r.prob), s.top.map(c => c.prob), 'step top-K probabilities');
        assert.deepEqual(rows.filter(r => r.mark).map(r => r.id), [s.id], 'the chosen token is marked');
        assert.match(await page.textContent('#step-label'), new RegExp('p = ' + pct(s.prob).replace('.', '\\.')));
      };
      let prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.keyboard.press('ArrowRight');
      await rendered(page, prev);
      await check(0);
      await clickAndRender(page, '#step-next');
      await check(1);
      prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.$eval('#step-range', e => { e.value = '5'; e.dispatchEvent(new Event('input', { bubbles: true })); });
      await rendered(page, prev);
      await check(4);
      /* Alt+arrows still step the layer, not the generation */
      prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.keyboard.press('Alt+ArrowRight');
      await rendered(page, prev);
      assert.equal(await page.evaluate(() => document.body.dataset.layer), '1');
      await check(4);
      /* the matrix view outlines the step's row, and moves it with the step */
      await clickAndRender(page, '#tab-matrix');
      assert.equal(await page.$eval('.mx-wrap canvas + canvas', e => e.dataset.pinrow), String(g.steps[4].position));
      const h1 = await page.$eval('.mx-wrap canvas', cv => cv.toDataURL());
      await clickAndRender(page, '#step-prev');
      await check(3, false);
      assert.equal(await page.$eval('.mx-wrap canvas + canvas', e => e.dataset.pinrow), String(g.steps[3].position));
      assert.notEqual(await page.$eval('.mx-wrap canvas', cv => cv.toDataURL()), h1, 'the outline moved');
      /* the neuron view's query follows the step */
      await clickAndRender(page, '#tab-neuron');
      assert.equal(await page.$eval('#view-neuron', e => e.dataset.query), String(g.steps[3].position));
      /* back to no step: nothing pinned */
      await clickAndRender(page, '#tab-head');
      for (let i = 0; i < 4; i++) await clickAndRender(page, '#step-prev');
      assert.equal(await page.$eval('#step-range', e => e.value), '0');
      assert.equal(await page.$eval('.hv', e => e.dataset.iso), '');
      assert.equal(await page.isDisabled('#step-prev'), true);
      assert.equal(await page.isVisible('#gen-chart'), false);
      clean(log);
    } finally { await page.close(); }
  });

  test('generated tokens carry the marker in every token list; the text, strategy and stop reason are shown', async () => {
    const { page, log, data } = await open('gen');
    try {
      const P = data.generation.prompt_tokens, n = data.tokens.length;
      const want = Array.from({ length: n - P }, (_, i) => P + i);
      assert.deepEqual(await page.$$eval('.hv-left .tok.gen', els => els.map(e => +e.dataset.pos)), want);
      assert.deepEqual(await page.$$eval('.hv-right .tok.gen', els => els.map(e => +e.dataset.pos)), want);
      const deco = await page.$eval('.hv-left .tok.gen .t', e => getComputedStyle(e).textDecorationLine);
      assert.equal(deco, 'underline');
      assert.equal(await page.$eval('.hv-left .tok:not(.gen) .t', e => getComputedStyle(e).textDecorationLine), 'none');
      await clickAndRender(page, '#tab-neuron');
      assert.deepEqual(await page.$$eval('.nv-queries .tok.gen', els => els.map(e => +e.dataset.pos)), want);
      assert.equal(await page.textContent('#gen-text .gen-cont'), data.generation.text);
      assert.equal(await page.textContent('#gen-text .gen-prompt'), INJECT);
      const info = await page.textContent('#gen-info');
      assert.match(info, /6 tokens after a \d+-token prompt/);
      assert.match(info, /greedy/);
      assert.match(info, /stopped: reached the limit of 6 tokens/);
      assert.match(await page.textContent('#foot'), /← → generated token/);
      clean(log);
    } finally { await page.close(); }
  });

  test('offline; token text like <img onerror> is shown as text and never runs', async () => {
    const { page, log } = await open('gen', { theme: 'dark' });
    try {
      assert.match(await page.textContent('#input-line'), /<img src=x onerror=alert\(1\)>/);
      await page.hover('#pred-strip .pred-cell[data-pos="6"]');
      await page.keyboard.press('ArrowRight');
      await settle(page);
      await page.click('#pred-strip .pred-cell[data-pos="7"]');
      await clickAndRender(page, '#tab-matrix');
      await page.waitForTimeout(100);
      assert.equal(await page.$$eval('img', els => els.length), 0, 'no <img> element');
      assert.equal(await page.$$eval('script', els => els.filter(e => !e.type || e.type === 'text/javascript').length), 1);
      const strip = await page.$$eval('#pred-strip .pc-tok', els => els.map(e => e.textContent).join(''));
      assert.ok(strip.includes('<img'), strip);
      clean(log);
    } finally { await page.close(); }
  });

  test('sampled generation without --predict: strategy shown, no strip, a generated token shows the top-K it was chosen from', async () => {
    const { page, log, data } = await open('sample');
    try {
      assert.equal(data.predictions, undefined);
      assert.equal(await page.$('#pred-strip'), null);
      assert.match(await page.textContent('#gen-info'), /sampled \(temperature 0\.9, top-p 0\.95, seed 7\)/);
      const s = data.generation.steps[2];
      await page.hover(`.hv-left .tok[data-pos="${s.position}"]`);
      assert.equal(await cardShown(page), true);
      assert.match(await page.textContent('#pred-card .pk-title'), /^Chosen at step 3/);
      const rows = await cardRows(page);
      checkRows(rows.filter(r => !r.extra), s.top, 'step 3');
      const chosen = rows.filter(r => r.mark);
      assert.equal(chosen.length, 1);
      assert.equal(chosen[0].id, s.id);
      assert.equal(chosen[0].prob, s.prob);
      /* a prompt token has nothing to show */
      await page.hover('.hv-left .tok[data-pos="0"]');
      assert.equal(await cardShown(page), false);
      clean(log);
    } finally { await page.close(); }
  });

  test('masked model: one strip cell per mask, fill-ins on hover, nothing on other tokens', async () => {
    const { page, log, data } = await open('mlm');
    try {
      const [pr] = data.predictions;
      const cells = await page.$$eval('#pred-strip .pred-cell', els => els.map(e => ({ pos: +e.dataset.pos, tok: e.querySelector('.pc-tok').textContent, top: e.querySelector('.pc-top').textContent })));
      assert.deepEqual(cells, [{ pos: pr.position, tok: '[MASK]', top: 'sat' }]);
      await page.hover(`.hv-left .tok[data-pos="${pr.position}"]`);
      assert.match(await page.textContent('#pred-card .pk-title'), /^Fill-ins for \[MASK\]/);
      const rows = await cardRows(page);
      checkRows(rows, pr.top, 'fill-ins');
      assert.deepEqual(rows.filter(r => r.mark), [], 'nothing marked: the masked token is unknown');
      assert.equal(await page.$$eval('#pred-card b', els => els.length), 0, 'a candidate "<b>lay</b>" stays text');
      await page.hover('.hv-left .tok[data-pos="1"]');
      assert.equal(await cardShown(page), false);
      assert.equal(await page.$('#gen-panel'), null);
      clean(log);
    } finally { await page.close(); }
  });

  test('a page without predictions or generation has none of it', async () => {
    const { page, log } = await open('plain');
    try {
      assert.equal(await page.$('#pred-row'), null);
      assert.equal(await page.$('#gen-panel'), null);
      assert.equal(await page.$$eval('#input-line .row', els => els.length), 2);
      assert.equal(await page.$eval('.top', e => e.classList.contains('wide-tags')), false);
      assert.equal(await page.$$eval('.tok.gen', els => els.length), 0);
      await page.hover('.hv-left .tok[data-pos="1"]');
      assert.equal(await cardShown(page), false);
      assert.doesNotMatch(await page.textContent('#foot'), /generated/);
      /* arrows without Alt do nothing here */
      const layer = await page.evaluate(() => document.body.dataset.layer);
      await page.keyboard.press('ArrowRight');
      await settle(page);
      assert.equal(await page.evaluate(() => document.body.dataset.layer), layer);
      clean(log);
    } finally { await page.close(); }
  });
});
