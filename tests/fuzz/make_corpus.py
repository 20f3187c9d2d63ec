#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors (tests/fuzz/corpus/safetensors/): small valid files
("valid_*": must be read) and corrupted ones ("bad_*": must be rejected with loom::Error).
Plain Python, no dependencies: python3 tests/fuzz/make_corpus.py"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")


def file_bytes(header, data=b"", pad=True):
    text = header if isinstance(header, bytes) else header.encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


f32 = struct.pack("<6f", *[i * 0.5 - 3 for i in range(6)])
i64 = struct.pack("<3q", -5, 1 << 40, 7)
cases = {
    "valid_f32": file_bytes(dumps({"w": entry("F32", [2, 3], 0, 24)}), f32),
    "valid_metadata_i64": file_bytes(
        dumps({"__metadata__": {"format": "pt", "step": "12", "note": "\u00e9\u4e2d"},
               "ids": entry("I64", [3], 0, 24)}), i64),
    "valid_narrow_dtypes": file_bytes(
        dumps({"h": entry("F16", [2], 0, 4), "b": entry("BF16", [2], 4, 8),
               "m": entry("BOOL", [2], 8, 10), "u": entry("U8", [2], 10, 12)}),
        struct.pack("<2e", 1.5, -2.0) + struct.pack("<2H", 0x3F80, 0xC000) + bytes([1, 0, 7, 255])),
    "valid_empty_and_scalar": file_bytes(
        dumps({"e": entry("F32", [0, 4], 0, 0), "s": entry("F32", [], 0, 4)}), f32[:4]),
    "valid_no_tensors": file_bytes("{}"),
    "valid_checkpoint_layout": file_bytes(
        dumps({"__metadata__": {"format": "pt", "optimizer": "AdamW", "model_type": "gpt"},
               "model.w": entry("F32", [2], 0, 8), "optim.step_count": entry("I64", [], 8, 16)}),
        f32[:8] + struct.pack("<q", 3)),
    "bad_too_short": b"\x05\x00\x00",
    "bad_length_exceeds_file": struct.pack("<Q", 4096) + b"{}",
    "bad_absurd_length": struct.pack("<Q", 1 << 62) + b"{}",
    "bad_truncated_data": file_bytes(dumps({"w": entry("F32", [2, 3], 0, 24)}), f32[:20]),
    "bad_overlap": file_bytes(
        dumps({"a": entry("F32", [4], 0, 16), "b": entry("F32", [2], 8, 16)}), f32[:16]),
    "bad_size_mismatch": file_bytes(dumps({"w": entry("F32", [2, 3], 0, 20)}), f32),
    "bad_unknown_dtype": file_bytes(dumps({"w": entry("C64", [1], 0, 8)}), f32[:8]),
    "bad_duplicate_key": file_bytes(
        '{"w":' + dumps(entry("F32", [1], 0, 4)) + ',"w":' + dumps(entry("F32", [1], 0, 4)) + "}",
        f32[:4]),
    "bad_deep_nesting": file_bytes("[" * 5000 + "]" * 5000),
    "bad_metadata_not_string": file_bytes(dumps({"__metadata__": {"step": 12}})),
    "bad_invalid_utf8": file_bytes(b'{"w\xff":' + dumps(entry("F32", [1], 0, 4)).encode() + b"}",
                                   f32[:4]),
    "bad_shape_overflow": file_bytes(
        dumps({"w": entry("F32", [1 << 32, 1 << 32, 1 << 32], 0, 4)}), f32[:4]),
    "bad_negative_offset": file_bytes(dumps({"w": entry("F32", [1], -4, 0)}), f32[:4]),
    "bad_not_json": file_bytes("{'w': nan}"),
}
# Issue 16: a zero dim does not excuse an overflowing shape; rank and header items are capped.
cases.update({
    "bad_zero_dim_overflow": file_bytes(dumps({"w": entry("F32", [0, 1 << 62, 1 << 62], 0, 0)})),
    "bad_rank_65": file_bytes(dumps({"w": entry("F32", [1] * 65, 0, 4)}), f32[:4]),
    "valid_rank_64": file_bytes(dumps({"w": entry("F32", [1] * 64, 0, 4)}), f32[:4]),
})

# BF16, also read as bfloat16 tensors (keep_bfloat16): specials, and entries of the wrong size.
bf16 = struct.pack("<6H", 0x7F80, 0xFF80, 0x7FC1, 0x0001, 0x8000, 0x3EAB)
cases.update({
    "valid_bf16_specials": file_bytes(
        dumps({"s": entry("BF16", [2, 3], 0, 12), "f": entry("F32", [1], 12, 16)}),
        bf16 + f32[:4]),
    "bad_bf16_size_mismatch": file_bytes(dumps({"s": entry("BF16", [3], 0, 4)}), bf16[:4]),
    "bad_bf16_truncated": file_bytes(dumps({"s": entry("BF16", [6], 0, 12)}), bf16[:10]),
})

# Issue 40: the tensors must cover the data buffer exactly. A header length 4 bytes short (its
# JSON still parses: the header ends in spaces) made every tensor read one float early. NaN and
# infinity are read as they are (nn::load and load_checkpoint refuse them as weights).
spaced = dumps({"w": entry("F32", [4], 0, 16)})
spaced += " " * ((8 - len(spaced) % 8) % 8 + 8)
cases.update({
    "bad_gap_between_tensors": file_bytes(
        dumps({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 12, 16)}), f32[:16]),
    "bad_bytes_left_over": file_bytes(dumps({"w": entry("F32", [3], 0, 12)}), f32[:16]),
    "bad_header_length_4_short": struct.pack("<Q", len(spaced) - 4) + spaced.encode() + f32[:16],
    "valid_nonfinite_f32": file_bytes(
        dumps({"w": entry("F32", [3], 0, 12)}),
        struct.pack("<3f", float("nan"), float("inf"), -float("inf"))),
})

os.makedirs(OUT, exist_ok=True)
for name, data in sorted(cases.items()):
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(data)
print(f"wrote {len(cases)} files to {OUT}")
