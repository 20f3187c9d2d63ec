#!/usr/bin/python3
"""Golden values from PyTorch for nn::LSTM and nn::GRU (tests/nn/test_rnn.cpp).

Each case builds a torch.nn.LSTM / GRU (hidden 8: the file stays small), perturbs its
parameters, runs it on a random input (and initial state, where the case has one) and records,
with gen_nn.py's `case` (its docstring lists the names), the state_dict, the inputs, the
output, the cotangent and the gradients of every input and parameter. The recorded output is
the flattened output, h_n (and c_n) joined into one vector, so one cotangent reaches all three.
loom's modules take batch_first = True by default; the cases pass batch_first explicitly.

Writes tests/golden/rnn.safetensors. Run: /usr/bin/python3 tests/golden/gen_rnn.py
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import gen_nn  # noqa: E402  (case, perturb and the TENSORS they fill)
from gen_nn import case, perturb  # noqa: E402
from safetensors_io import save  # noqa: E402

# (name, kind, layers, bidirectional, batch_first, bias, with initial state, unbatched)
CASES = [
    ("lstm_1layer", "lstm", 1, False, True, True, False, False),
    ("lstm_2layer_h0", "lstm", 2, False, True, True, True, False),
    ("lstm_bidirectional", "lstm", 2, True, True, True, True, False),
    ("lstm_time_major_nobias", "lstm", 1, True, False, False, False, False),
    ("lstm_unbatched", "lstm", 1, False, True, True, True, True),
    ("gru_1layer", "gru", 1, False, True, True, False, False),
    ("gru_2layer_h0", "gru", 2, False, True, True, True, False),
    ("gru_bidirectional", "gru", 2, True, False, True, True, False),
    ("gru_unbatched_nobias", "gru", 1, True, True, False, False, True),
]
INPUT, HIDDEN, BATCH, STEPS = 5, 8, 3, 4


def main():
    torch.manual_seed(0)
    for name, kind, layers, bidir, batch_first, bias, with_state, unbatched in CASES:
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        module = perturb(cls(INPUT, HIDDEN, layers, bias=bias, batch_first=batch_first,
                             bidirectional=bidir))
        shape = (STEPS, INPUT) if unbatched else \
            (BATCH, STEPS, INPUT) if batch_first else (STEPS, BATCH, INPUT)
        state_shape = (layers * (2 if bidir else 1),) + (() if unbatched else (BATCH,)) + (HIDDEN,)
        inputs = [torch.randn(*shape)]
        if with_state:
            inputs += [torch.randn(*state_shape) for _ in range(2 if kind == "lstm" else 1)]

        def run(x, *state, module=module, kind=kind):
            if kind == "lstm":
                out, (h, c) = module(x, tuple(state) if state else None)
                return torch.cat([out.flatten(), h.flatten(), c.flatten()])
            out, h = module(x, state[0] if state else None)
            return torch.cat([out.flatten(), h.flatten()])
        case(name, module, inputs, run)
    save(os.path.join(HERE, "rnn.safetensors"), gen_nn.TENSORS)
    print(f"wrote {len(gen_nn.TENSORS)} tensors to rnn.safetensors")


if __name__ == "__main__":
    main()
