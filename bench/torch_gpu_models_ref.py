#!/usr/bin/env python3
"""The models of ../shared/bench/torch_ref.py timed on a GPU, for bench/{vision,seq2seq,bert,detr}
--device cuda.

Usage:  python3 bench/torch_gpu_models_ref.py CASE [--steps N] [--ref PATH/torch_ref.py]
CASE:   vit-fmnist | swin-fmnist | seq2seq-mini | bert-mini | detr-fmnist (any torch_ref.py case)

torch_ref.py builds its models and data with plain torch calls on the default device and times
them with loss.item() at the end of every step (which waits for the GPU), so running its own
run() under torch.set_default_device("cuda") gives PyTorch eager float32 on the GPU with the same
models, batches, optimizers and timing as on the CPU: nothing is re-implemented here. (DETR's
matcher hands its cost matrices to scipy on the host, as facebookresearch/detr does.)
Prints torch_ref.py's JSON line, with "device": "cuda".
"""
import argparse
import importlib.util
import json
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("case")
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--ref", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared",
                                              "bench", "torch_ref.py"))
args = ap.parse_args()

sys.argv = [args.ref, args.case, "--steps", str(args.steps)]  # torch_ref.py parses on import
spec = importlib.util.spec_from_file_location("torch_ref", args.ref)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
torch = ref.torch
torch.set_default_device("cuda")
if args.case == "detr-fmnist":  # the matcher's cost matrices go to the host, as in DETR
    import scipy.optimize
    _lsa = scipy.optimize.linear_sum_assignment
    scipy.optimize.linear_sum_assignment = lambda c: _lsa(c.detach().cpu().numpy())
torch.manual_seed(0)
out = ref.run(args.case, args.steps)
out.update(device="cuda", torch=torch.__version__, gpu=torch.cuda.get_device_name())
print(json.dumps(out))
