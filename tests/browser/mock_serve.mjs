// mock_serve.mjs — a stand-in for `attnviz serve` (src/serve.c) in node, for
// the live page's unit-level browser tests: the HTTP API's shapes
// (docs: the serve API contract) served from what `./attnviz --html --qk`
// writes for each run. Each run's offline page is parsed: its meta is the
// run's meta (qk: null), its av-att-<i> chunks are the attention (inflated
// and re-deflated per head set), its av-qk-<i> chunks give q/k (as their
// rounded values, float32), thumbnails are pooled here. Not a reference for
// the numbers (the attention is the CLI's own): it checks the page's side
// of the contract — requests, encodings, token, stale responses.
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { ATTNVIZ, OUT, ensureBuilt } from './lib.mjs';

const B85 = '!#$%()*+,.0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{|}~';
const B85_VAL = new Int16Array(128).fill(-1);
for (let i = 0; i < B85.length; i++) B85_VAL[B85.charCodeAt(i)] = i;
function b85decode(text, zlen) {
  const out = Buffer.alloc((text.length / 5) * 4);
  for (let i = 0, o = 0; i < text.length; i += 5, o += 4) {
    let v = 0;
    for (let k = 0; k < 5; k++) v = v * 85 + B85_VAL[text.charCodeAt(i + k)];
    out.writeUInt32BE(v >>> 0, o);
  }
  return out.subarray(0, zlen);
}
const toCodes = zbytes => {
  const raw = zlib.inflateSync(zbytes), cnt = raw.length >> 1, c = new Uint16Array(cnt);
  for (let i = 0; i < cnt; i++) c[i] = raw[i] | (raw[cnt + i] << 8);
  return c;
};
const fromCodes = codes => {
  const cnt = codes.length, raw = Buffer.alloc(cnt * 2);
  for (let i = 0; i < cnt; i++) { raw[i] = codes[i] & 255; raw[cnt + i] = codes[i] >> 8; }
  return zlib.deflateSync(raw, { level: 1 });
};

/** Parses an offline page: {meta, chunks: Map id -> zlib bytes}. */
export function parsePage(html) {
  const m = /<script type="application\/json" id="av-meta">([\s\S]*?)<\/script>/.exec(html);
  const meta = JSON.parse(m[1]);
  const chunks = new Map();
  for (const c of html.matchAll(/<script type="application\/octet-stream" id="([^"]+)" data-z="(\d+)">([\s\S]*?)<\/script>/g))
    chunks.set(c[1], b85decode(c[3], +c[2]));
  return { meta, chunks };
}

/** The live page's HTML from an offline page: meta {live}, no payload, fetch allowed to 'self'. */
function livePage(html, live) {
  const metaJson = JSON.stringify({ live }).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
  return html
    .replace(/(<script type="application\/json" id="av-meta">)[\s\S]*?(<\/script>)/, (_, a, b) => a + metaJson + b)
    .replace(/<script type="application\/octet-stream"[^>]*>[\s\S]*?<\/script>\n?/g, '')
    .replace("default-src 'none';", "default-src 'none'; connect-src 'self';");
}

function modelInfo(id, dir, meta, predict) {
  const c = meta.config;
  return {
    id, name: meta.model || path.basename(dir), family: c.model_type, layers: c.layers, heads: c.heads,
    kv_heads: c.kv_heads || c.heads, head_dim: c.head_dim, max_tokens: c.max_position_embeddings, causal: !!c.causal, predict,
  };
}

/**
 * Starts the mock: models [{dir, predict}], options {text: the page's initial text,
 * delayMs(body) -> ms before a run answers, refuse(body) -> null or {status, error},
 * pageBudget: /api/page without layers answers 413}.
 * Returns {url, token, port, log (request lines), close()}.
 */
export async function startMock(models, opts = {}) {
  ensureBuilt();
  const token = crypto.randomBytes(16).toString('hex');
  const dir = fs.mkdtempSync(path.join(OUT, 'mock-'));
  let seq = 0;
  const runs = new Map();
  const log = [];
  const runCli = (args, html) => new Promise((res, rej) => {
    execFile(ATTNVIZ, ['--quiet', '--qk', '--html', html, ...args], { maxBuffer: 1 << 26 }, (err, _o, stderr) => {
      if (err) rej(new Error(String(stderr).trim().split('\n').pop() || err.message)); else res(stderr);
    });
  });
  /* the models' shapes and the page template, from one run each */
  const info = [];
  let shell = null;
  for (let i = 0; i < models.length; i++) {
    const html = path.join(dir, 'probe' + i + '.html');
    await runCli(['--model', models[i].dir, 'probe'], html);
    const text = fs.readFileSync(html, 'utf8');
    info.push(modelInfo(i, models[i].dir, parsePage(text).meta, !!models[i].predict));
    if (!shell) shell = text;
  }
  const live = { version: 1, token, models: info, text: opts.text === undefined ? null : opts.text, text_b: null };
  const page = livePage(shell, live);

  const send = (res, status, type, body, extra = {}) => {
    res.writeHead(status, Object.assign({ 'Content-Type': type, 'Cache-Control': 'no-store' }, extra));
    res.end(body);
  };
  const fail = (res, status, msg) => send(res, status, 'application/json', JSON.stringify({ error: msg }));
  const server = http.createServer(async (req, res) => {
    try {
      const u = new URL(req.url, 'http://x');
      log.push(req.method + ' ' + u.pathname + u.search.replace(/token=[0-9a-f]+/, 'token=…'));
      const tok = req.headers['x-attnviz-token'] || u.searchParams.get('token');
      if (tok !== token) return fail(res, 403, 'bad or missing token');
      if (u.pathname === '/') return send(res, 200, 'text/html; charset=utf-8', page);
      if (u.pathname === '/api/models') return send(res, 200, 'application/json', JSON.stringify({ models: info }));
      if (u.pathname === '/api/run') {
        if (req.method !== 'POST') return fail(res, 405, 'POST only');
        let body = '';
        for await (const c of req) body += c;
        const b = JSON.parse(body);
        const m = models[b.model || 0];
        if (!m) return fail(res, 400, 'no model ' + b.model);
        const refuse = opts.refuse ? opts.refuse(b) : null;
        if (refuse) return fail(res, refuse.status, refuse.error);
        const id = 'r' + ++seq;
        const html = path.join(dir, id + '.html');
        const args = ['--model', m.dir];
        if (b.predict > 0) args.push('--predict', String(b.predict));
        args.push('--', b.text);
        if (b.text_b !== null && b.text_b !== undefined) args.push(b.text_b);
        const t0 = performance.now();
        const stderr = await runCli(args, html);
        const ms = performance.now() - t0;
        const text = fs.readFileSync(html, 'utf8');
        const p = parsePage(text);
        runs.set(id, { ...p, html: text });
        const meta = Object.assign({}, p.meta, { qk: null });
        const warnings = String(stderr).split('\n').filter(l => /warning/i.test(l));
        if (p.meta.truncated) warnings.push('input is longer than ' + p.meta.config.max_position_embeddings + ' tokens; dropped ' + p.meta.truncated + ' tokens');
        const delay = opts.delayMs ? opts.delayMs(b) : 0;
        if (delay) await new Promise(r => setTimeout(r, delay));
        return send(res, 200, 'application/json', JSON.stringify({ run: id, n: p.meta.n, meta, warnings, ms: { queue: 0, tokenize: 0, forward: ms } }));
      }
      const r = runs.get(u.searchParams.get('run'));
      if (!r) return fail(res, 404, 'unknown run');
      const meta = r.meta, n = meta.n, H = meta.heads.length;
      const li = meta.layers.indexOf(+u.searchParams.get('layer'));
      if (u.pathname === '/api/attention') {
        if (li < 0) return fail(res, 400, 'bad layer');
        const all = toCodes(r.chunks.get('av-att-' + li));
        const hs = (u.searchParams.get('heads') || meta.heads.join(',')).split(',').map(h => meta.heads.indexOf(+h));
        if (hs.some(h => h < 0)) return fail(res, 400, 'bad heads');
        const out = new Uint16Array(hs.length * n * n);
        hs.forEach((h, k) => out.set(all.subarray(h * n * n, (h + 1) * n * n), k * n * n));
        return send(res, 200, 'application/octet-stream', fromCodes(out), { 'X-Attnviz-Shape': hs.length + ',' + n + ',' + n });
      }
      if (u.pathname === '/api/thumbs') {
        const s = Math.min(n, 64);
        const L = meta.config.layers, HH = meta.config.heads;
        const out = new Uint16Array(L * HH * s * s);
        const bin = t => Math.floor((t * s) / n);
        for (let l = 0; l < L; l++) {
          const all = toCodes(r.chunks.get('av-att-' + l));
          for (let h = 0; h < HH; h++) {
            const acc = new Float64Array(s * s), cnt = new Float64Array(s);
            for (let i = 0; i < n; i++) {
              cnt[bin(i)]++;
              for (let j = 0; j < n; j++) acc[bin(i) * s + bin(j)] += all[h * n * n + i * n + j] / 1e4;
            }
            for (let i = 0; i < s; i++) for (let j = 0; j < s; j++) out[(l * HH + h) * s * s + i * s + j] = Math.round((acc[i * s + j] / cnt[i]) * 1e4);
          }
        }
        return send(res, 200, 'application/octet-stream', fromCodes(out), { 'X-Attnviz-Shape': L + ',' + HH + ',' + s + ',' + s });
      }
      if (u.pathname === '/api/qk') {
        const h = meta.heads.indexOf(+u.searchParams.get('head'));
        if (li < 0 || h < 0) return fail(res, 400, 'bad layer or head');
        const codes = toCodes(r.chunks.get('av-qk-' + li));
        const d = meta.qk.head_dim, blk = n * d, per = d + blk;
        const f = new Float32Array(2 * blk);
        for (let w = 0; w < 2; w++) {
          const base = (h * 2 + w) * per, dec = meta.qk.dec[li][h][w];
          const off = [];
          for (let j = 0; j < d; j++) { const v = codes[base + j]; off.push((v >>> 1) ^ -(v & 1)); }
          for (let i = 0; i < blk; i++) { const v = codes[base + d + i]; f[w * blk + i] = (((v >>> 1) ^ -(v & 1)) + off[i % d]) / Math.pow(10, dec); }
        }
        return send(res, 200, 'application/octet-stream', Buffer.from(f.buffer), { 'X-Attnviz-Shape': n + ',' + d });
      }
      if (u.pathname === '/api/page') {
        if (opts.pageBudget && !u.searchParams.get('layers')) return fail(res, 413, 'the page would pass the server\'s budget; pass layers');
        return send(res, 200, 'text/html; charset=utf-8', r.html, { 'Content-Disposition': 'attachment; filename="attnviz.html"' });
      }
      return fail(res, 404, 'no such path');
    } catch (err) {
      fail(res, 500, String(err && err.message ? err.message : err).split('\n')[0]);
    }
  });
  await new Promise(r => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  return {
    token, port, log, url: 'http://127.0.0.1:' + port + '/?token=' + token,
    close: () => new Promise(r => { server.closeAllConnections(); server.close(() => { fs.rmSync(dir, { recursive: true, force: true }); r(); }); }),
  };
}
