"""Minimal safetensors I/O for the reference tools (the safetensors package is
not in Debian); written from the format description, independent of attnviz."""
import json
import struct

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def save(path, tensors, dtype="F32", prefix_pad=True):
    """tensors: dict name -> float32 torch tensor; stored in dtype."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().to(DTYPES[dtype]).contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if dtype != "F32" else t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    if prefix_pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    """Returns dict name -> float32 torch tensor (F16/BF16 upcast, as attnviz does)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = bytearray(body[b:e])
        dt = info["dtype"]
        if dt == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        elif dt in ("F16", "BF16"):
            t = torch.frombuffer(raw, dtype=torch.int16).view(DTYPES[dt]).float()
        else:
            continue
        out[name] = t.reshape(info["shape"]).clone()
    return out
