// Ops on bfloat16 tensors (autograd/ops.h, "bfloat16"): PyTorch's CPU bfloat16 results
// (tests/golden/gen_bf16.py) bit for bit where the op is one rounding of a float32 result, within
// one bfloat16 ulp where PyTorch accumulates in another order; every op within bfloat16
// tolerance of the float32 op; type promotion; and gradients through a bfloat16 forward.
#include <cmath>
#include <cstring>
#include <functional>

#include "core/bfloat16.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
using loom::testing::check_close;
using loom::testing::expect_error;
using loom::testing::max_ulp_distance;

namespace {

std::map<std::string, Tensor> golden() {
  return nn::read_safetensors(LOOM_TEST_DATA "/bf16.safetensors", nullptr, true);
}

struct GoldenCase {
  const char* name;
  std::function<Tensor(const std::map<std::string, Tensor>&)> f;
  // 0: one rounding of the same float32 result, so bit for bit; 1 where PyTorch's float32
  // math may differ (libm, accumulation order; all measured at 0 with torch 1.13).
  int ulps;
};

}  // namespace

TEST_CASE("golden: ops on bfloat16 match PyTorch's CPU bfloat16 results") {
  const auto g = golden();
  auto in = [&](const char* name) { return g.at(name); };
  const std::vector<GoldenCase> cases = {
      {"op_add", [&](auto&) { return in("op_a") + in("op_b"); }, 0},
      {"op_sub", [&](auto&) { return in("op_a") - in("op_b"); }, 0},
      {"op_mul", [&](auto&) { return in("op_a") * in("op_b"); }, 0},
      {"op_div", [&](auto&) { return in("op_a") / in("op_b"); }, 0},
      {"op_neg", [&](auto&) { return -in("op_a"); }, 0},
      {"op_relu", [&](auto&) { return relu(in("op_a")); }, 0},
      // PyTorch 1.13 rounds the Python scalar to bfloat16 first (0.30078125); loom keeps 0.3f.
      {"op_scale", [&](auto&) { return in("op_a") * 0.3f; }, 1},
      {"op_exp", [&](auto&) { return exp(in("op_a") / 4.0f); }, 1},
      {"op_tanh", [&](auto&) { return tanh(in("op_a")); }, 1},
      {"op_matmul", [&](auto&) { return matmul(in("op_m"), in("op_n")); }, 1},
      {"op_matmul_bt",
       [&](auto&) { return matmul(in("op_m"), in("op_n").t().contiguous().t()); }, 1},
      {"op_sum", [&](auto&) { return sum(in("op_m")); }, 1},
      {"op_sum_dim0", [&](auto&) { return sum(in("op_m"), 0); }, 1},
      {"op_sum_dim1", [&](auto&) { return sum(in("op_m"), 1); }, 1},
      {"op_mean", [&](auto&) { return mean(in("op_m")); }, 1},
      {"op_mean_dim1", [&](auto&) { return mean(in("op_m"), 1); }, 1},
      {"op_softmax", [&](auto&) { return softmax(in("op_a"), 1); }, 1},
  };
  for (const GoldenCase& c : cases) {
    INFO("case " << std::string(c.name));
    const Tensor got = c.f(g);
    CHECK(got.dtype() == DType::BFloat16);
    CHECK(max_ulp_distance(got, g.at(c.name)) <= c.ulps);
  }
  // No fixture entry goes untested.
  size_t ops = 0;
  for (const auto& [name, t] : g) ops += name.rfind("op_", 0) == 0;
  CHECK(ops == cases.size() + 4);  // + the inputs op_a, op_b, op_m, op_n
}

// An op under test, one op per case (so one rounding to bfloat16): takes float tensors (all
// bfloat16, or all float32) and returns a tensor.
struct OpCase {
  const char* name;
  std::function<Tensor(const Tensor& a, const Tensor& b)> f;
};

TEST_CASE("every op on bfloat16 is within bfloat16 tolerance of the float32 op") {
  manual_seed(3);
  // b is positive and away from 0 (division, log, sqrt, the base of pow).
  const Tensor a32 = randn({6, 8}), b32 = abs(randn({6, 8})) + 0.5f;
  const Tensor a = a32.to(DType::BFloat16), b = b32.to(DType::BFloat16);
  const Tensor w = randn({8}), bias = randn({8});
  const Tensor target = tensor_i64({0, 3, 7, 1, 2, 5}, {6});
  const Tensor ids = tensor_i64({5, 0, 5}, {3});
  const std::vector<OpCase> cases = {
      {"add", [](auto& x, auto& y) { return x + y; }},
      {"sub", [](auto& x, auto& y) { return x - y; }},
      {"mul", [](auto& x, auto& y) { return x * y; }},
      {"div", [](auto& x, auto& y) { return x / y; }},
      {"pow", [](auto& x, auto& y) { return pow(y, x); }},
      {"maximum", [](auto& x, auto& y) { return maximum(x, y); }},
      {"minimum", [](auto& x, auto& y) { return minimum(x, y); }},
      {"add scalar", [](auto& x, auto&) { return x + 0.25f; }},
      {"rsub scalar", [](auto& x, auto&) { return 2.0f - x; }},
      {"mul scalar", [](auto& x, auto&) { return x * 0.7f; }},
      {"div scalar", [](auto& x, auto&) { return x / 1.3f; }},
      {"rdiv", [](auto&, auto& y) { return 1.0f / y; }},
      {"exp", [](auto& x, auto&) { return exp(x); }},
      {"log", [](auto&, auto& y) { return log(y); }},
      {"sqrt", [](auto&, auto& y) { return sqrt(y); }},
      {"rsqrt", [](auto&, auto& y) { return rsqrt(y); }},
      {"tanh", [](auto& x, auto&) { return tanh(x); }},
      {"sigmoid", [](auto& x, auto&) { return sigmoid(x); }},
      {"relu", [](auto& x, auto&) { return relu(x); }},
      {"gelu", [](auto& x, auto&) { return gelu(x); }},
      {"gelu_tanh", [](auto& x, auto&) { return gelu_tanh(x); }},
      {"abs", [](auto& x, auto&) { return abs(x); }},
      {"sin", [](auto& x, auto&) { return sin(x); }},
      {"cos", [](auto& x, auto&) { return cos(x); }},
      {"sign", [](auto& x, auto&) { return sign(x); }},
      {"clamp", [](auto& x, auto&) { return clamp(x, -0.5f, 0.5f); }},
      {"pow scalar", [](auto&, auto& y) { return pow(y, 1.5f); }},
      {"where", [](auto& x, auto& y) { return where(gt(x, 0.0f), x, y); }},
      {"masked_fill", [](auto& x, auto&) { return masked_fill(x, lt(x, 0.0f), -1.0f); }},
      {"sum", [](auto& x, auto&) { return sum(x); }},
      {"sum dim", [](auto& x, auto&) { return sum(x, 1, true); }},
      {"mean", [](auto& x, auto&) { return mean(x); }},
      {"mean dim", [](auto& x, auto&) { return mean(x, 0); }},
      {"max", [](auto& x, auto&) { return max(x); }},
      {"max dim", [](auto& x, auto&) { return max(x, 1); }},
      {"min dim", [](auto& x, auto&) { return min(x, 0); }},
      {"var", [](auto& x, auto&) { return var(x, 1); }},
      {"softmax", [](auto& x, auto&) { return softmax(x, 1); }},
      {"log_softmax", [](auto& x, auto&) { return log_softmax(x, 0); }},
      {"matmul", [](auto& x, auto& y) { return matmul(x, y.t()); }},
      {"batched matmul", [](auto& x, auto& y) {
         return matmul(x.reshape({2, 3, 8}), y.reshape({2, 3, 8}).transpose(1, 2));
       }},
      {"matrix-vector", [](auto& x, auto& y) { return matmul(x, y.select(0, 2)); }},
      {"layer_norm", [&](auto& x, auto&) { return layer_norm(x, w, bias); }},
      {"cross_entropy", [&](auto& x, auto&) { return cross_entropy(x, target); }},
      {"embedding", [&](auto& x, auto&) { return embedding(x, ids); }},
      {"tril", [](auto& x, auto&) { return tril(x, 1); }},
      {"views and cat", [](auto& x, auto& y) {
         return cat({x.t().narrow(0, 2, 3), y.t().narrow(0, 0, 2)}, 0).permute({1, 0});
       }},
      {"roll", [](auto& x, auto&) { return x.roll(3, 1); }},
  };
  for (const OpCase& c : cases) {
    INFO("op " << std::string(c.name));
    const Tensor got = c.f(a, b);
    CHECK(got.dtype() == DType::BFloat16);
    // Against float32 on the same (rounded) inputs: only the final rounding differs, at most
    // half a bfloat16 step, 2^-9 relative.
    const Tensor on_rounded = c.f(a.to(DType::Float32), b.to(DType::Float32));
    CHECK(on_rounded.dtype() == DType::Float32);
    check_close(got.to(DType::Float32), on_rounded, 1.0f / 256, 1e-6f, c.name);
    // Against float32 on the unrounded inputs: the rounding of the inputs too.
    check_close(got.to(DType::Float32), c.f(a32, b32), 3e-2f, 3e-2f, c.name);
  }
}

TEST_CASE("bfloat16 comparisons and argmax compare the exact values and give Bool and int64") {
  Tensor x = tensor({1.0f, 1.0078125f, -2.0f, 5.0f}, {4}).to(DType::BFloat16);
  Tensor y = tensor({1.0f, 1.0f, -3.0f, 5.0f}, {4}).to(DType::BFloat16);
  CHECK(eq(x, y).dtype() == DType::Bool);
  CHECK(eq(x, y).to_vector() == std::vector<float>{1, 0, 0, 1});  // 1 + 2^-7 is a bfloat16 value
  CHECK(gt(x, y).to_vector() == std::vector<float>{0, 1, 1, 0});
  // A number is rounded to the tensor's dtype first, as PyTorch's: 1.002 is bfloat16 1.0.
  CHECK(lt(x, 1.002f).to_vector() == std::vector<float>{0, 0, 1, 0});
  CHECK(argmax(x, 0).dtype() == DType::Int64);
  CHECK(argmax(x, 0).item() == 3.0f);
  CHECK(argmin(x, 0).item() == 2.0f);
}

TEST_CASE("type promotion: bfloat16 with float32 gives float32, with bfloat16 gives bfloat16") {
  Tensor b = tensor({1.5f, 2.0f}, {2}).to(DType::BFloat16);
  Tensor f = tensor({0.1f, 0.2f}, {2});
  CHECK((b + b).dtype() == DType::BFloat16);
  CHECK((b + f).dtype() == DType::Float32);
  CHECK((f * b).dtype() == DType::Float32);
  CHECK((f * b).to_vector() == std::vector<float>{0.1f * 1.5f, 0.2f * 2.0f});  // no rounding
  CHECK((b * 0.1f).dtype() == DType::BFloat16);  // a scalar does not promote
  CHECK(where(gt(f, 0.15f), b, f).dtype() == DType::Float32);
  CHECK((b + tensor_i64({1, 2}, {2})).dtype() == DType::BFloat16);  // int64 ranks below
}

TEST_CASE("training through a bfloat16 forward: float32 master weights get gradients within "
          "bfloat16 tolerance of the float32 ones") {
  manual_seed(4);
  const Tensor x = randn({16, 12});
  const Tensor target = randint(0, 5, {16});
  Tensor w1 = (randn({12, 32}) * 0.3f).requires_grad_();
  Tensor w2 = (randn({32, 5}) * 0.3f).requires_grad_();
  auto loss_of = [&](bool bf16) {
    auto cast = [&](const Tensor& t) { return bf16 ? t.to(DType::BFloat16) : t; };
    Tensor h = gelu(matmul(cast(x), cast(w1)));      // (16, 32)
    Tensor logits = matmul(h, cast(w2));              // (16, 5)
    return cross_entropy(logits.to(DType::Float32), target);
  };
  Tensor loss32 = loss_of(false);
  loss32.backward();
  const Tensor g1 = w1.grad().clone(), g2 = w2.grad().clone();
  w1.set_grad(Tensor());
  w2.set_grad(Tensor());
  Tensor loss16 = loss_of(true);
  CHECK(loss16.dtype() == DType::Float32);
  loss16.backward();
  CHECK(w1.grad().dtype() == DType::Float32);
  CHECK(std::fabs(loss16.item() - loss32.item()) < 1e-2f * std::fabs(loss32.item()));
  check_close(w1.grad(), g1, 5e-2f, 5e-3f, "dL/dw1");
  check_close(w2.grad(), g2, 5e-2f, 5e-3f, "dL/dw2");
}

TEST_CASE("gradients of bfloat16 ops are bfloat16 and close to the float32 gradients") {
  manual_seed(5);
  const Tensor x32 = randn({4, 6});
  Tensor xb = x32.to(DType::BFloat16).requires_grad_();
  Tensor xf = xb.detach().to(DType::Float32).requires_grad_();
  auto f = [](const Tensor& x) {
    return sum(softmax(x, 1) * tanh(x)) + mean(matmul(x, x.t())) +
           sum(layer_norm(x, Tensor(), Tensor()) * x);
  };
  f(xb).backward();
  f(xf).backward();
  CHECK(xb.grad().dtype() == DType::BFloat16);
  check_close(xb.grad().to(DType::Float32), xf.grad(), 3e-2f, 3e-2f, "d/dx");
}

TEST_CASE("unary and binary ops on bfloat16 are one kernel with the values and gradients of "
          "the float32 op on the exact values, rounded once") {
  // The kernels read bfloat16 operands directly (Backend::unary, unary_backward, binary); the
  // reference runs the float32 op on upcast copies and rounds the result: bit for bit equal,
  // forward and gradient, also for broadcast, strided and mixed float32/bfloat16 operands. The
  // gradients of mul, div and maximum are composed of bfloat16 ops (each rounded, as PyTorch's
  // bfloat16 backward), so they may differ from the one-rounding reference by one ulp.
  manual_seed(9);
  auto bits_equal = [](const Tensor& a, const Tensor& b, const std::string& what, int ulps = 0) {
    INFO(what);
    REQUIRE(a.dtype() == b.dtype());
    CHECK(max_ulp_distance(a.to(DType::BFloat16), b.to(DType::BFloat16)) <= ulps);
    if (ulps == 0) CHECK(a.to(DType::Float32).to_vector() == b.to(DType::Float32).to_vector());
  };
  using Unary = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Unary>> unary_ops = {
      {"gelu_tanh", [](const Tensor& x) { return gelu_tanh(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},  // its derivative reads the output
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"affine", [](const Tensor& x) { return x * 1.7f; }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5f, 0.8f); }},
      {"neg", [](const Tensor& x) { return -x; }}};
  const Tensor base = randn({5, 7});
  for (const auto& [name, f] : unary_ops) {
    for (const bool strided : {false, true}) {
      Tensor xb = (strided ? base.t() : base).to(DType::BFloat16).requires_grad_();
      Tensor xr = xb.detach().requires_grad_();
      const Tensor yb = f(xb);
      const Tensor yr = f(xr.to(DType::Float32)).to(DType::BFloat16);  // the reference
      bits_equal(yb, yr, std::string(name) + " forward");
      const Tensor g = randn(yb.shape()).to(DType::BFloat16);
      sum(yb.to(DType::Float32) * g.to(DType::Float32)).backward();
      sum(yr.to(DType::Float32) * g.to(DType::Float32)).backward();
      bits_equal(xb.grad(), xr.grad(), std::string(name) + " gradient");
    }
  }
  using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Binary>> binary_ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }}};
  const Tensor a32 = randn({4, 6}), row32 = randn({6}) + 3.0f;
  for (const auto& [name, f] : binary_ops) {
    // bfloat16 with bfloat16 (broadcast row), bfloat16 with float32 and float32 with bfloat16.
    for (const int mix : {0, 1, 2}) {
      CAPTURE(mix);
      Tensor a = mix == 2 ? a32.clone() : a32.to(DType::BFloat16);
      Tensor b = mix == 1 ? row32.clone() : row32.to(DType::BFloat16);
      a.requires_grad_(), b.requires_grad_();
      Tensor ar = a.detach().requires_grad_(), br = b.detach().requires_grad_();
      const Tensor y = f(a, b);
      Tensor yr = f(ar.to(DType::Float32), br.to(DType::Float32));
      if (mix == 0) yr = yr.to(DType::BFloat16);
      bits_equal(y, yr, std::string(name) + " forward");
      sum(y.to(DType::Float32)).backward();
      sum(yr.to(DType::Float32)).backward();
      const int ulps = std::string(name) == "add" || std::string(name) == "sub" ? 0 : 1;
      bits_equal(a.grad(), ar.grad(), std::string(name) + " d/da", ulps);
      bits_equal(b.grad(), br.grad(), std::string(name) + " d/db", ulps);
    }
  }
}

TEST_CASE("the gradient of a cast comes back in the source's memory layout when that is a "
          "permuted contiguous one") {
  // Attention heads: (B, T, nh, hs) viewed as (B, nh, T, hs) and cast to bfloat16. The cast's
  // gradient is written with the view's strides, so the transpose and reshape behind it stay
  // views; its values are the incoming gradient cast back to float32.
  manual_seed(6);
  const Tensor base = randn({2, 5, 12}).requires_grad_();               // (B, T, C)
  const Tensor heads = base.view({2, 5, 3, 4}).transpose(1, 2);         // (B, nh, T, hs)
  const Tensor cast = heads.to(DType::BFloat16);
  REQUIRE(cast.grad_fn() != nullptr);
  const Tensor g = randn({2, 3, 5, 4}).to(DType::BFloat16);
  const Tensor dheads = cast.grad_fn()->backward(g)[0];
  CHECK(dheads.dtype() == DType::Float32);
  CHECK(dheads.strides() == heads.strides());
  CHECK(dheads.to_vector() == g.to(DType::Float32).to_vector());
  CHECK(dheads.transpose(1, 2).is_contiguous());  // the transpose's gradient needs no copy
  // Through the whole chain the values arrive at the float32 leaf.
  sum(cast.to(DType::Float32) * g.to(DType::Float32)).backward();
  CHECK(base.grad().to_vector() ==
        g.to(DType::Float32).transpose(1, 2).reshape({2, 5, 12}).to_vector());
  // A layout that is not a permutation of a dense one (a column slice) gets a contiguous one.
  const Tensor wide = randn({4, 8}).requires_grad_();
  const Tensor slice = wide.narrow(1, 2, 3).to(DType::BFloat16);
  const Tensor dslice = slice.grad_fn()->backward(ones({4, 3}, DType::BFloat16))[0];
  CHECK(dslice.is_contiguous());
  CHECK(dslice.to_vector() == std::vector<float>(12, 1.0f));
}

TEST_CASE("dropout on bfloat16 keeps the dtype and drops whole values") {
  manual_seed(6);
  Tensor x = ones({1000}, DType::BFloat16);
  CHECK(dropout(x, 0.5f, false).dtype() == DType::BFloat16);
  const Tensor y = dropout(x, 0.5f, true);
  CHECK(y.dtype() == DType::BFloat16);
  int64_t kept = 0;
  for (float v : y.to_vector()) {
    REQUIRE((v == 0.0f || v == 2.0f));
    kept += v == 2.0f;
  }
  CHECK(kept > 400);
  CHECK(kept < 600);
}
