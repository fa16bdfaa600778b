"""Writes GGUF files with gguf.GGUFWriter holding random tensors quantized by
gguf.quants.quantize, then compares build/gguf_dump's widening of each (and of
every tensor of a real GGUF file if given) with gguf.quants.dequantize."""
import subprocess, sys, os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

dump, tmp = sys.argv[1], sys.argv[2]
real = sys.argv[3] if len(sys.argv) > 3 else ""
rng = np.random.default_rng(0)
path = os.path.join(tmp, "q.gguf")
w = gguf.GGUFWriter(path, "llama")
names = []
for t in [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q4_K, T.Q5_K, T.Q6_K]:
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

bad = check(path, "gguf_random")
if real:
    bad += check(real, "gguf_smollm2")
sys.exit(1 if bad else 0)
