#!/usr/bin/python3
"""Writes the pytorch_model.bin fixtures of tests/unit/test_torchbin.c.

usage: /usr/bin/python3 tests/ref/make_torchbin.py [OUT_DIR]   (default tests/data/torchbin)

Valid files are written by torch.save itself; beside each, NAME.ref.safetensors
holds the same tensors as torch lays them out in memory (a minimal writer here,
all dtypes), so the C test compares attnviz's reader against bytes torch
produced, not against itself. Hostile files are torch.save of objects whose
__reduce__ runs a command, hand-assembled pickles, and repackaged or patched
zips; each is paired with the error fragment the reader must report
(expected_errors.txt: "FILE<TAB>FRAGMENT"). Every command a hostile file would
run only touches MARKER; this script proves the payload is live by letting
torch.load run one in a subprocess, then removes the marker.
"""
import collections
import io
import json
import os
import pickletools
import struct
import subprocess
import sys
import zipfile
import zlib

import torch
from torch import nn

MARKER = "/tmp/attnviz_torchbin_pwned"
PAYLOAD = "touch " + MARKER

DTYPE_NAME = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
              torch.int32: "I32", torch.float64: "F64", torch.uint8: "U8", torch.bool: "BOOL"}


def write_ref(path, tensors):
    """safetensors with every dtype; bytes are torch's own contiguous layout."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAME[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def flatten(d, prefix=""):
    """The naming rule the reader documents: tensors reachable through dicts,
    '.'-joined string or int keys; everything else skipped."""
    out = {}
    for k, v in d.items():
        if isinstance(k, bool) or not isinstance(k, (str, int)):
            continue
        name = prefix + ("." if prefix else "") + str(k)
        if isinstance(v, torch.Tensor):
            out[name] = v
        elif isinstance(v, dict):
            out.update(flatten(v, name))
    return out


class Tiny(nn.Module):
    """Shaped like a BERT fragment: tied embedding/decoder, LayerNorm, a Long
    position_ids buffer made with expand() as transformers does, and
    BatchNorm's Long scalar num_batches_tracked."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.ln = nn.LayerNorm(4)
        self.dec = nn.Linear(4, 10)
        self.dec.weight = self.emb.weight
        self.bn = nn.BatchNorm1d(3)
        self.register_buffer("position_ids", torch.arange(8).expand((1, -1)))


def tiny_state(dtype):
    torch.manual_seed(1234)
    m = Tiny()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()
    m = m.to(dtype)
    sd = m.state_dict()  # an OrderedDict with _metadata
    assert hasattr(sd, "_metadata")
    w = m.emb.weight.detach()
    sd["emb_rows"] = w[2:5]  # a view at storage offset 8 into the tied weight's storage
    sd["param"] = nn.Parameter(torch.linspace(-1, 1, 5).to(dtype))  # _rebuild_parameter
    sd["empty"] = torch.zeros(0, 3, dtype=dtype)
    return sd


def save_valid(out, name, obj, ref=None, **kw):
    path = os.path.join(out, name + ".bin")
    torch.save(obj, path, **kw)
    ref = flatten(obj) if ref is None else ref
    write_ref(os.path.join(out, name + ".ref.safetensors"), ref)
    back = flatten(torch.load(path))  # torch reads back what the reference says
    assert back.keys() == ref.keys(), (back.keys(), ref.keys())
    for k in ref:
        assert torch.equal(back[k], ref[k]), k
    return path


def zip_entries(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i.filename)) for i in z.infolist()]


def write_zip(path, entries, zip64=False, deflate=(), crc0=False):
    """A stored zip laid out as torch writes it (payloads 64-byte aligned with
    an 'FB' padding extra field); zip64=True puts every size and offset in
    ZIP64 extra fields. Names in deflate are compressed. crc0 writes zero
    CRCs, as torch >= 2.4 does with checksums switched off."""
    out, cd = bytearray(), bytearray()
    for name, data in entries:
        nb = name.encode()
        method = 8 if name in deflate else 0
        if method:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            payload = c.compress(data) + c.flush()
        else:
            payload = data
        crc = 0 if crc0 else zlib.crc32(data)
        off = len(out)
        pad = (-(off + 30 + len(nb) + 4)) % 64
        extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, method, 0, 0, crc, len(payload), len(data), len(nb),
                           len(extra)) + nb + extra + payload
        if zip64:
            cs = us = lho = 0xFFFFFFFF
            x = struct.pack("<HHQQQ", 1, 24, len(data), len(payload), off)
        else:
            cs, us, lho, x = len(payload), len(data), off, b""
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, method, 0, 0, crc, cs, us, len(nb), len(x),
                          0, 0, 0, 0, lho) + nb + x
    cd_off, n = len(out), len(entries)
    out += cd
    if zip64:
        z64 = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, len(cd), cd_off)
        out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(cd), cd_off, 0)
    with open(path, "wb") as f:
        f.write(out)


class Asm:
    """A pickle assembled opcode by opcode, for what torch.save cannot write."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")

    def op(self, raw):
        self.b += raw
        return self

    def s(self, text):
        t = text.encode()
        return self.op(b"X" + struct.pack("<I", len(t)) + t)

    def i(self, v):
        if 0 <= v < 256:
            return self.op(b"K" + bytes([v]))
        n = (v.bit_length() + 8) // 8
        return self.op(b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True))

    def glob(self, mod, name):
        return self.op(b"c" + mod.encode() + b"\n" + name.encode() + b"\n")

    def ints(self, vals):
        self.op(b"(")
        for v in vals:
            self.i(v)
        return self.op(b"t")

    def tensor(self, key, numel, offset, size, stride, storage="FloatStorage"):
        self.glob("torch._utils", "_rebuild_tensor_v2").op(b"((").s("storage").glob("torch", storage)
        self.s(key).s("cpu").i(numel).op(b"tQ").i(offset).ints(size).ints(stride).op(b"\x89")
        return self.glob("collections", "OrderedDict").op(b")R").op(b"tR")

    def bytes(self):
        return bytes(self.b + b".")


class EvilReduce:
    def __reduce__(self):
        return (os.system, (PAYLOAD,))


class EvilEval:
    def __reduce__(self):
        return (eval, ("__import__('os').system(%r)" % PAYLOAD,))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "torchbin")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):  # only what this script writes
        if f.endswith((".bin", ".safetensors")) or f == "expected_errors.txt":
            os.remove(os.path.join(out, f))
    expected = []

    def hostile(name, fragment):
        expected.append((name, fragment))
        return os.path.join(out, name)

    # ---- valid: torch.save output, checked against the .ref.safetensors beside it
    f32 = save_valid(out, "f32", tiny_state(torch.float32))
    save_valid(out, "f16", tiny_state(torch.float16))
    save_valid(out, "bf16", tiny_state(torch.bfloat16))
    save_valid(out, "proto4", tiny_state(torch.float32), pickle_protocol=4)  # FRAME, MEMOIZE, STACK_GLOBAL
    torch.manual_seed(7)
    inner = collections.OrderedDict(w=torch.randn(2, 3), b=torch.randn(3))
    nested = {"epoch": 3, "lr": 0.5, "note": "trained", "tags": ["a", "b"], "flag": True, "none": None,
              "state_dict": inner, "model": {"enc": {"w": torch.randn(2, 2, dtype=torch.float16)}},
              7: torch.arange(3, dtype=torch.int32), (1, 2): torch.ones(1)}
    save_valid(out, "nested", nested)

    # ZIP64 central directory: same entries as f32.bin; torch.load is the oracle that it is a valid zip.
    ents = zip_entries(f32)
    # the key of the tied 10x4 F32 weight's storage: 40 elements, 160 bytes
    wkey = [n.split("/")[-1] for n, d in ents if "/data/" in n and len(d) == 160]
    assert len(wkey) == 1
    wkey = wkey[0]
    write_zip(os.path.join(out, "zip64.bin"), ents, zip64=True)
    ref = flatten(tiny_state(torch.float32))
    back = flatten(torch.load(os.path.join(out, "zip64.bin")))
    assert all(torch.equal(back[k], ref[k]) for k in ref) and back.keys() == ref.keys()
    write_ref(os.path.join(out, "zip64.ref.safetensors"), ref)
    prefix = ents[0][0].split("/")[0]
    write_zip(os.path.join(out, "little.bin"), ents + [(prefix + "/byteorder", b"little")])
    write_ref(os.path.join(out, "little.ref.safetensors"), ref)
    write_zip(os.path.join(out, "f32_nocrc.bin"), ents, crc0=True)
    write_ref(os.path.join(out, "f32_nocrc.ref.safetensors"), ref)

    # ---- refused with a clear error
    torch.manual_seed(3)
    torch.save({"ok": torch.randn(2), "t": torch.randn(3, 2).t()}, hostile("noncontig.bin", "tensor 't' is not contiguous"))
    torch.save({"w": torch.ones(2), "x": EvilReduce()}, hostile("evil_reduce.bin", "refusing pickle global 'posix.system'"))
    torch.save({"w": torch.ones(2), "x": EvilEval()},  # protocol 2 writes builtins as __builtin__
               hostile("evil_eval.bin", "refusing pickle global '__builtin__.eval'"))
    torch.save(torch.ones(2), hostile("not_dict.bin", "holds a tensor, not a dict"))
    # (the only fixture that differs between runs: legacy storage keys are addresses)
    torch.save(tiny_state(torch.float32), hostile("legacy.bin", "legacy torch.save format"),
               _use_new_zipfile_serialization=False)
    # the payloads are live: torch.load really runs them (in a child, once)
    for f in ("evil_reduce.bin", "evil_eval.bin"):
        if os.path.exists(MARKER):
            os.remove(MARKER)
        subprocess.run([sys.executable, "-c", "import torch,sys; torch.load(sys.argv[1])", os.path.join(out, f)],
                       check=True, capture_output=True)
        assert os.path.exists(MARKER), f + " payload did not run under torch.load"
        os.remove(MARKER)

    def with_pickle(name, pkl, fragment, extra=()):
        ents2 = [(n, pkl if n.endswith("/data.pkl") else d) for n, d in ents] + list(extra)
        write_zip(hostile(name, fragment), ents2)

    with_pickle("evil_os_system.bin", Asm().glob("os", "system").s(PAYLOAD).op(b"\x85R").bytes(),
                "offset 2: refusing pickle global 'os.system'")
    with_pickle("evil_builtins_eval.bin", Asm().glob("builtins", "eval").s("print(1)").op(b"\x85R").bytes(),
                "refusing pickle global 'builtins.eval'")
    with_pickle("evil_getattr.bin", Asm().glob("__builtin__", "getattr").bytes(),
                "refusing pickle global '__builtin__.getattr'")
    with_pickle("evil_inst.bin", Asm().op(b"(").s(PAYLOAD).op(b"ios\nsystem\n").bytes(),
                "offset %d: refusing pickle opcode INST" % (3 + 5 + len(PAYLOAD)))
    with_pickle("evil_obj.bin", Asm().op(b"(").op(b"}").op(b"o").bytes(), "offset 4: refusing pickle opcode OBJ")
    with_pickle("evil_newobj.bin", Asm().op(b")").op(b")").op(b"\x81").bytes(), "refusing pickle opcode NEWOBJ")
    with_pickle("evil_ext.bin", Asm().op(b"\x82\x01").bytes(), "refusing pickle opcode EXT1")
    with_pickle("call_storage.bin", Asm().glob("torch", "FloatStorage").op(b")R").bytes(),
                "refusing to call pickle global 'torch.FloatStorage'")
    with_pickle("memo_oob.bin", Asm().op(b"}").op(b"h\x07").bytes(), "memo index 7 is not set")
    with_pickle("stack_bomb.bin", Asm().op(b"(" * 5000).bytes(), "MARK nesting deeper than")
    with_pickle("cycle.bin", Asm().op(b"}q\x00").s("a").op(b"h\x00s").bytes(), "nested deeper than")
    with_pickle("truncated_pickle.bin", Asm().op(b"}").s("abc").bytes()[:-4], "pickle truncated")
    with_pickle("no_stop.bin", bytes(Asm().op(b"}").b), "without STOP")
    with_pickle("storage_past_end.bin", Asm().op(b"}").s("w").tensor(wkey, 40, 38, [4], [1]).op(b"s").bytes(),
                "run past its storage")
    with_pickle("storage_numel_too_big.bin", Asm().op(b"}").s("w").tensor(wkey, 41, 0, [4], [1]).op(b"s").bytes(),
                "need more than the 160 bytes")
    with_pickle("storage_missing.bin", Asm().op(b"}").s("w").tensor("99", 4, 0, [4], [1]).op(b"s").bytes(),
                "storage '99' has no entry")
    with_pickle("huge_shape.bin",
                Asm().op(b"}").s("w").tensor(wkey, 40, 0, [1 << 31] * 3, [1 << 62, 1 << 31, 1]).op(b"s").bytes(),
                "element count overflows")
    with_pickle("too_many_dims.bin", Asm().op(b"}").s("w").tensor(wkey, 40, 0, [1] * 9, [1] * 9).op(b"s").bytes(),
                "9 dimensions (limit 8)")
    with_pickle("dup_names.bin",
                Asm().op(b"}(").s("w").tensor(wkey, 40, 0, [4], [1]).s("w").tensor(wkey, 40, 4, [4], [1])
                .op(b"u").bytes(), "tensor name 'w' appears twice")
    write_zip(hostile("big_endian.bin", "big-endian"), ents + [(prefix + "/byteorder", b"big")])
    write_zip(hostile("deflate.bin", "is compressed (method 8)"), ents, deflate={prefix + "/data.pkl"})
    write_zip(hostile("no_pkl.bin", "has no <archive>/data.pkl"),
              [(n.replace("data.pkl", "model.pkl"), d) for n, d in ents])

    raw = open(f32, "rb").read()
    with open(hostile("truncated.bin", "no zip end-of-central-directory record"), "wb") as f:
        f.write(raw[: len(raw) * 3 // 5])
    # torch writes ZIP64 end records: move the central directory past EOF in both
    b = bytearray(raw)
    z64 = b.rfind(b"PK\x06\x06")
    struct.pack_into("<Q", b, z64 + 48, len(b) + 1000)
    eocd = b.rfind(b"PK\x05\x06")
    struct.pack_into("<I", b, eocd + 16, len(b) + 1000)
    with open(hostile("cd_past_eof.bin", "zip central directory"), "wb") as f:
        f.write(b)
    b = bytearray(raw)
    b[0:4] = b"GIF8"
    with open(hostile("not_zip.bin", "no zip signature"), "wb") as f:
        f.write(b)

    with open(os.path.join(out, "expected_errors.txt"), "w") as f:
        f.write("# FILE<TAB>message fragment tb_open must report (written by tests/ref/make_torchbin.py)\n")
        for name, frag in expected:
            f.write(f"{name}\t{frag}\n")
    # pickletools must not choke on any assembled pickle: they are well-formed, only hostile
    for name, _ in expected:
        if name.startswith("evil_") and name not in ("evil_reduce.bin", "evil_eval.bin"):
            with zipfile.ZipFile(os.path.join(out, name)) as z:
                pickletools.dis(z.read(prefix + "/data.pkl"), out=io.StringIO())
    print(f"wrote {len(os.listdir(out))} files to {out}")

    # libFuzzer seeds: the valid files with zero CRCs (so mutated pickles are
    # not all stopped by the CRC check) and some hostile ones.
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus_torchbin")
    os.makedirs(corpus, exist_ok=True)
    for f in os.listdir(corpus):
        if f.endswith((".bin", ".pkl")):
            os.remove(os.path.join(corpus, f))
    # bare pickles (fuzz_torchbin wraps them in a zip with storages data/0..15 of 256 bytes)
    for name in ("f32", "proto4", "nested", "bf16", "storage_past_end", "huge_shape", "dup_names", "evil_inst"):
        with zipfile.ZipFile(os.path.join(out, name + ".bin")) as z:
            pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
            with open(os.path.join(corpus, name + ".pkl"), "wb") as dst:
                dst.write(z.read(pkl))
    for name in ("f32", "proto4", "nested", "bf16"):
        write_zip(os.path.join(corpus, name + ".bin"), zip_entries(os.path.join(out, name + ".bin")), crc0=True)
    write_zip(os.path.join(corpus, "zip64.bin"), ents, zip64=True, crc0=True)
    for name in ("storage_past_end", "huge_shape", "dup_names", "cycle", "evil_inst", "cd_past_eof", "noncontig"):
        with open(os.path.join(out, name + ".bin"), "rb") as src, open(os.path.join(corpus, name + ".bin"), "wb") as dst:
            dst.write(src.read())


if __name__ == "__main__":
    main()
