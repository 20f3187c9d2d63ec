// A tour of the tensor API, written as a PyTorch user writes it: dtypes and promotion, indexing,
// selection and sorting, reductions, elementwise math, einsum, random sampling and gradients of
// gradients, each line the LibTorch spelling of a line of bench/reference/tensor_tour.py.
//
//   build/examples/tensor_tour                                   prints every result
//   build/examples/tensor_tour --check tests/golden/tensor_tour.txt
//                                  compares every result with PyTorch's (the twin's output)
//
// Each show(name, t) prints `name [shape] values...`; the twin prints the same lines. Random
// draws differ between the two frameworks, so for them the tour shows what must hold (a
// permutation, counts, ranges) rather than the values.
#include "examples/tour.h"
#include "loom.h"

using namespace loom;
using namespace loom::indexing;

int main(int argc, char** argv) {
  tour::Tour tour = tour::from_command_line(
      argc, argv, "tensor_tour",
      "the tensor API as a PyTorch user writes it, checked against PyTorch");
  auto show = [&](const std::string& name, const auto& value) { tour.show(name, value); };

  // Deterministic inputs, the same in both frameworks.
  Tensor x = arange_f(0, 24).reshape({4, 6}).sin();          // float32 [4, 6]
  Tensor y = arange_f(0, 24).reshape({4, 6}).cos();
  Tensor n = arange(12).reshape({3, 4});                      // int64 [3, 4]

  // --- dtypes and promotion ------------------------------------------------------------------
  show("int_times_int", n * 2);                               // int64
  show("int_times_float", n * 2.5f);                          // float32
  show("int_div", n / 5);                                     // true division: float32
  show("int_floor_div", div(n - 6, tensor_i64({4}, {1}), "floor"));
  show("bool_sum", (x > 0).sum());                            // int64
  Tensor mask = x > 0.5f;                                     // Bool
  show("compare", (x <= y) | (x == 0) | (x != x) | (x >= 1) | (x < -0.9f));
  show("logic", logical_xor(mask, y > 0) & ~logical_and(mask, logical_not(y < 0)));
  show("logic_or", logical_or(x > 0.9f, y > 0.9f) ^ (x > y));
  show("where", where(mask, x, y));
  show("items", x.index({0, 1}).item<float>() + n.sum().item<int64_t>() +
                    mask.any().item<bool>());
  show("cast", (x * 3).to(DType::Int64));
  show("bool_vector", static_cast<double>(mask.to_vector_bool().size()));
  show("to_bool", n.to(DType::Bool).to(DType::Int64).sum() + (y.to(DType::Bool) == mask));

  // --- indexing ------------------------------------------------------------------------------
  show("slice", x.index({Slice(1, None, 2), Slice(None, -1)}));
  show("ellipsis_none", x.index({Ellipsis, 0, None}));
  show("mask_index", x.index({mask}));
  show("int_index", x.index({tensor_i64({3, 0, 3}, {3}), Slice(2, 4)}));
  Tensor z = x.clone();
  z.index_put_({Slice(), 0}, 7.0f);
  z.index_put_({mask}, y.index({mask}));
  show("index_put", z);
  auto pieces = split(x, 4, 1);
  show("split", pieces[1]);
  show("split_sizes", split(x, std::vector<int64_t>{1, 5}, 1)[1]);
  show("chunk", chunk(x, 3, 1)[2]);
  show("unbind", unbind(x, 0)[3]);
  show("flatten_unflatten", unflatten(flatten(x), 0, {2, 12}));
  show("squeeze_expand", x.unsqueeze(0).squeeze(0).index({0}).expand({2, 6}));
  show("repeat_flip", flip(repeat(n, {1, 2}), {0, 1}));
  show("free_views", squeeze(unsqueeze(x, 1), 1) + expand(y.index({Slice(0, 1)}), {4, 6}));
  show("tril_triu", tril(x, 1) - triu(y, -1));

  // --- selection and sorting -----------------------------------------------------------------
  auto [top_values, top_indices] = topk(x, 2, 1);
  show("topk_values", top_values);
  show("topk_indices", top_indices);
  auto [sorted, order] = sort(x, 0, /*descending=*/true);
  show("sort", sorted);
  show("sort_indices", order);
  show("argsort", argsort(y, -1));
  show("min_argmin", min(x, 1, false) + argmin(x, 1).to(DType::Float32));
  show("amax_amin", amax(x, {0, 1}, false) - amin(x, {1}, true).sum());
  Tensor cols = tensor_i64({0, 5, 2, 2, 1, 0, 4, 3}, {4, 2});
  show("gather", gather(x, 1, cols));
  show("scatter", scatter(x, 1, cols, 9.0f));
  show("scatter_src", scatter(x, 1, cols, y.index({Slice(), Slice(0, 2)})));
  show("scatter_add", scatter_add(zeros({4, 6}), 1, cols, y.index({Slice(), Slice(0, 2)})));
  show("index_select", index_select(x, 1, tensor_i64({5, 1}, {2})));
  show("masked_select", masked_select(x, mask));
  show("nonzero", nonzero(mask));
  show("one_hot", one_hot(tensor_i64({2, 0, 1}, {3}), 4));

  // --- reductions ----------------------------------------------------------------------------
  show("sum_dims", sum(x, {0, 1}, true));
  show("mean_dims", mean(x, {1}, false));
  show("prod", prod(x + 1.5f, 1, false) + prod(y.index({0}) + 1.5f));
  show("var_std", var(x, {1}, 0, false) + loom::std(y, {0}, 1, true).sum());
  show("logsumexp", logsumexp(x * 30, {1}, false));
  show("norm", norm(x, 2) + norm(y, 1, {1}, false).sum());
  show("cumsum_cumprod", cumsum(x, 1) + cumprod(y, 0));
  show("any_all", any(mask, 1).to(DType::Int64) + all(x > -2, 0).sum());
  show("allclose_equal", allclose(x, x + 1e-9f) + 2.0 * equal(x, y));

  // --- elementwise ---------------------------------------------------------------------------
  Tensor u = x * 0.9f;   // in (-1, 1) for logit's and the inverse functions' domains
  show("unary_1", abs(x) + sign(y) + neg(x) + reciprocal(y + 2) + rsqrt(x + 2) + square(x));
  show("unary_2", sin(x) + cos(x) + log1p(u) + expm1(x) + log2(x + 2) + exp2(x) + erf(x));
  show("rounding", floor(x * 3) + ceil(y * 3) + round(x * 3) + trunc(y * 3));
  show("clamp", clamp(x, -0.5f, 0.5f) + minimum(x, y) + maximum(x, y));
  show("activations_1", silu(x) + softplus(x, 2, 20) + leaky_relu(x, 0.1) + elu(x, 1));
  show("activations_2", mish(x) + hardswish(x * 4) + logit(u * 0.5f + 0.5f) + sigmoid(x) +
                            tanh(x) + relu6(x * 8));
  Tensor a3 = x.reshape({2, 3, 4}), b3 = y.reshape({2, 4, 3});
  show("einsum", einsum("bij,bjk->bik", {a3, b3}) + bmm(a3, b3));
  show("einsum_implicit", einsum("ij,kj", {x, y}));
  show("einsum_trace", einsum("ii", {x.index({Slice(0, 4), Slice(0, 4)})}));
  show("outer", outer(x.index({0}), y.index({1})));
  show("baddbmm_addmm", baddbmm(ones({2, 3, 3}), a3, b3, 0.5f, 2.0f).sum(0) +
                            addmm(ones({3, 3}), a3.index({0}), b3.index({1}), 1.0f, -1.0f));

  // --- random (the global generator; values differ from PyTorch's, the rules do not) -------
  manual_seed(0);
  Tensor ints = randint(3, 7, {1000});
  show("randint_range", (ints >= 3).all().to(DType::Int64) + (ints < 7).all());
  show("randperm_sorted", sort(randperm(10)).values);
  show("bernoulli_count", bernoulli(full({4000}, 0.25f)).sum().item<float>() > 800 ? 1.0 : 0.0);
  Tensor drawn = multinomial(tensor({0, 1, 1, 0, 1}, {5}), 3, false);
  show("multinomial", sort(drawn).values);
  Tensor repeated = multinomial(tensor({0, 3, 1}, {3}), 50, /*replacement=*/true);
  show("multinomial_replacement", (repeated > 0).all());
  Tensor w = zeros({10000});
  w.normal_(2.0, 0.5);
  const float mean_error = (w.mean() - 2).abs().item<float>();
  const float std_error = (loom::std(w, {0}, 1, false) - 0.5f).abs().item<float>();
  show("normal_moments", mean_error < 0.02f && std_error < 0.02f);
  w.uniform_(-1.0, 3.0);
  show("uniform_range", (w >= -1).all().item<bool>() && (w < 3).all().item<bool>());

  // --- gradients, and gradients of gradients -------------------------------------------------
  Tensor p = x.clone().requires_grad_();
  Tensor q = logsumexp(p, {1}, false) + norm(p.index({Slice(), Slice(1, None, 2)}), 2, {1}, false) +
             cumsum(silu(p), 1).index({Ellipsis, -1}) + topk(p, 2, 1).values.sum(1) +
             einsum("ij,ij->i", {p, y}) + prod(p + 1.5f, 1, false) + var(p, {1}, 1, false);
  q.sum().backward();
  show("grad", p.grad());
  // d/dp of |dq/dp|^2, the shape of a gradient penalty: a second derivative through every op.
  Tensor r = x.clone().requires_grad_();
  Tensor out = (tanh(r).pow(3) * y).sum() + (softmax(r, 1) * y).sum() + (r * r * r).sum();
  Tensor dr = autograd::grad({out}, {r}, {}, /*retain_graph=*/false, /*create_graph=*/true)[0];
  Tensor penalty = (dr * dr).sum();
  show("grad_of_grad", autograd::grad({penalty}, {r})[0]);
  return tour.finish();
}
