#!/usr/bin/python3
"""PyTorch's side of examples/tensor_tour.cpp, line for line: prints `name [shape] values...`
for each result. Its output is tests/golden/tensor_tour.txt, which `tensor_tour --check` (and
the test suite) compares loom's results with:

    /usr/bin/python3 bench/reference/tensor_tour.py > tests/golden/tensor_tour.txt
"""
import torch
import torch.nn.functional as F


def show(name, value):
    t = value if isinstance(value, torch.Tensor) else torch.tensor(float(value))
    shape = "[" + ",".join(str(d) for d in t.shape) + "]"
    values = " ".join(repr(float(v)) for v in t.detach().flatten().tolist())
    print(f"{name} {shape} {values}".rstrip())


def main():
    x = torch.arange(0, 24, dtype=torch.float32).reshape(4, 6).sin()
    y = torch.arange(0, 24, dtype=torch.float32).reshape(4, 6).cos()
    n = torch.arange(12).reshape(3, 4)

    # dtypes and promotion
    show("int_times_int", n * 2)
    show("int_times_float", n * 2.5)
    show("int_div", n / 5)
    show("int_floor_div", torch.div(n - 6, torch.tensor([4]), rounding_mode="floor"))
    show("bool_sum", (x > 0).sum())
    mask = x > 0.5
    show("compare", (x <= y) | (x == 0) | (x != x) | (x >= 1) | (x < -0.9))
    show("logic", torch.logical_xor(mask, y > 0)
         & ~torch.logical_and(mask, torch.logical_not(y < 0)))
    show("logic_or", torch.logical_or(x > 0.9, y > 0.9) ^ (x > y))
    show("where", torch.where(mask, x, y))
    show("items", x[0, 1].item() + n.sum().item() + mask.any().item())
    show("cast", (x * 3).to(torch.int64))
    show("bool_vector", len(mask.flatten().tolist()))
    show("to_bool", n.to(torch.bool).to(torch.int64).sum() + (y.to(torch.bool) == mask))

    # indexing
    show("slice", x[1::2, :-1])
    show("ellipsis_none", x[..., 0, None])
    show("mask_index", x[mask])
    show("int_index", x[torch.tensor([3, 0, 3]), 2:4])
    z = x.clone()
    z[:, 0] = 7.0
    z[mask] = y[mask]
    show("index_put", z)
    show("split", torch.split(x, 4, 1)[1])
    show("split_sizes", torch.split(x, [1, 5], 1)[1])
    show("chunk", torch.chunk(x, 3, 1)[2])
    show("unbind", torch.unbind(x, 0)[3])
    show("flatten_unflatten", torch.unflatten(torch.flatten(x), 0, (2, 12)))
    show("squeeze_expand", x.unsqueeze(0).squeeze(0)[0].expand(2, 6))
    show("repeat_flip", torch.flip(n.repeat(1, 2), [0, 1]))
    show("free_views", torch.squeeze(torch.unsqueeze(x, 1), 1) + y[0:1].expand(4, 6))
    show("tril_triu", torch.tril(x, 1) - torch.triu(y, -1))

    # selection and sorting
    top_values, top_indices = torch.topk(x, 2, 1)
    show("topk_values", top_values)
    show("topk_indices", top_indices)
    sorted_, order = torch.sort(x, 0, descending=True)
    show("sort", sorted_)
    show("sort_indices", order)
    show("argsort", torch.argsort(y, -1))
    show("min_argmin", torch.min(x, 1).values + torch.argmin(x, 1).float())
    show("amax_amin", torch.amax(x, (0, 1)) - torch.amin(x, (1,), keepdim=True).sum())
    cols = torch.tensor([0, 5, 2, 2, 1, 0, 4, 3]).reshape(4, 2)
    show("gather", torch.gather(x, 1, cols))
    show("scatter", torch.scatter(x, 1, cols, 9.0))
    show("scatter_src", torch.scatter(x, 1, cols, y[:, 0:2]))
    show("scatter_add", torch.scatter_add(torch.zeros(4, 6), 1, cols, y[:, 0:2]))
    show("index_select", torch.index_select(x, 1, torch.tensor([5, 1])))
    show("masked_select", torch.masked_select(x, mask))
    show("nonzero", torch.nonzero(mask))
    show("one_hot", F.one_hot(torch.tensor([2, 0, 1]), 4))

    # reductions
    show("sum_dims", torch.sum(x, (0, 1), keepdim=True))
    show("mean_dims", torch.mean(x, (1,)))
    show("prod", torch.prod(x + 1.5, 1) + torch.prod(y[0] + 1.5))
    show("var_std", torch.var(x, (1,), correction=0)
         + torch.std(y, (0,), correction=1, keepdim=True).sum())
    show("logsumexp", torch.logsumexp(x * 30, (1,)))
    show("norm", torch.norm(x, 2) + torch.norm(y, 1, dim=(1,)).sum())
    show("cumsum_cumprod", torch.cumsum(x, 1) + torch.cumprod(y, 0))
    show("any_all", torch.any(mask, 1).to(torch.int64) + torch.all(x > -2, 0).sum())
    show("allclose_equal", torch.allclose(x, x + 1e-9) + 2.0 * torch.equal(x, y))

    # elementwise
    u = x * 0.9
    show("unary_1", x.abs() + y.sign() + x.neg() + (y + 2).reciprocal() + (x + 2).rsqrt()
         + x.square())
    show("unary_2", x.sin() + x.cos() + u.log1p() + x.expm1() + (x + 2).log2() + x.exp2()
         + x.erf())
    show("rounding", (x * 3).floor() + (y * 3).ceil() + (x * 3).round() + (y * 3).trunc())
    show("clamp", x.clamp(-0.5, 0.5) + torch.minimum(x, y) + torch.maximum(x, y))
    show("activations_1", F.silu(x) + F.softplus(x, 2, 20) + F.leaky_relu(x, 0.1) + F.elu(x, 1))
    show("activations_2", F.mish(x) + F.hardswish(x * 4) + torch.logit(u * 0.5 + 0.5)
         + torch.sigmoid(x) + torch.tanh(x) + F.relu6(x * 8))
    a3, b3 = x.reshape(2, 3, 4), y.reshape(2, 4, 3)
    show("einsum", torch.einsum("bij,bjk->bik", a3, b3) + torch.bmm(a3, b3))
    show("einsum_implicit", torch.einsum("ij,kj", x, y))
    show("einsum_trace", torch.einsum("ii", x[0:4, 0:4]))
    show("outer", torch.outer(x[0], y[1]))
    show("baddbmm_addmm", torch.baddbmm(torch.ones(2, 3, 3), a3, b3, beta=0.5, alpha=2.0).sum(0)
         + torch.addmm(torch.ones(3, 3), a3[0], b3[1], beta=1.0, alpha=-1.0))

    # random: the rules, not the values
    torch.manual_seed(0)
    ints = torch.randint(3, 7, (1000,))
    show("randint_range", (ints >= 3).all().to(torch.int64) + (ints < 7).all())
    show("randperm_sorted", torch.sort(torch.randperm(10)).values)
    show("bernoulli_count", 1.0 if torch.bernoulli(torch.full((4000,), 0.25)).sum() > 800 else 0.0)
    drawn = torch.multinomial(torch.tensor([0.0, 1, 1, 0, 1]), 3, False)
    show("multinomial", torch.sort(drawn).values)
    repeated = torch.multinomial(torch.tensor([0.0, 3, 1]), 50, True)
    show("multinomial_replacement", (repeated > 0).all())
    w = torch.zeros(10000)
    w.normal_(2.0, 0.5)
    show("normal_moments", abs(w.mean() - 2) < 0.02 and abs(w.std() - 0.5) < 0.02)
    w.uniform_(-1.0, 3.0)
    show("uniform_range", bool((w >= -1).all()) and bool((w < 3).all()))

    # gradients, and gradients of gradients
    p = x.clone().requires_grad_()
    q = (torch.logsumexp(p, (1,)) + torch.norm(p[:, 1::2], 2, dim=(1,))
         + torch.cumsum(F.silu(p), 1)[..., -1] + torch.topk(p, 2, 1).values.sum(1)
         + torch.einsum("ij,ij->i", p, y) + torch.prod(p + 1.5, 1)
         + torch.var(p, (1,), correction=1))
    q.sum().backward()
    show("grad", p.grad)
    r = x.clone().requires_grad_()
    out = (torch.tanh(r).pow(3) * y).sum() + (torch.softmax(r, 1) * y).sum() + (r * r * r).sum()
    dr, = torch.autograd.grad([out], [r], create_graph=True)
    penalty = (dr * dr).sum()
    show("grad_of_grad", torch.autograd.grad([penalty], [r])[0])


if __name__ == "__main__":
    main()
