#!/usr/bin/python3
"""Golden second derivatives from PyTorch for tests/autograd/test_double_backward.cpp (writes
grad.safetensors): torch.autograd.grad with create_graph=True, differentiated again.

hvp: a Hessian-vector product of a 2-layer MLP classifier,
    h = layer_norm(gelu(x @ w1.T + b1), ln_w, ln_b)       x [8,5], w1 [6,5], ln_* [6]
    loss = cross_entropy(h @ w2.T + b2, target,            w2 [4,6], target [8] (one -100)
                         ignore_index=-100, label_smoothing=0.1)
    g = grad(loss, params, create_graph=True);  Hv = grad(sum_p <g_p, v_p>, params)
  stored: hvp.x, hvp.target, hvp.<p>, hvp.v.<p> (the inputs), hvp.loss, hvp.grad.<p>,
  hvp.hv.<p> (p in w1, b1, ln_w, ln_b, w2, b2).

gp: a WGAN-GP critic step (Gulrajani et al. 2017, eq. 3),
    D(x) = leaky_relu(x @ w1.T + b1, 0.2) @ w2.T + b2     x [6,4], w1 [5,4], w2 [1,5]
    x_hat = eps real + (1 - eps) fake                     eps [6,1]
    g = grad(D(x_hat), x_hat, ones, create_graph=True)
    penalty = mean((sqrt(sum(g^2, 1)) - 1)^2)
    loss = mean(D(fake)) - mean(D(real)) + 10 penalty;  loss.backward()
  stored: gp.real, gp.fake, gp.eps, gp.<p> (the inputs), gp.penalty, gp.loss,
  gp.grad_x_hat, gp.grad.<p> (p in w1, b1, w2, b2).

The inputs are float32 draws; the results are computed in float64 from them and stored as
float32. Run: /usr/bin/python3 tests/golden/gen_grad.py   (from anywhere)
"""

import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from safetensors_io import save  # noqa: E402

MLP = ["w1", "b1", "ln_w", "ln_b", "w2", "b2"]
CRITIC = ["w1", "b1", "w2", "b2"]


def draw(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float32)


def hvp_case(gen, out):
    x = draw(gen, 8, 5)
    target = torch.tensor([0, 3, 1, -100, 2, 2, 0, 1], dtype=torch.int64)
    shapes = {"w1": (6, 5), "b1": (6,), "ln_w": (6,), "ln_b": (6,), "w2": (4, 6), "b2": (4,)}
    p = {n: draw(gen, *shapes[n]) * 0.5 for n in MLP}
    p["ln_w"] = p["ln_w"] + 1.0
    v = {n: draw(gen, *shapes[n]) for n in MLP}
    out["hvp.x"], out["hvp.target"] = x, target
    for n in MLP:
        out["hvp." + n], out["hvp.v." + n] = p[n], v[n]
    p64 = {n: p[n].double().requires_grad_() for n in MLP}
    h = F.layer_norm(F.gelu(F.linear(x.double(), p64["w1"], p64["b1"])), (6,), p64["ln_w"],
                     p64["ln_b"], eps=1e-5)
    loss = F.cross_entropy(F.linear(h, p64["w2"], p64["b2"]), target, ignore_index=-100,
                           label_smoothing=0.1)
    g = torch.autograd.grad(loss, [p64[n] for n in MLP], create_graph=True)
    dot = sum((gp * v[n].double()).sum() for gp, n in zip(g, MLP))
    hv = torch.autograd.grad(dot, [p64[n] for n in MLP])
    out["hvp.loss"] = loss.detach().float()
    for n, gp, hp in zip(MLP, g, hv):
        out["hvp.grad." + n] = gp.detach().float()
        out["hvp.hv." + n] = hp.float()


def gp_case(gen, out):
    real, fake = draw(gen, 6, 4), draw(gen, 6, 4)
    eps = torch.rand(6, 1, generator=gen, dtype=torch.float32)
    shapes = {"w1": (5, 4), "b1": (5,), "w2": (1, 5), "b2": (1,)}
    p = {n: draw(gen, *shapes[n]) * 0.5 for n in CRITIC}
    out["gp.real"], out["gp.fake"], out["gp.eps"] = real, fake, eps
    for n in CRITIC:
        out["gp." + n] = p[n]
    p64 = {n: p[n].double().requires_grad_() for n in CRITIC}

    def critic(x):
        hidden = F.leaky_relu(F.linear(x, p64["w1"], p64["b1"]), 0.2)
        return F.linear(hidden, p64["w2"], p64["b2"])

    e = eps.double()
    x_hat = (e * real.double() + (1 - e) * fake.double()).requires_grad_()
    d = critic(x_hat)
    g = torch.autograd.grad(d, x_hat, torch.ones_like(d), create_graph=True)[0]
    penalty = ((g.pow(2).sum(1).sqrt() - 1) ** 2).mean()
    loss = critic(fake.double()).mean() - critic(real.double()).mean() + 10 * penalty
    loss.backward()
    out["gp.penalty"], out["gp.loss"] = penalty.detach().float(), loss.detach().float()
    out["gp.grad_x_hat"] = g.detach().float()
    for n in CRITIC:
        out["gp.grad." + n] = p64[n].grad.float()


def main():
    gen = torch.Generator().manual_seed(20240611)
    out = {}
    hvp_case(gen, out)
    gp_case(gen, out)
    path = os.path.join(HERE, "grad.safetensors")
    save(path, {k: v.contiguous() for k, v in out.items()},
         metadata={"generator": "tests/golden/gen_grad.py", "torch": torch.__version__})
    print(f"wrote {len(out)} tensors to {path}")


if __name__ == "__main__":
    main()
