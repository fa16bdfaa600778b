// Encoder-decoder pages: attention of a T5/BART-shaped model given to `attnviz render` (encoder 6
// tokens, decoder 4, 2 layers x 3 heads; the arrays written here with Python's standard library, as
// tests/e2e/render_test.sh does). The Stack control switches between the encoder's self-attention, the
// decoder's (causal) and cross attention (decoder tokens on the left / down, encoder tokens on the right
// / across); every view follows it, and shows the JSON's numbers at 4 decimals.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { OUT, ATTNVIZ, launch, openPage, settle, clean, ensureBuilt, fmt4, closeAll, clickAndRender, rendered } from './lib.mjs';

const ENC = ['▁She', '▁sees', '<img src=x onerror=alert(1)>', '▁elephant', '.', '</s>'];
const DEC = ['<pad>', '▁Sie', '▁sieht', '▁Elefanten'];
const L = 2, H = 3;

/* rows with distinct weights: w(l, h, i, j) = (7l + 3h + 5i + 2j) mod 9 + 1, normalized; decoder rows causal */
const MK = String.raw`
import json, struct, sys, zipfile
out, enc, dec = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
L, H, ne, nd = 2, 3, len(enc), len(dec)
def stack(r, c, causal):
    a = []
    for l in range(L):
        for h in range(H):
            for i in range(r):
                w = [float((l * 7 + h * 3 + i * 5 + j * 2) % 9 + 1) if (not causal or j <= i) else 0.0 for j in range(c)]
                a += [v / sum(w) for v in w]
    return a
A = {"encoder_attention": ([L, H, ne, ne], stack(ne, ne, False)),
     "decoder_attention": ([L, H, nd, nd], stack(nd, nd, True)),
     "cross_attention": ([L, H, nd, ne], stack(nd, ne, False))}
def npy(shape, vals):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{s}, " for s in shape)
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<%df" % len(vals), *vals)
with zipfile.ZipFile(out, "w") as z:
    for name, (shape, vals) in A.items():
        z.writestr(name + ".npy", npy(shape, vals))
json.dump({"encoder_tokens": enc, "decoder_tokens": dec, "model": "t5-shaped"}, open(out[:-4] + ".json", "w"))
`;

let browser, html, data;
before(async () => {
  ensureBuilt();
  const npz = path.join(OUT, 'encdec.npz');
  html = path.join(OUT, 'encdec.html');
  const json = path.join(OUT, 'encdec.json');
  execFileSync('python3', ['-c', MK, npz, JSON.stringify(ENC), JSON.stringify(DEC)]);
  execFileSync(ATTNVIZ, ['render', npz, '--json', json, '--html', html, '--layer', '1', '--head', '2', '--quiet'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  data = JSON.parse(fs.readFileSync(json, 'utf8'));
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

const shown = t => t.replace(/^▁/, ' '); /* SentencePiece's ▁ read as a space */
const label = t => shown(t).trim();
const side = s => '.hv-' + (s === 'R' ? 'right' : 'left') + ' .tok';
const texts = (page, s) => page.$$eval(side(s) + ' .t', els => els.map(e => e.textContent.trim()));
const values = (page, s) => page.$$eval(side(s) + ' .v', els => els.map(e => e.textContent));
async function stack(page, name) {
  await clickAndRender(page, '#stack-seg [data-stack="' + name + '"]');
  assert.equal(await page.evaluate(() => document.body.dataset.stack), name);
}

describe('encoder-decoder page', () => {
  test('Stack control: Encoder / Decoder / Cross; the head view draws each, cross from decoder (left) to encoder (right)', async () => {
    const { page, log } = await openPage(browser.ctx, html);
    try {
      assert.ok(await page.isVisible('#ctl-stack'));
      assert.deepEqual(await page.$$eval('#stack-seg button', els => els.map(e => [e.dataset.stack, e.textContent])),
        [['encoder', 'Encoder'], ['decoder', 'Decoder'], ['cross', 'Cross']]);
      assert.ok(!(await page.isVisible('#ctl-filter')), 'no sentence filter');
      /* bertviz's default: the first stack */
      assert.equal(await page.evaluate(() => document.body.dataset.stack), 'encoder');
      assert.equal(await page.getAttribute('#stack-seg [data-stack="encoder"]', 'aria-checked'), 'true');
      assert.deepEqual(await texts(page, 'L'), ENC.map(label));
      assert.deepEqual(await texts(page, 'R'), ENC.map(label));

      /* cross: 4 decoder tokens left, 6 encoder tokens right; a decoder token's lines are its cross_attention row */
      await stack(page, 'cross');
      assert.equal(await page.getAttribute('#stack-seg [data-stack="cross"]', 'aria-checked'), 'true');
      assert.deepEqual(await texts(page, 'L'), DEC.map(label));
      assert.deepEqual(await texts(page, 'R'), ENC.map(label));
      assert.match(await page.textContent('#view-head .view-title'), /cross attention, layer 1/);
      assert.match(await page.textContent('#view-head .view-title'), /Left: decoder tokens \(queries\), right: encoder tokens \(keys\)/);
      const X = data.cross_attention[1][2];
      for (const i of [1, 3]) {
        await page.hover(side('L') + '[data-k="' + i + '"]');
        await settle(page);
        assert.equal(await page.$eval('#view-head .hv', e => e.dataset.iso), 'L' + i);
        const same = closeAll(await values(page, 'R'), X[i], 0.5e-4 + 2e-6, 'cross weights of decoder token ' + i);
        assert.equal(same, ENC.length, 'shown weights equal the JSON at 4 decimals');
        assert.equal(await page.$eval('#view-head .hv', e => +e.dataset.lines), X[i].filter(w => w >= 0.0015).length);
      }
      /* an encoder token: what every decoder token gives it */
      await page.hover(side('R') + '[data-k="4"]');
      await settle(page);
      closeAll(await values(page, 'L'), X.map(r => r[4]), 0.5e-4 + 2e-6, 'cross weights into encoder token 4');

      /* decoder: 4 / 4, causal: a token's later keys are masked (no value, dimmed) */
      await page.mouse.move(5, 5);
      await stack(page, 'decoder');
      assert.deepEqual(await texts(page, 'L'), DEC.map(label));
      assert.deepEqual(await texts(page, 'R'), DEC.map(label));
      await page.hover(side('L') + '[data-k="1"]');
      await settle(page);
      const D = data.decoder_attention[1][2][1];
      const v = await values(page, 'R');
      assert.deepEqual(v.slice(2), ['', ''], 'masked keys show no value');
      closeAll(v.slice(0, 2), D.slice(0, 2), 0.5e-4 + 2e-6, 'decoder weights');
      assert.deepEqual(await page.$$eval(side('R'), els => els.map(e => e.classList.contains('masked'))), [false, false, true, true]);

      /* encoder again, by keyboard: S steps decoder -> cross -> encoder */
      await page.mouse.move(5, 5);
      for (const want of ['cross', 'encoder']) {
        const prev = await page.evaluate(() => document.body.dataset.rendered);
        await page.keyboard.press('s');
        await rendered(page, prev);
        assert.equal(await page.evaluate(() => document.body.dataset.stack), want);
      }
      assert.equal((await texts(page, 'L')).length, 6);
      await page.hover(side('L') + '[data-k="2"]');
      await settle(page);
      closeAll(await values(page, 'R'), data.encoder_attention[1][2][2], 0.5e-4 + 2e-6, 'encoder weights');
      /* the control's buttons take the keyboard too */
      await page.focus('#stack-seg [data-stack="cross"]');
      const prev = await page.evaluate(() => document.body.dataset.rendered);
      await page.keyboard.press('Enter');
      await rendered(page, prev);
      assert.equal(await page.evaluate(() => document.body.dataset.stack), 'cross');

      /* the hostile token is text */
      assert.ok((await texts(page, 'R')).includes('<img src=x onerror=alert(1)>'));
      assert.equal(await page.$$eval('img', els => els.length), 0);
      clean(log);
    } finally { await page.close(); }
  });

  test('matrix view: rectangular for cross attention, both axes labelled; square and causal for the decoder', async () => {
    const { page, log } = await openPage(browser.ctx, html, { theme: 'dark' });
    try {
      await clickAndRender(page, '#tab-matrix');
      const grid = () => page.$eval('#view-matrix canvas[data-cell]', e => {
        const r = e.getBoundingClientRect();
        return { x: r.left, y: r.top, w: r.width, h: r.height, cell: +e.dataset.cell, lw: +e.dataset.labw, lh: +e.dataset.labh, rows: +e.dataset.rows, cols: +e.dataset.cols };
      });
      const cellAt = async (g, r, c) => {
        await page.mouse.move(g.x + g.lw + c * g.cell + g.cell / 2, g.y + g.lh + r * g.cell + g.cell / 2);
        await settle(page);
        return { title: await page.textContent('#tooltip .tt-title'), val: await page.$eval('#tooltip', e => (e.querySelector('.tt-val') || {}).textContent || null),
          sub: await page.$$eval('#tooltip .tt-sub', els => els.map(x => x.textContent).join(' | ')) };
      };
      const sizes = {};
      for (const [name, R, C] of [['encoder', 6, 6], ['cross', 4, 6], ['decoder', 4, 4]]) {
        await page.mouse.move(5, 5);
        await stack(page, name);
        const g = await grid();
        assert.deepEqual([g.rows, g.cols], [R, C], name + ': rows x columns');
        assert.equal(g.w, g.lw + C * g.cell + 8, name + ': canvas width');
        assert.equal(g.h, g.lh + R * g.cell + 8, name + ': canvas height');
        sizes[name] = [g.w - g.lw, g.h - g.lh]; /* the grid, without the labels */
      }
      assert.ok(sizes.cross[1] < sizes.encoder[1] && sizes.cross[0] === sizes.encoder[0], 'cross: the encoder\'s width, the decoder\'s height');
      await stack(page, 'cross');
      let g = await grid();
      const X = data.cross_attention[1][2];
      for (const [r, c] of [[0, 0], [1, 5], [3, 2]]) {
        const got = await cellAt(g, r, c);
        assert.equal(got.val, fmt4(X[r][c]));
        assert.equal(got.title, shown(DEC[r]) + '  →  ' + shown(ENC[c]));
        assert.match(got.sub, new RegExp('decoder ' + r + ', encoder ' + c));
      }
      assert.match(await page.textContent('#view-matrix .view-title'), /Rows: decoder tokens \(queries\), columns: encoder tokens \(keys\)/);
      /* decoder: a key after its query is masked */
      await page.mouse.move(5, 5);
      await stack(page, 'decoder');
      g = await grid();
      const m = await cellAt(g, 0, 3);
      assert.equal(m.val, null);
      assert.match(m.sub, /masked/);
      assert.equal((await cellAt(g, 3, 1)).val, fmt4(data.decoder_attention[1][2][3][1]));
      clean(log);
    } finally { await page.close(); }
  });

  test('model view: every layer x head of the selected stack; neuron view disabled with a note', async () => {
    const { page, log } = await openPage(browser.ctx, html);
    try {
      await page.waitForFunction(() => document.body.dataset.loaded === '1');
      await clickAndRender(page, '#tab-model');
      const hashes = {};
      for (const name of ['encoder', 'decoder', 'cross']) {
        await stack(page, name);
        await page.waitForFunction(() => document.querySelectorAll('#view-model .thumb canvas').length === 6);
        await settle(page);
        assert.match(await page.textContent('#view-model .view-title'), new RegExp('Model view · ' + name + ' attention'));
        const hs = [];
        const all = await page.$$eval('#view-model .thumb canvas', els => els.map(cv => {
          const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
          let nz = 0, h = 2166136261 >>> 0;
          for (let i = 0; i < d.length; i++) h = Math.imul(h ^ d[i], 16777619) >>> 0;
          for (let i = 3; i < d.length; i += 4) if (d[i]) nz++;
          return { nz, h };
        }));
        assert.equal(all.length, L * H);
        for (const t of all) { assert.ok(t.nz > 50, name + ': thumbnail drawn'); hs.push(t.h); }
        hashes[name] = hs.join(',');
      }
      assert.notEqual(hashes.cross, hashes.encoder);
      assert.notEqual(hashes.cross, hashes.decoder);
      assert.match(await page.textContent('#view-model .view-title'), /left: decoder tokens, right: encoder tokens/);
      /* a thumbnail opens the head large, rectangular */
      await page.click('#view-model .thumb[data-li="0"][data-h="1"]');
      await page.waitForFunction(() => document.getElementById('modal').dataset.drawn === '1');
      assert.equal(await page.$$eval('#modal .hv-left .tok', els => els.length), 4);
      assert.equal(await page.$$eval('#modal .hv-right .tok', els => els.length), 6);
      assert.ok(await page.isHidden('#modal-open-neuron'));
      await page.keyboard.press('Escape');
      /* the neuron view needs q/k: its tab is disabled, its key does nothing, a note says why */
      assert.ok(await page.isDisabled('#tab-neuron'));
      assert.match(await page.getAttribute('#tab-neuron', 'title'), /queries and keys/);
      await page.keyboard.press('3');
      await settle(page);
      assert.equal(await page.evaluate(() => document.body.dataset.view), 'model');
      assert.match(await page.textContent('#stack-note'), /neuron view needs queries and keys/);
      assert.equal(await page.isDisabled('#mode-seg [data-mode="rollout"]'), true, 'no rollout for cross attention');
      clean(log);
    } finally { await page.close(); }
  });

  test('export and themes follow the stack; nothing leaves the page', async () => {
    const { page, log } = await openPage(browser.ctx, html);
    try {
      await stack(page, 'cross');
      for (const view of ['head', 'model', 'matrix']) {
        await clickAndRender(page, '#tab-' + view);
        if (view === 'model') await page.waitForFunction(() => document.querySelectorAll('#view-model .thumb canvas').length === 6);
        const [svg] = await Promise.all([page.waitForEvent('download'), page.click('#export-svg')]);
        assert.match(svg.suggestedFilename(), new RegExp('^attnviz-' + view + '-cross.*\\.svg$'));
        const text = fs.readFileSync(await svg.path(), 'utf8');
        const ok = await page.evaluate(s => !new DOMParser().parseFromString(s, 'image/svg+xml').querySelector('parsererror'), text);
        assert.ok(ok, view + ': SVG parses');
        assert.match(text, /t5-shaped · cross attention/);
        assert.ok(!/<img/i.test(text), view + ': the hostile token is escaped in the SVG');
        const [png] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
        const buf = fs.readFileSync(await png.path());
        assert.equal(buf.subarray(1, 4).toString(), 'PNG');
      }
      /* theme switch redraws the same stack */
      await clickAndRender(page, '#theme-btn');
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), 'dark');
      assert.equal(await page.evaluate(() => document.body.dataset.stack), 'cross');
      assert.equal(await page.$$eval('#view-matrix canvas[data-rows="4"][data-cols="6"]', els => els.length), 1);
      clean(log);
    } finally { await page.close(); }
  });
});
