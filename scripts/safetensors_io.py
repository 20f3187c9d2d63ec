#!/usr/bin/python3
"""Minimal safetensors reader/writer for PyTorch tensors, written with struct and json only
(the `safetensors` package is not available on the build machines).

File layout (https://github.com/huggingface/safetensors):
    8 bytes   N, the header length, unsigned little-endian
    N bytes   JSON: {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets"}, ...}
              padded with spaces to a multiple of 8 bytes
    rest      the data buffer; each tensor row-major little-endian at [begin, end)

The writer lays tensors out exactly as loom's C++ writer (io/safetensors.cpp) does: widest dtype
first, then by name, with "__metadata__" first in the header, so both produce identical bytes for
the same tensors.

Usage as a library:
    save(path, {"name": tensor, ...}, metadata={"k": "v"})
    tensors = load(path)                      # dict name -> torch.Tensor
    tensors, metadata = load_with_metadata(path)
Usage as a program:
    /usr/bin/python3 scripts/safetensors_io.py --verify FILE   # parse strictly, list tensors
"""

import json
import os
import struct
import sys

import torch

# safetensors dtype name -> (torch dtype, bytes per element)
DTYPES = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
NAME_OF = {dtype: name for name, (dtype, _) in DTYPES.items()}
MAX_HEADER_BYTES = 100 * 1000 * 1000


def _tensor_bytes(t):
    """Raw little-endian bytes of a tensor, row-major."""
    t = t.detach().cpu().contiguous()
    if t.numel() == 0:
        return b""
    # Reinterpret as bytes through uint8 (numpy has no bfloat16, so avoid .numpy() on t itself).
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def _tensor_from_bytes(raw, dtype, shape):
    if len(raw) == 0:
        return torch.empty(shape, dtype=dtype)
    u8 = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    if dtype == torch.bool:
        return (u8 != 0).reshape(shape)
    return u8.view(dtype).reshape(shape).clone()


def save(path, tensors, metadata=None):
    """Writes {name: torch.Tensor} and optional {str: str} metadata atomically."""
    for name, t in tensors.items():
        if not name or name == "__metadata__":
            raise ValueError(f"save: '{path}': invalid tensor name {name!r}")
        if t.dtype not in NAME_OF:
            raise ValueError(f"save: '{path}': tensor '{name}' has unsupported dtype {t.dtype}")
    order = sorted(tensors, key=lambda n: (-DTYPES[NAME_OF[tensors[n].dtype]][1], n))
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in sorted(metadata.items())}
    for name in order:
        t = tensors[name]
        raw = _tensor_bytes(t)
        header[name] = {"dtype": NAME_OF[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for raw in chunks:
                f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _fail(path, what):
    raise ValueError(f"safetensors: '{path}': {what}")


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in JSON header")
    return dict(pairs)


def load_with_metadata(path):
    """Returns ({name: torch.Tensor}, {str: str}), validating the file like loom's reader."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        _fail(path, f"file is {len(data)} bytes, too short for the header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_BYTES or 8 + n > len(data):
        _fail(path, f"bad header length {n} for a {len(data)}-byte file")
    header = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    if not isinstance(header, dict):
        _fail(path, "header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in metadata.values()):
        _fail(path, "__metadata__ values must be strings")
    buffer = data[8 + n:]
    tensors, spans = {}, []
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(path, f"tensor '{name}' has fields {sorted(info)}")
        if info["dtype"] not in DTYPES:
            _fail(path, f"tensor '{name}' has unknown dtype {info['dtype']}")
        dtype, size = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        numel = 1
        for d in info["shape"]:
            numel *= d
        if not 0 <= begin <= end <= len(buffer) or end - begin != numel * size:
            _fail(path, f"tensor '{name}' has bad data_offsets [{begin}, {end}]")
        if end > begin:
            spans.append((begin, end, name))
        tensors[name] = _tensor_from_bytes(buffer[begin:end], dtype, info["shape"])
    spans.sort()
    for (_, e0, a), (b1, _, b) in zip(spans, spans[1:]):
        if b1 < e0:
            _fail(path, f"data of tensors '{a}' and '{b}' overlap")
    return tensors, metadata


def load(path):
    """Returns {name: torch.Tensor}."""
    return load_with_metadata(path)[0]


def main(argv):
    if len(argv) != 3 or argv[1] != "--verify":
        print(__doc__)
        return 2
    tensors, metadata = load_with_metadata(argv[2])
    for key, value in sorted(metadata.items()):
        print(f"metadata {key} = {value}")
    for name, t in sorted(tensors.items()):
        print(f"{name}: {NAME_OF[t.dtype]} {list(t.shape)}")
    print(f"OK: {len(tensors)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
