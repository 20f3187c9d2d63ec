#!/usr/bin/python3
"""PyTorch's side of examples/nn_tour.cpp, line for line: prints `name [shape] values...` for
each result. Its output is tests/golden/nn_tour.txt, which `nn_tour --check` (and the test
suite) compares loom's results with:

    /usr/bin/python3 bench/reference/nn_tour.py > tests/golden/nn_tour.txt
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from tensor_tour import show


def wave(shape, phase=0.0):
    n = 1
    for d in shape:
        n *= d
    return (torch.arange(0, n, dtype=torch.float32) * 0.7 + phase).sin().reshape(shape)


def set_parameters(model):
    with torch.no_grad():
        for k, (_, p) in enumerate(sorted(model.named_parameters())):
            p.copy_(wave(p.shape, k + 1.0) * 0.3)


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4; Debian's 1.13 has none): x / rms(x) * weight."""
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Zoo(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, (3, 2), (1, 2), (1, 0))
        self.conv_grouped = nn.Conv2d(4, 4, 3, 1, 2, 2, groups=2)
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.up = nn.ConvTranspose2d(4, 2, 3, 2, 1, 1)
        self.conv1d = nn.Conv1d(3, 5, 3, 2, 1)
        self.bn1d = nn.BatchNorm1d(5)
        self.rms = RMSNorm(6)
        self.lstm = nn.LSTM(6, 5, 2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(6, 5, batch_first=True)
        self.heads = nn.ModuleDict({"a": nn.Linear(6, 3), "b": nn.Linear(6, 3, bias=False)})
        self.blocks = nn.ModuleList([nn.Linear(6, 6) for _ in range(2)])
        self.mlp = nn.Sequential(nn.Linear(6, 8), nn.SiLU(), nn.Identity(), nn.Linear(8, 2))


def main():
    # modules
    zoo = Zoo()
    set_parameters(zoo)
    image = wave((2, 3, 8, 8)).requires_grad_()
    a = zoo.conv(image)
    b = zoo.gn(zoo.bn(zoo.conv_grouped(a)))
    show("conv_bn_gn", b)
    show("pools", nn.MaxPool2d(2)(b).sum() + nn.AvgPool2d(3, 2, 1)(b).sum()
         + nn.AdaptiveAvgPool2d((3, 2))(b).sum())
    c = zoo.up(b)
    show("conv_transpose", c)
    show("flatten", nn.Unflatten(1, (4, 64))(nn.Flatten()(c)).sum(1))
    seq = wave((2, 3, 10), 0.5).requires_grad_()
    d = nn.AdaptiveAvgPool1d(4)(zoo.bn1d(zoo.conv1d(seq)))
    show("conv1d_bn1d", d)
    x = wave((2, 4, 6), 1.0).requires_grad_()
    show("activations", nn.ReLU()(x) + nn.GELU()(x) + nn.SiLU()(x) + nn.Sigmoid()(x)
         + nn.Tanh()(x) + nn.Softmax(-1)(x) + nn.LeakyReLU(0.2)(x))
    r = zoo.rms(x)
    show("rms_norm", r)
    out, (h_n, c_n) = zoo.lstm(x)
    show("lstm", out)
    show("lstm_state", h_n + c_n)
    gru_out, h = zoo.gru(x, wave((1, 2, 5), 2.0))
    show("gru", gru_out.sum(1) + h.squeeze(0))
    e = zoo.heads["a"](x) * zoo.heads["b"](x)
    for block in zoo.blocks:
        x = x + block(x).tanh()
    show("dict_list_sequential", e.sum(-1, keepdim=True) + zoo.mlp(x))
    total = (b.square().sum() + c.sum() + d.square().sum() + out.square().sum() + h.sum()
             + e.sum() + zoo.mlp(x).sum() + r.square().sum())
    total.backward()
    show("grad_image", image.grad)
    show("grad_seq", seq.grad)
    for name, p in sorted(zoo.named_parameters()):
        show("grad." + name, p.grad.abs().sum())
    show("running_mean", zoo.bn.running_mean + zoo.bn1d.running_var.sum())

    state_dict = dict(zoo.state_dict())
    del state_dict["rms.weight"]
    state_dict["extra.weight"] = torch.zeros(1)
    missing, unexpected = Zoo().load_state_dict(state_dict, strict=False)
    show("load_state_dict", len(missing) * 10 + len(unexpected))

    # functional ops and losses
    img = wave((1, 2, 3, 4), 0.3)
    show("pad", F.pad(img, (1, 2, 1, 1), "reflect").sum(-1).sum(-1, keepdim=True)
         + F.pad(img, (1, 1, 2, 0), "replicate").sum(-2).sum(-1, keepdim=True)
         + F.pad(img, (2, 1, 1, 0), "circular").sum(-1).sum(-1, keepdim=True)
         + F.pad(img, (1, 0), "constant", 0.5).sum(-1))
    show("interpolate", F.interpolate(img, (5, 7), mode="bilinear", align_corners=False).sum(1)
         + F.interpolate(img, (5, 7), mode="bilinear", align_corners=True).sum(1)
         + F.interpolate(img, (5, 7), mode="nearest").sum(1))
    logits, probs = wave((4, 3), 0.1) * 2, wave((4, 3), 0.9).abs()
    labels = torch.tensor([2, 0, 1, 2])
    show("losses", F.binary_cross_entropy_with_logits(logits, probs / 1.5)
         + F.nll_loss(F.log_softmax(logits, 1), labels)
         + F.smooth_l1_loss(logits, probs, beta=0.5)
         + F.kl_div(F.log_softmax(logits, 1), F.softmax(probs, 1), reduction="batchmean"))
    show("similarity", F.cosine_similarity(logits, probs, 1) + F.normalize(logits, 2, 1).sum(1))

    # optimizers: three steps on sum(c * (w - 1)^2)
    def run_optimizer(name, make):
        w = wave((3, 4), 0.2).requires_grad_()
        frozen = torch.ones(2)
        opt = make([w, frozen])
        for _ in range(3):
            opt.zero_grad()
            (wave((3, 4), 0.4).abs() * (w - 1).square()).sum().backward()
            opt.step()
        show("optim." + name, w)
    run_optimizer("sgd", lambda p: torch.optim.SGD(p, 0.1, 0.9, 0.1, 0.01, False))
    run_optimizer("sgd_nesterov", lambda p: torch.optim.SGD(p, 0.1, 0.9, 0.0, 0.01, True))
    run_optimizer("rmsprop", lambda p: torch.optim.RMSprop(p, 0.01, 0.9, 1e-8, 0.01, 0.5))
    run_optimizer("adagrad", lambda p: torch.optim.Adagrad(p, 0.1, 0.01, 0.01))
    run_optimizer("adamw", lambda p: torch.optim.AdamW(p, 0.1))
    g = wave((5,)).requires_grad_()
    (g * wave((5,), 1.0) * 3).sum().backward()
    torch.nn.utils.clip_grad_value_([g], 1.0)
    show("clip_grad_value", g.grad)

    # schedulers: the learning rate at each of 12 steps
    def lrs(name, make):
        w = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([w], 0.1, 0.9)
        sched = make(opt)
        seen = []
        for step in range(12):
            seen.append(opt.param_groups[0]["lr"])
            if step == 11:
                break
            opt.step()
            if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau):
                sched.step(1.0 / (step + 1) if step < 3 else 0.5)
            else:
                sched.step()
        show("sched." + name, torch.tensor(seen))
    S = torch.optim.lr_scheduler
    lrs("step", lambda o: S.StepLR(o, 3, 0.5))
    lrs("multistep", lambda o: S.MultiStepLR(o, [2, 5, 9], 0.3))
    lrs("cosine", lambda o: S.CosineAnnealingLR(o, 10, 0.01))
    lrs("lambda", lambda o: S.LambdaLR(o, lambda s: 1.0 / (1 + s)))
    lrs("onecycle", lambda o: S.OneCycleLR(o, 0.5, 12))
    lrs("plateau", lambda o: S.ReduceLROnPlateau(o, "min", 0.5, 2))

    # data
    dataset = torch.utils.data.TensorDataset(wave((10, 3)), torch.arange(10))
    sums = [bx.sum().item() + by.sum().item()
            for bx, by in torch.utils.data.DataLoader(dataset, batch_size=4)]
    show("loader", torch.tensor(sums))
    shuffled = torch.utils.data.DataLoader(dataset, batch_size=3, shuffle=True, drop_last=True)
    seen = [i for _, by in shuffled for i in by.tolist()]
    show("shuffled_batches", len(shuffled) * 100 + len(seen))
    summed = torch.utils.data.DataLoader(
        dataset, batch_size=5, collate_fn=lambda examples: [sum(e[0] for e in examples)])
    show("collate", torch.stack([batch[0] for batch in summed], 0))
    parts = torch.utils.data.random_split(dataset, [7, 3], torch.Generator().manual_seed(0))
    show("random_split", len(parts[0]) * 10 + len(parts[1]))
    pixels = (wave((3, 6, 6)).abs() * 255).to(torch.int64)
    resized = F.interpolate((pixels.float() / 255)[None], size=(4, 4), mode="bilinear",
                            align_corners=False)[0]
    mean, std = torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0.2, 0.3, 0.4])
    show("transforms", (resized - mean[:, None, None]) / std[:, None, None])
    show("augment_shape", 3 * 6 * 6)


if __name__ == "__main__":
    main()
