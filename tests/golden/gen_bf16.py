#!/usr/bin/python3
"""Writes the bfloat16 fixtures that tests/core/test_bfloat16.cpp, tests/autograd/test_bf16_ops.cpp
and tests/nn/test_safetensors_bf16.cpp read.

    /usr/bin/python3 tests/golden/gen_bf16.py

bf16.safetensors (PyTorch's CPU bfloat16, torch 1.13):
    conv_f32_in     float32 values chosen to be hard to round (ties, just-off ties, subnormals,
                    the largest finite values, infinities, NaNs with payloads), stored as F32 bits
    conv_bf16_out   x.to(torch.bfloat16) of each, stored as BF16 bits
    conv_back_f32   that bfloat16 tensor .to(torch.float32)
    i64_in / i64_to_bf16 / bf16_to_i64_in / bf16_to_i64_out   the int64 conversions
    op_<name>       the result of one op on bfloat16 inputs (op_a, op_b, op_m, op_n: the inputs),
                    computed by PyTorch in bfloat16 on the CPU (op_matmul: see op_goldens)
autocast.safetensors: a two-layer MLP (Linear 24->48, GELU, Linear 48->10, cross-entropy with
    label smoothing 0.1 and one ignored target) run forward and backward under
    torch.autocast("cpu", dtype=torch.bfloat16); tests/nn/test_autocast.cpp reads it:
    x, target, w1, b1, w2, b2   the float32 inputs and parameters
    y1, h, logits               the bfloat16 activations (fc1's output, GELU's, fc2's)
    loss                        the float32 loss
    dx, dw1, db1, dw2, db2      the float32 gradients
bf16_checkpoint.safetensors: bfloat16 tensors (and F32/I64 beside them) written by
    scripts/safetensors_io.py; loom reads them as bfloat16 and must write the same bytes back.
"""

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import safetensors_io  # noqa: E402


# Float32 bit patterns around every rounding rule of float32 -> bfloat16 (the low 16 bits are
# what rounding looks at: 0x8000 is a tie, 0x7FFF just below one, 0x8001 just above).
SPECIAL_BITS = [
    0x00000000, 0x80000000,              # +0, -0
    0x3F800000, 0xBF800000,              # 1, -1
    0x3F808000,                          # 1 + 2^-8: a tie, lower neighbour even -> 1
    0x3F818000,                          # 1 + 3*2^-8: a tie, upper neighbour even -> up
    0x3F807FFF, 0x3F808001,              # just below / above a tie
    0xBF808000, 0xBF818000,              # negative ties
    0x3F80FFFF,                          # rounds up into the next bfloat16
    0x3FFFFFFF,                          # carries into the exponent -> 2
    0x7F7F0000,                          # the largest finite bfloat16, 3.3895e38
    0x7F7F7FFF,                          # just below the tie above it -> stays finite
    0x7F7F8000,                          # the tie above it (odd) -> rounds to inf
    0x7F7FFFFF, 0xFF7FFFFF,              # float32's largest finite -> +-inf
    0x00800000,                          # the smallest normal float32, 2^-126
    0x00010000,                          # the smallest bfloat16 subnormal, 2^-133
    0x00000001,                          # the smallest float32 subnormal -> +0
    0x00008000,                          # tie between 0 and 2^-133 (even: 0)
    0x00018000,                          # tie between 2^-133 and 2^-132 (even: up)
    0x007FFFFF,                          # the largest float32 subnormal -> rounds to 2^-126
    0x80018000,                          # a negative subnormal tie
    0x7F800000, 0xFF800000,              # +-inf
    0x7FC00000, 0xFFC00000,              # quiet NaNs
    0x7F800001,                          # a signalling NaN whose payload sits in the low bits
    0x7FFFFFFF, 0xFFFFFFFF,              # NaNs with every payload bit set
    0x3EAAAAAB, 0x40490FDB,              # 1/3, pi
    0x4B800001,                          # 2^24 + 2
]


def conversion_inputs():
    g = torch.Generator().manual_seed(0)
    # Random bit patterns of finite numbers of every exponent, and random normal values.
    magnitudes = torch.randint(0, 0x7F800000, (2000,), generator=g).tolist()
    signs = torch.randint(0, 2, (2000,), generator=g).tolist()
    random_bits = [m | (0x80000000 if s else 0) for m, s in zip(magnitudes, signs)]
    bits = SPECIAL_BITS + random_bits
    signed = [b - 2**32 if b >= 2**31 else b for b in bits]
    values = torch.tensor(signed, dtype=torch.int32).view(torch.float32)
    normals = torch.randn(1000, generator=g) * 100
    return torch.cat([values, normals])


def op_goldens():
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(4, 6, generator=g) * 3).to(torch.bfloat16)
    b = (torch.randn(4, 6, generator=g) * 3).to(torch.bfloat16)
    m = torch.randn(5, 64, generator=g).to(torch.bfloat16)
    n = torch.randn(64, 7, generator=g).to(torch.bfloat16)
    out = {"op_a": a, "op_b": b, "op_m": m, "op_n": n}
    out["op_add"] = a + b
    out["op_sub"] = a - b
    out["op_mul"] = a * b
    out["op_div"] = a / b
    out["op_neg"] = -a
    out["op_scale"] = a * 0.3
    out["op_exp"] = torch.exp(a / 4)
    out["op_tanh"] = torch.tanh(a)
    out["op_relu"] = torch.relu(a)
    # torch 1.13's CPU bfloat16 mm accumulates in bfloat16 when the right operand is contiguous
    # (errors ~5x those of one rounding); with it transposed it accumulates in float32, as
    # cuBLAS does. op_matmul is that product: float32 accumulation, one rounding.
    out["op_matmul"] = (m.float() @ n.float()).to(torch.bfloat16)
    out["op_matmul_bt"] = m @ n.t().contiguous().t()
    out["op_sum"] = m.sum()
    out["op_sum_dim0"] = m.sum(0)
    out["op_sum_dim1"] = m.sum(1)
    out["op_mean"] = m.mean()
    out["op_mean_dim1"] = m.mean(1)
    out["op_softmax"] = torch.softmax(a, 1)
    return out


def autocast_goldens():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 24, generator=g).requires_grad_()
    target = torch.randint(0, 10, (16,), generator=g)
    target[5] = -100
    w1 = (torch.randn(48, 24, generator=g) * 0.3).requires_grad_()
    b1 = (torch.randn(48, generator=g) * 0.3).requires_grad_()
    w2 = (torch.randn(10, 48, generator=g) * 0.3).requires_grad_()
    b2 = (torch.randn(10, generator=g) * 0.3).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y1 = torch.nn.functional.linear(x, w1, b1)
        h = torch.nn.functional.gelu(y1)
        logits = torch.nn.functional.linear(h, w2, b2)
        loss = torch.nn.functional.cross_entropy(logits, target, label_smoothing=0.1)
    assert y1.dtype == h.dtype == logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    out = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2, "y1": y1, "h": h,
           "logits": logits, "loss": loss, "dx": x.grad, "dw1": w1.grad, "db1": b1.grad,
           "dw2": w2.grad, "db2": b2.grad}
    return {name: t.detach().contiguous() for name, t in out.items()}


def main():
    x = conversion_inputs()
    xb = x.to(torch.bfloat16)
    i64 = torch.tensor([0, 1, -1, 255, 256, 257, 258, 259, 2**24 + 1, -(2**24) - 3,
                        2**40 + 2**32, -(2**62), 2**62 + 2**54], dtype=torch.int64)
    bf_for_i64 = torch.tensor([0.0, -0.0, 2.5, -2.5, 0.99, -0.99, 127.5, 3.0e10, -3.0e10],
                              dtype=torch.bfloat16)
    tensors = {
        "conv_f32_in": x,
        "conv_bf16_out": xb,
        "conv_back_f32": xb.to(torch.float32),
        "i64_in": i64,
        "i64_to_bf16": i64.to(torch.bfloat16),
        "bf16_to_i64_in": bf_for_i64,
        "bf16_to_i64_out": bf_for_i64.to(torch.int64),
    }
    tensors.update(op_goldens())
    safetensors_io.save(os.path.join(HERE, "bf16.safetensors"), tensors,
                        metadata={"source": "tests/golden/gen_bf16.py", "torch": torch.__version__})

    safetensors_io.save(os.path.join(HERE, "autocast.safetensors"), autocast_goldens(),
                        metadata={"source": "tests/golden/gen_bf16.py", "torch": torch.__version__})

    g = torch.Generator().manual_seed(2)
    checkpoint = {
        "layer.weight": torch.randn(3, 4, generator=g).to(torch.bfloat16),
        "layer.bias": torch.randn(4, generator=g).to(torch.bfloat16),
        "scalar": torch.tensor(1.5, dtype=torch.bfloat16),
        "empty": torch.zeros(0, 2, dtype=torch.bfloat16),
        "specials": torch.tensor([float("inf"), -float("inf"), -0.0, 3.3895314e38, 2.0**-133],
                                 dtype=torch.bfloat16),
        "master.weight": torch.randn(2, 2, generator=g),
        "step": torch.tensor(7, dtype=torch.int64),
    }
    safetensors_io.save(os.path.join(HERE, "bf16_checkpoint.safetensors"), checkpoint,
                        metadata={"format": "pt", "source": "tests/golden/gen_bf16.py"})


if __name__ == "__main__":
    main()
