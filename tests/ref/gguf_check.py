"""Writes GGUF files with gguf.GGUFWriter holding random tensors quantized by
gguf.quants.quantize, then compares build/gguf_dump's widening of each (and of
every tensor of a real GGUF file if given) with gguf.quants.dequantize, and its
JSON description (header, metadata, tensor table) with gguf.GGUFReader's."""
import json, math, subprocess, sys, os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

dump, tmp = sys.argv[1], sys.argv[2]
real = sys.argv[3] if len(sys.argv) > 3 else ""
rng = np.random.default_rng(0)
path = os.path.join(tmp, "q.gguf")
w = gguf.GGUFWriter(path, "llama")
names = []
for t in [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4]:
    x = (rng.standard_normal((8, 512)) * 0.1).astype(np.float32)
    try:
        q = x if t == T.F32 else gguf.quants.quantize(x, t)
    except Exception as ex:
        # K-quants: gguf cannot quantize them; covered below from raw blocks
        if t not in (T.Q4_K, T.Q5_K, T.Q6_K):
            print(f"FAIL gguf_quantize_{t.name}: gguf cannot quantize it ({type(ex).__name__})")
        continue
    w.add_tensor(f"t_{t.name}", q, raw_dtype=t)
    names.append(t)
# gguf cannot quantize K-quants: random code bytes with finite f16 scales instead
for t, scale_offs in [(T.Q4_K, (0, 2)), (T.Q5_K, (0, 2)), (T.Q6_K, (208,))]:
    bs = gguf.GGML_QUANT_SIZES[t][1]
    raw = rng.integers(0, 256, size=(8, 2, bs), dtype=np.uint8)
    for o in scale_offs:
        raw[:, :, o:o + 2] = (rng.standard_normal((8, 2, 1)) * 0.01).astype(np.float16).view(np.uint8)
    w.add_tensor(f"t_{t.name}", raw.reshape(8, 2 * bs), raw_dtype=t)
# MXFP4 (gpt-oss's experts): besides the quantized tensor above, every exponent byte (the
# subnormal halves below 2 included) and random codes
raw = rng.integers(0, 256, size=(8, 32, 17), dtype=np.uint8)
raw[:, :, 0] = np.arange(256, dtype=np.uint8).reshape(8, 32)
w.add_tensor("t_MXFP4_raw", raw.reshape(8, 32 * 17), raw_dtype=T.MXFP4)
# metadata of every value type, for the JSON description
w.add_uint8("t.u8", 200); w.add_int8("t.i8", -100); w.add_uint16("t.u16", 60000); w.add_int16("t.i16", -30000)
w.add_uint32("t.u32", 4000000000); w.add_int32("t.i32", -2000000000); w.add_float32("t.f32", 0.1)
w.add_bool("t.bool", True); w.add_string("t.str", "caf\u00e9 \"q\" \\ \n"); w.add_uint64("t.u64", 2**40 + 3)
w.add_int64("t.i64", -(2**40)); w.add_float64("t.f64", -1.0 / 3.0)
w.add_array("t.arr_i32", list(range(-5, 15))); w.add_array("t.arr_str", ["a", "", "\u0416\u0436", "x y"])
w.add_array("t.arr_f32", [0.5, -2.25, 1e-3]); w.add_array("t.arr_empty", [])
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def check(file, label):
    r = gguf.GGUFReader(file)
    worst = {}
    bad = 0
    for t in r.tensors:
        ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        p = subprocess.run([dump, file, t.name], capture_output=True)
        if p.returncode != 0:
            print(f"FAIL {label}_{t.name}: {p.stderr.decode().strip()}"); bad += 1; continue
        ours = np.frombuffer(p.stdout, dtype=np.float32)
        if ours.shape != ref.shape:
            print(f"FAIL {label}_{t.name}: {ours.size} values, gguf has {ref.size}"); bad += 1; continue
        same = (ours.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(ours) & np.isnan(ref))
        d = float(np.max(np.abs(ours.astype(np.float64) - ref))) if ours.size else 0.0
        k = t.tensor_type.name
        worst[k] = max(worst.get(k, 0.0), d)
        if not same.all():
            print(f"FAIL {label}_{t.name}: {int((~same).sum())} of {same.size} values differ, max |d| {d:g}"); bad += 1
    for k, d in sorted(worst.items()):
        print(f"INFO {label} {k}: max |d| vs gguf {d:g}")
    print(("PASS" if bad == 0 else "FAIL") + f" {label}_matches_gguf_dequantize: {len(r.tensors)} tensors" + ("" if bad == 0 else f", {bad} bad"))
    return bad

VT = {"UINT8": "u8", "INT8": "i8", "UINT16": "u16", "INT16": "i16", "UINT32": "u32", "INT32": "i32",
      "FLOAT32": "f32", "BOOL": "bool", "STRING": "string", "ARRAY": "array", "UINT64": "u64", "INT64": "i64",
      "FLOAT64": "f64"}

def same_value(ours, ref, vt):
    if vt == "f32":
        return isinstance(ours, (int, float)) and float(np.float32(ours)) == float(np.float32(ref))
    if vt == "f64":
        return isinstance(ours, (int, float)) and (ours == ref or (math.isnan(ours) and math.isnan(ref)))
    if vt == "bool":
        return ours is bool(ref)
    if vt == "string":
        return ours == ref
    return isinstance(ours, (int, float)) and not isinstance(ours, bool) and ours == ref

def check_json(file, label):
    """gguf_dump FILE's JSON against GGUFReader: every key with its type and
    value (arrays: element type, length, first 8 items), every tensor's name,
    type, dims, offset and byte size."""
    r = gguf.GGUFReader(file)
    p = subprocess.run([dump, file], capture_output=True)
    if p.returncode != 0:
        print(f"FAIL {label}_json: exit {p.returncode}: {p.stderr.decode().strip()}"); return 1
    try:
        d = json.loads(p.stdout.decode("utf-8"))
    except Exception as ex:
        print(f"FAIL {label}_json: output is not JSON ({ex})"); return 1
    errs = []
    fields = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    hdr = {"version": r.fields["GGUF.version"].contents(), "n_kv": len(fields), "n_tensors": len(r.tensors),
           "alignment": r.alignment, "data_offset": r.data_offset}
    for k, v in hdr.items():
        if d.get(k) != v: errs.append(f"{k} {d.get(k)} != {v}")
    md = d.get("metadata", [])
    if [m.get("key") for m in md] != [f.name for f in fields]: errs.append("metadata keys differ")
    for m, f in zip(md, fields):
        vt = VT[f.types[0].name]
        if m.get("type") != vt: errs.append(f"{f.name}: type {m.get('type')} != {vt}"); continue
        if vt == "array":
            et = VT[f.types[1].name] if len(f.types) > 1 else None
            vals = f.contents()
            if et is not None and m.get("elem_type") != et: errs.append(f"{f.name}: elem_type {m.get('elem_type')} != {et}")
            if m.get("length") != len(vals): errs.append(f"{f.name}: length {m.get('length')} != {len(vals)}")
            head = m.get("first", [])
            if len(head) != min(8, len(vals)) or not all(same_value(a, b, et) for a, b in zip(head, vals[:8])):
                errs.append(f"{f.name}: first items {head} != {vals[:8]}")
        elif not same_value(m.get("value"), f.contents(), vt):
            errs.append(f"{f.name}: value {m.get('value')!r} != {f.contents()!r}")
    ts = d.get("tensors", [])
    if len(ts) != len(r.tensors): errs.append(f"{len(ts)} tensors != {len(r.tensors)}")
    for o, t in zip(ts, r.tensors):
        want = {"name": t.name, "type": t.tensor_type.name, "dims": [int(x) for x in t.shape],
                "offset": int(t.data_offset) - r.data_offset, "bytes": int(t.n_bytes)}
        got = {k: o.get(k) for k in want}
        if got != want: errs.append(f"tensor {t.name}: {got} != {want}")
    for x in errs[:5]:
        print(f"INFO {label}_json: {x}")
    print(("PASS" if not errs else "FAIL") + f" {label}_json_matches_gguf_reader: {len(fields)} keys, {len(ts)} tensors"
          + ("" if not errs else f", {len(errs)} differences"))
    return 1 if errs else 0

def check_json_hostile():
    """A metadata string with invalid UTF-8 and a NUL still gives parseable JSON
    (U+FFFD in their place); a truncated file gives one line and exit 1."""
    import struct
    def s(b): return struct.pack("<Q", len(b)) + b
    img = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s(b"t.bad") + struct.pack("<I", 8) + s(b"a\xff\x00b\xc3")
    f = os.path.join(tmp, "bad.gguf")
    open(f, "wb").write(img)
    p = subprocess.run([dump, f], capture_output=True)
    try:
        v = json.loads(p.stdout.decode("utf-8"))["metadata"][0]["value"]
    except Exception as ex:
        v = f"unparseable ({ex})"
    want = "a\ufffd\ufffdb\ufffd"
    ok = p.returncode == 0 and v == want
    print(("PASS" if ok else "FAIL") + f" gguf_dump_json_replaces_invalid_utf8" + ("" if ok else f": exit {p.returncode}, value {v!r}"))
    open(f, "wb").write(img[:-3])
    p = subprocess.run([dump, f], capture_output=True)
    lines = p.stderr.decode(errors="replace").strip().splitlines()
    ok2 = p.returncode == 1 and len(lines) == 1 and not p.stdout
    print(("PASS" if ok2 else "FAIL") + " gguf_dump_refuses_truncated_file_in_one_line"
          + ("" if ok2 else f": exit {p.returncode}, stderr {lines}"))
    return (not ok) + (not ok2)

bad = check(path, "gguf_random") + check_json(path, "gguf_random") + check_json_hostile()
if real:
    bad += check(real, "gguf_smollm2") + check_json(real, "gguf_smollm2")
sys.exit(1 if bad else 0)
