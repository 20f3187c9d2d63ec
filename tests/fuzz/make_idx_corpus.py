#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_idx (tests/fuzz/corpus/idx/): small valid IDX files, raw and
gzipped ("valid_*": must be read), and corrupted ones ("bad_*": must be rejected with
loom::Error by parse_idx and by gunzip + parse_idx). Plain Python, no dependencies:
python3 tests/fuzz/make_idx_corpus.py"""
import gzip
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "idx")


def idx(dims, data=None, dtype=0x08, magic=b"\x00\x00"):
    if data is None:
        n = 1
        for d in dims:
            n *= d
        data = bytes((7 * i + 3) % 256 for i in range(n))
    return magic + bytes([dtype, len(dims)]) + struct.pack(">%dI" % len(dims), *dims) + data


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


images = idx([3, 4, 4])
labels = idx([3], bytes([9, 0, 3]))
cases = {
    "valid_images_raw": images,
    "valid_labels_raw": labels,
    "valid_images_gz": gz(images),
    "valid_labels_gz": gz(labels),
    "valid_empty_raw": idx([0, 28, 28], b""),
    "valid_four_dims_gz": gz(idx([2, 1, 3, 2])),
    "valid_two_members_gz": gz(images[:10]) + gz(images[10:]),
    "bad_empty": b"",
    "bad_too_short": b"\x00\x00\x08",
    "bad_magic": idx([3], b"abc", magic=b"\x01\x00"),
    "bad_dtype_float": idx([2], struct.pack(">2f", 1.0, 2.0), dtype=0x0D),
    "bad_zero_dims": idx([], b""),
    "bad_header_cut": idx([3, 4, 4])[:10],
    "bad_truncated_data": images[:-1],
    "bad_trailing_data": images + b"\x00",
    "bad_huge_dims": idx([0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF], b"\x01\x02"),
    "bad_huge_dims_gz": gz(idx([60000, 28, 28], b"\x00" * 64)),
    "bad_gz_truncated": gz(images)[:-6],
    "bad_gz_header_only": gz(images)[:10],
    "bad_gz_crc": gz(images)[:-8] + b"\x00\x00\x00\x00" + gz(images)[-4:],
    "bad_gz_trailing_garbage": gz(images) + b"garbage",
    "bad_gz_inner_trailing": gz(images + b"\x00\x00"),
    "bad_gz_not_deflate": b"\x1f\x8b\x07\x00" + b"\x00" * 16,
    "bad_gz_bomb": gz(b"\x00" * (2 << 20)),  # 2 MiB of zeros: over the fuzz cap of 1 MiB
}

os.makedirs(OUT, exist_ok=True)
for name, data in sorted(cases.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"wrote {len(cases)} files to {OUT}")
