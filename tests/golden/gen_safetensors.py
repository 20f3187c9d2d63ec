#!/usr/bin/python3
"""Writes the safetensors fixtures that tests/nn/test_safetensors.cpp reads.

    /usr/bin/python3 tests/golden/gen_safetensors.py

Values follow formulas the C++ test recomputes (element i of the row-major data):
    float tensors: i * 0.5 - 3          (exact in F16, BF16, F32 and F64)
    int tensors:   i * 7 - 20           ("i64_big": i * 2**40 - 5, to exercise all 64 bits)
    BOOL:          i % 3 == 0
    "*_specials" (F16/BF16 subnormals, infinities, NaN, -0) sit beside "*_specials_as_f32", the
    same values converted to float32 by PyTorch.

safetensors_from_python.safetensors        every dtype loom reads, including 0-d and empty
                                           tensors, plus metadata with escapes and non-ASCII
safetensors_f32_i64_from_python.safetensors  only F32/I64, which loom also writes: the C++ test
                                           writes the same tensors and expects identical bytes
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402

METADATA = {
    "format": "pt",
    "source": "tests/golden/gen_safetensors.py",
    "escapes": "quote \" backslash \\ newline \n tab \t unicode \u00e9\u4e2d",
}


INF = float("inf")
# Smallest subnormal, largest finite, infinities, NaN, signed zero, and a rounded 1/3.
F16_SPECIALS = torch.tensor([2.0**-24, 3 * 2.0**-20, 65504.0, INF, -INF, float("nan"), -0.0, 1 / 3],
                            dtype=torch.float16)
BF16_SPECIALS = torch.tensor([2.0**-133, 3.0e38, INF, -INF, float("nan"), -0.0, 1 / 3],
                             dtype=torch.bfloat16)


def floats(shape, dtype=torch.float32):
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, dtype=torch.float64) * 0.5 - 3).reshape(shape).to(dtype)


def ints(shape, dtype=torch.int64):
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(n, dtype=torch.int64) * 7 - 20).reshape(shape).to(dtype)


def f32_i64_tensors():
    return {
        "f32_matrix": floats([3, 4]),
        "f32_3d": floats([2, 3, 4]),
        "f32_scalar": floats([]),
        "f32_empty": floats([0, 3]),
        # Saved from a transposed (non-contiguous) view; the file holds it row-major.
        "f32_transposed": floats([4, 2]).t(),
        "layer.0/weight": floats([2, 2]),
        "i64_vector": ints([5]),
        "i64_scalar": ints([]),
        "i64_empty": ints([0]),
        "i64_big": torch.arange(3, dtype=torch.int64) * 2**40 - 5,
    }


def converted_tensors():
    return {
        "f16_vector": floats([6], torch.float16),
        "bf16_matrix": floats([2, 3], torch.bfloat16),
        "f64_vector": floats([5], torch.float64),
        "i32_vector": ints([4], torch.int32),
        "i16_vector": ints([3], torch.int16),
        "i8_vector": ints([3], torch.int8),
        "u8_vector": torch.arange(4, dtype=torch.uint8) * 60,
        "bool_vector": torch.arange(5) % 3 == 0,
        # Edge cases of the float conversions, with PyTorch's own float32 conversion beside them.
        "f16_specials": F16_SPECIALS,
        "f16_specials_as_f32": F16_SPECIALS.float(),
        "bf16_specials": BF16_SPECIALS,
        "bf16_specials_as_f32": BF16_SPECIALS.float(),
    }


def main():
    safetensors_io.save(os.path.join(HERE, "safetensors_f32_i64_from_python.safetensors"),
                        f32_i64_tensors(), METADATA)
    everything = {**f32_i64_tensors(), **converted_tensors()}
    safetensors_io.save(os.path.join(HERE, "safetensors_from_python.safetensors"), everything,
                        METADATA)
    # Read both back as a self-check of the writer.
    for name in ("safetensors_f32_i64_from_python", "safetensors_from_python"):
        tensors, metadata = safetensors_io.load_with_metadata(
            os.path.join(HERE, name + ".safetensors"))
        assert metadata == METADATA
        for key, t in tensors.items():
            ref = everything[key]
            assert t.dtype == ref.dtype and t.shape == ref.shape, key
            # Bitwise, so that NaN and -0.0 count.
            assert safetensors_io._tensor_bytes(t) == safetensors_io._tensor_bytes(ref), key
    print("wrote", len(everything), "tensors")


if __name__ == "__main__":
    main()
