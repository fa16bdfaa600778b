"""Reads the numbers an attnviz page embeds, the way templates/data.js does (base 85 with
html.c's alphabet, zlib, two byte planes of 16-bit codes), independently of the package."""

import html as _html
import json
import re
import zlib

import numpy as np

B85 = "!#$%()*+,.0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_abcdefghijklmnopqrstuvwxyz{|}~"
_VAL = np.full(128, -1, np.int64)
for _i, _c in enumerate(B85):
    _VAL[ord(_c)] = _i


def _chunk(page, cid):
    m = re.search(r'<script type="application/octet-stream" id="%s" data-z="(\d+)">([^<]*)</script>' % re.escape(cid), page)
    assert m, f"page has no chunk {cid}"
    z, text = int(m.group(1)), m.group(2)
    assert len(text) % 5 == 0
    d = _VAL[np.frombuffer(text.encode("ascii"), np.uint8)].reshape(-1, 5)
    assert (d >= 0).all(), "character outside the base-85 alphabet"
    v = (((d[:, 0] * 85 + d[:, 1]) * 85 + d[:, 2]) * 85 + d[:, 3]) * 85 + d[:, 4]
    raw = v.astype(">u4").tobytes()[:z]
    b = np.frombuffer(zlib.decompress(raw), np.uint8)
    cnt = len(b) // 2
    return b[:cnt].astype(np.uint32) | (b[cnt:].astype(np.uint32) << 8)


def meta(page):
    m = re.search(r'<script type="application/json" id="av-meta">(.*?)</script>', page, re.S)
    assert m, "page has no av-meta"
    return json.loads(m.group(1))


def attention(page):
    """[len(layers), len(heads), n, n] float64 as the page reads it (codes / 10000)."""
    md = meta(page)
    L, H, n = len(md["layers"]), len(md["heads"]), md["n"]
    return np.stack([_chunk(page, f"av-att-{i}").reshape(H, n, n) / 10000.0 for i in range(L)])


def _unzig(u):
    u = u.astype(np.int64)
    return (u >> 1) ^ -(u & 1)


def queries_keys(page):
    """(q, k) [L, H, n, d] as the page reads them, and the largest rounding step used."""
    md = meta(page)
    if not md.get("qk"):
        return None, None, None
    L, H, n, d = len(md["layers"]), len(md["heads"]), md["n"], md["qk"]["head_dim"]
    q = np.zeros((L, H, n, d))
    k = np.zeros((L, H, n, d))
    step = 0.0
    for li in range(L):
        codes = _chunk(page, f"av-qk-{li}")
        per = d + n * d
        assert len(codes) == H * 2 * per
        for h in range(H):
            for w, out in ((0, q), (1, k)):
                base = (h * 2 + w) * per
                off = _unzig(codes[base:base + d])
                res = _unzig(codes[base + d:base + per]).reshape(n, d)
                dec = md["qk"]["dec"][li][h][w]
                out[li, h] = (res + off) * 10.0 ** -dec
                step = max(step, 10.0 ** -dec)
    return q, k, step


def srcdoc(fragment):
    """The page inside an iframe fragment (attnviz.iframe / a notebook's output)."""
    m = re.search(r'srcdoc="([^"]*)"', fragment)
    assert m, "no srcdoc attribute"
    return _html.unescape(m.group(1))
