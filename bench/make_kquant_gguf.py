"""A Q4_K_M-like GGUF at a real model's shape, for measuring memory (bench/README.md): the metadata and
tensor shapes of a given GGUF, its matrices written as Q4_K, with Q6_K where llama.cpp's Q4_K_M recipe
puts it (token_embd, and attn_v / ffn_down in every other block), and llama.cpp's fallbacks for rows
that are not a multiple of 256 (Q4_K -> Q5_0, Q6_K -> Q8_0); norms in F32. gguf cannot quantize
K-quants, so their blocks are random codes with small scales (the others quantize random weights):
the numbers are meaningless, the sizes and the memory a run takes are a real Q4_K_M file's.

usage: make_kquant_gguf.py SRC.gguf OUT.gguf
"""
import sys

import gguf
import numpy as np

T = gguf.GGMLQuantizationType


def blocks(t, rows, cols, rng):
    size, nbytes = gguf.GGML_QUANT_SIZES[t]
    b = rng.integers(0, 256, size=(rows * cols // size, nbytes), dtype=np.uint8)
    small = lambda v: np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)  # noqa: E731
    if t == T.Q6_K:
        b[:, 208:210] = small(1e-4)
    else:
        b[:, 0:2], b[:, 2:4] = small(1e-4), small(5e-5)
    return b.reshape(rows, -1)


def main():
    src, out = sys.argv[1], sys.argv[2]
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(out, arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name in ("general.architecture", "general.file_type"):
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            sub = f.types[-1]
            vals = [bytes(f.parts[i]).decode() if sub == gguf.GGUFValueType.STRING else f.parts[i].tolist()[0]
                    for i in f.data]
            w.add_key_value(f.name, vals, t, sub_type=sub)
        elif t == gguf.GGUFValueType.STRING:
            w.add_key_value(f.name, bytes(f.parts[f.data[0]]).decode(), t)
        else:
            w.add_key_value(f.name, f.parts[f.data[0]].tolist()[0], t)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    rng = np.random.default_rng(1)
    for tn in r.tensors:
        shape = [int(d) for d in reversed(tn.shape)]  # rows, cols
        if len(shape) == 1:
            w.add_tensor(tn.name, np.ones(shape, dtype=np.float32))
            continue
        blk = int(tn.name.split(".")[1]) if tn.name.startswith("blk.") else -1
        six = tn.name == "token_embd.weight" or (blk % 2 == 0 and (".attn_v." in tn.name or ".ffn_down." in tn.name))
        qt = T.Q6_K if six else T.Q4_K
        if shape[1] % 256:
            qt = T.Q8_0 if six else T.Q5_0
            a = rng.normal(0, 0.02, size=shape).astype(np.float32)
            w.add_tensor(tn.name, gguf.quants.quantize(a, qt), raw_dtype=qt)
        else:
            w.add_tensor(tn.name, blocks(qt, shape[0], shape[1], rng), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
