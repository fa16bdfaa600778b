"""requant.py SRC.gguf DST.gguf TYPE — SRC's tensors re-encoded as TYPE (F16, Q8_0, Q4_0 or Q4_1)
by the gguf package: every tensor is decoded to float32 and encoded again; 1-D tensors (norms,
biases) and rows whose length is not a multiple of the type's block stay float32, as llama.cpp's
quantizer keeps them. Metadata is copied (general.file_type set to TYPE's). Used to compare quants
of one model (`attnviz diff --model A.gguf --model B.gguf TEXT`; tests/ref/quant_diff_check.sh)."""
import sys

import numpy as np
import gguf
from gguf.quants import dequantize, quantize

TYPES = {  # name: (ggml type, llama.cpp's general.file_type)
    "F16": (gguf.GGMLQuantizationType.F16, 1),
    "Q8_0": (gguf.GGMLQuantizationType.Q8_0, 7),
    "Q4_0": (gguf.GGMLQuantizationType.Q4_0, 2),
    "Q4_1": (gguf.GGMLQuantizationType.Q4_1, 3),
}


def main(src, dst, name):
    if name not in TYPES:
        sys.exit(f"requant: TYPE must be one of {', '.join(TYPES)}, not {name!r}")
    qtype, ftype = TYPES[name]
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    r = gguf.GGUFReader(src)
    arch = r.fields[gguf.Keys.General.ARCHITECTURE].contents()
    w = gguf.GGUFWriter(dst, arch)
    for f in r.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue  # the writer writes these itself
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = ftype if f.name == gguf.Keys.General.FILE_TYPE else f.contents()
        w.add_key_value(f.name, value, vtype, sub_type=sub)
    for t in r.tensors:
        x = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        if x.ndim >= 2 and x.shape[-1] % block == 0:
            w.add_tensor(t.name, quantize(x, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(t.name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: requant.py SRC.gguf DST.gguf F16|Q8_0|Q4_0|Q4_1")
    main(*sys.argv[1:])
