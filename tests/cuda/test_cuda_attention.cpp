// The fused attention kernels of the CUDA backend (backends/attention/attention.cu) against the
// CPU reference kernel (backends/attention/attention.cpp): out, lse, dq, dk, dv for float32 and
// bfloat16, head dims 32/64/128 and odd ones (padded), causal with and without a query offset,
// padding and broadcast masks read in place, dropout (the same Philox draw), lengths 1, 17, 64,
// 129 and one long sequence, and the split-key decoding kernel (at most 8 queries, up to 1024
// keys); and scaled_dot_product_attention on CUDA (fused when enabled) against its unfused path.
// bfloat16 tensors reach the kernels directly (they move to the GPU bit for bit).
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// max |a - b| <= tol * max(max |b|, floor), NaN where b is NaN.
void check_near(const Tensor& actual, const Tensor& expected, float tol, const std::string& what,
                float floor = 1e-2f) {
  const std::vector<float> a = actual.to(Device::CPU).to(DType::Float32).to_vector();
  const std::vector<float> b = expected.to(Device::CPU).to(DType::Float32).to_vector();
  REQUIRE_MESSAGE(a.size() == b.size(), what);
  float scale = floor;
  for (float x : b)
    if (!std::isnan(x)) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = std::isnan(b[i]) ? std::isnan(a[i]) : std::fabs(a[i] - b[i]) <= tol * scale;
    if (!ok) {
      FAIL_CHECK(what << ": element " << i << " is " << a[i] << ", expected " << b[i] << " (scale "
                      << scale << ")");
      return;
    }
  }
  CHECK(true);
}

// Turns the fused kernel on or off for a device for one scope, then back to the default.
class FusedAttention {
 public:
  FusedAttention(Device device, bool on) : device_(device) { F::set_fused_attention(device, on); }
  ~FusedAttention() { F::reset_fused_attention(device_); }
  FusedAttention(const FusedAttention&) = delete;
  FusedAttention& operator=(const FusedAttention&) = delete;

 private:
  Device device_;
};

struct Outputs {
  Tensor out, lse, dq, dk, dv;
};

Outputs run_kernels(Device device, const Tensor& q, const Tensor& k, const Tensor& v,
                    const Tensor& dout, const Tensor& mask, const AttentionArgs& args) {
  Backend& be = backend(device);
  const Tensor qd = q.to(device), kd = k.to(device), vd = v.to(device), gd = dout.to(device);
  Outputs o;
  o.out = Tensor::empty(q.shape(), q.dtype(), device);
  o.lse = Tensor::empty({args.n, args.q_len}, DType::Float32, device);
  be.attention_forward(qd, kd, vd, mask, args, o.out, o.lse);
  o.dq = Tensor::empty(q.shape(), q.dtype(), device);
  o.dk = Tensor::empty(k.shape(), k.dtype(), device);
  o.dv = Tensor::empty(v.shape(), v.dtype(), device);
  be.attention_backward(gd, qd, kd, vd, mask, o.out, o.lse, args, o.dq, o.dk, o.dv);
  return o;
}

struct Case {
  int64_t n = 2, q_len = 17, kv_len = 17, head_dim = 64;
  bool causal = false;
  int64_t query_offset = 0;
  float dropout_p = 0.0f;
  float amplitude = 1.0f;  // q is scaled by it: large scores test the online softmax's rescaling
  std::string mask =
      "";  // "", "padding" ([n/2, 1, T_q, T_k] broadcast over heads), "bias", "blocked"
};

// One case on CUDA and on the CPU, for `type`; the inputs are the same values.
void compare(const Case& c, DType type, float tol) {
  manual_seed(static_cast<uint64_t>(c.q_len * 131 + c.kv_len * 7 + c.head_dim));
  const Tensor q = (randn({c.n, c.q_len, c.head_dim}) * c.amplitude).to(type);
  const Tensor k = randn({c.n, c.kv_len, c.head_dim}).to(type);
  const Tensor v = randn({c.n, c.kv_len, c.head_dim}).to(type);
  const Tensor dout = randn({c.n, c.q_len, c.head_dim}).to(type);
  AttentionArgs args{.n = c.n,
                     .q_len = c.q_len,
                     .kv_len = c.kv_len,
                     .head_dim = c.head_dim,
                     .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                     .causal = c.causal,
                     .query_offset = c.query_offset,
                     .dropout_p = c.dropout_p,
                     .seed = 1234,
                     .offset = 77};
  Tensor mask_cpu, mask_gpu;  // the GPU's is a broadcast view of a small tensor, read in place
  if (c.mask == "padding") {
    std::vector<float> pad(2 * c.kv_len, 0.0f);
    for (int64_t j = c.kv_len * 2 / 3; j < c.kv_len; ++j) pad[c.kv_len + j] = -kInf;
    const Tensor small = tensor(pad, {2, 1, 1, c.kv_len});
    const Shape full{2, c.n / 2, c.q_len, c.kv_len};
    mask_cpu = small.expand(full);
    mask_gpu = small.to(Device::CUDA).expand(full);
  } else if (c.mask == "bias" || c.mask == "blocked") {
    Tensor bias = randn({c.q_len, c.kv_len});
    if (c.mask == "blocked") {  // query 0 sees nothing
      std::vector<float> m = bias.to_vector();
      for (int64_t j = 0; j < c.kv_len; ++j) m[j] = -kInf;
      bias = tensor(m, {c.q_len, c.kv_len});
    }
    const Shape full{c.n, c.q_len, c.kv_len};
    mask_cpu = bias.expand(full);
    mask_gpu = bias.to(Device::CUDA).expand(full);
  }
  const Outputs gpu = run_kernels(Device::CUDA, q, k, v, dout, mask_gpu, args);
  const Outputs cpu = run_kernels(Device::CPU, q, k, v, dout, mask_cpu, args);
  const std::string what = std::string(dtype_name(type)) + " T_q " + std::to_string(c.q_len) +
                           " T_k " + std::to_string(c.kv_len) + " d " + std::to_string(c.head_dim) +
                           (c.causal ? " causal" : "") + (c.dropout_p > 0 ? " dropout" : "") + " " +
                           c.mask;
  check_near(gpu.out, cpu.out, tol, what + " out");
  check_near(gpu.lse, cpu.lse, 1e-5f, what + " lse");
  if (c.mask == "blocked") return;  // NaN rows: the gradients are NaN-laden by definition
  // The three gradients share one scale, their largest value: a gradient that is zero in exact
  // arithmetic (dk with one key: the softmax of one score is constant) comes out as the rounding
  // of D = rowsum(dO * O) against dO V^T, a few ulps of the others' scale.
  float gradient_scale = 1e-2f;
  for (const Tensor* g : {&cpu.dq, &cpu.dk, &cpu.dv})
    gradient_scale = std::max(gradient_scale, max(abs(g->to(DType::Float32))).item());
  check_near(gpu.dq, cpu.dq, tol, what + " dq", gradient_scale);
  check_near(gpu.dk, cpu.dk, tol, what + " dk", gradient_scale);
  check_near(gpu.dv, cpu.dv, tol, what + " dv", gradient_scale);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {.n = 1, .q_len = 1, .kv_len = 1, .head_dim = 32},
      {.n = 3, .q_len = 17, .kv_len = 17, .head_dim = 64},
      {.n = 2, .q_len = 64, .kv_len = 64, .head_dim = 128, .causal = true},
      {.n = 2, .q_len = 129, .kv_len = 129, .head_dim = 40, .causal = true},
      {.n = 2, .q_len = 17, .kv_len = 100, .head_dim = 64, .causal = true, .query_offset = 83},
      {.n = 2, .q_len = 33, .kv_len = 45, .head_dim = 24, .causal = true, .query_offset = 5},
      {.n = 4, .q_len = 33, .kv_len = 33, .head_dim = 64, .mask = "padding"},
      {.n = 2, .q_len = 20, .kv_len = 50, .head_dim = 96, .mask = "bias"},
      {.n = 2, .q_len = 64, .kv_len = 64, .head_dim = 64, .causal = true, .dropout_p = 0.2f},
      {.n = 2, .q_len = 40, .kv_len = 130, .head_dim = 32, .amplitude = 6.0f},
      {.n = 1, .q_len = 5, .kv_len = 9, .head_dim = 7, .mask = "blocked"},
      // At most 8 queries without dropout: the decoding kernel (keys split in chunks of 64,
      // merged by each problem's last block, or up to 128 keys in one chunk with no merge; the
      // emulator's 8 merge counters make the 12 heads two launches), whole chunks of keys
      // blocked by the padding mask, a causal bound inside a chunk, a row that sees no key;
      // with dropout, the tiled kernels.
      {.n = 12, .q_len = 1, .kv_len = 1024, .head_dim = 64, .mask = "padding"},
      {.n = 3, .q_len = 1, .kv_len = 130, .head_dim = 64, .causal = true, .query_offset = 100},
      {.n = 2,
       .q_len = 4,
       .kv_len = 300,
       .head_dim = 128,
       .causal = true,
       .query_offset = 290,
       .amplitude = 3.0f,
       .mask = "bias"},
      {.n = 2, .q_len = 8, .kv_len = 65, .head_dim = 80, .mask = "padding"},
      {.n = 4, .q_len = 1, .kv_len = 128, .head_dim = 64, .causal = true, .query_offset = 127},
      {.n = 2, .q_len = 2, .kv_len = 200, .head_dim = 24, .mask = "blocked"},
      {.n = 2, .q_len = 3, .kv_len = 70, .head_dim = 64, .dropout_p = 0.2f},
      // Several query and key tiles of the bfloat16 kernels (64 rows), both with tails, with
      // every feature at once and scores large enough to move the running max often.
      {.n = 2,
       .q_len = 150,
       .kv_len = 200,
       .head_dim = 128,
       .causal = true,
       .query_offset = 50,
       .dropout_p = 0.1f,
       .amplitude = 3.0f,
       .mask = "bias"},
  };
  return all;
}

}  // namespace

TEST_CASE("CUDA fused attention in float32 matches the CPU kernel: out, lse, dq, dk, dv") {
  LOOM_REQUIRE_GPU();
  for (const Case& c : cases()) compare(c, DType::Float32, 2e-5f);
}

TEST_CASE("CUDA fused attention in bfloat16 (tensor cores) matches the CPU kernel") {
  LOOM_REQUIRE_GPU();
  // The GPU rounds P and dS to bfloat16 for its tensor-core products; the CPU keeps them float.
  for (const Case& c : cases()) compare(c, DType::BFloat16, 2e-2f);
}

TEST_CASE("CUDA fused attention on a long causal sequence (T = 1024) matches the CPU kernel") {
  LOOM_REQUIRE_GPU();
  const Case c{.n = 1, .q_len = 1024, .kv_len = 1024, .head_dim = 64, .causal = true};
  compare(c, DType::Float32, 2e-5f);
  compare(c, DType::BFloat16, 2e-2f);
}

// GPT-2 small's attention (batch 8 x 12 heads, T = 1024, head_dim 64, causal) with a padded
// tail and dropout: on a GPU only (run_emulated.sh defines LOOM_CUDA_EMULATED; the emulator
// would take minutes).
TEST_CASE("CUDA fused attention at GPT-2 size (96 x 1024 x 64) matches the CPU kernel") {
  LOOM_REQUIRE_GPU();
#ifndef LOOM_CUDA_EMULATED
  compare({.n = 96, .q_len = 1024, .kv_len = 1024, .head_dim = 64, .causal = true}, DType::BFloat16,
          2e-2f);
  compare(
      {.n = 96, .q_len = 1000, .kv_len = 1000, .head_dim = 64, .causal = true, .dropout_p = 0.1f},
      DType::Float32, 2e-5f);
#endif
}

TEST_CASE("scaled_dot_product_attention on CUDA, fused when enabled, matches its unfused path") {
  LOOM_REQUIRE_GPU();
  const FusedAttention restore(Device::CUDA, true);  // the loop below sets it; reset at the end
  manual_seed(5);
  const int64_t b = 2, t = 33, h = 3, d = 32;
  const Tensor x = randn({b, t, 3 * h * d}).to(Device::CUDA);
  std::vector<int64_t> padding(b * t, 0);  // the last 5 tokens of sequence 1 are padding
  for (int64_t j = t - 5; j < t; ++j) padding[t + j] = 1;
  const Tensor pad = F::padding_mask(tensor_i64(padding, {b, t})).to(Device::CUDA);
  std::vector<Tensor> results[2];
  for (int fused = 0; fused < 2; ++fused) {
    F::set_fused_attention(Device::CUDA, fused == 1);
    Tensor xx = x.detach().requires_grad_(true);
    // Heads split out of one projection: strided [B, h, T, d] views.
    auto head = [&](int64_t i) {
      return xx.narrow(2, i * h * d, h * d).reshape({b, t, h, d}).transpose(1, 2);
    };
    manual_seed(9);
    const Tensor out = F::scaled_dot_product_attention(
        head(0), head(1), head(2),
        {.mask = pad, .dropout_p = 0.25f, .training = true, .causal = true});
    sum(out * out).backward();
    results[fused] = {out.detach(), xx.grad()};
  }
  CHECK(results[1][0].shape() == Shape{b, h, t, d});
  check_near(results[1][0], results[0][0], 1e-5f, "fused vs unfused out");
  check_near(results[1][1], results[0][1], 1e-5f, "fused vs unfused dx");
}

TEST_CASE(
    "scaled_dot_product_attention on bfloat16 CUDA tensors and under autocast matches the CPU") {
  LOOM_REQUIRE_GPU();
  manual_seed(6);
  const Tensor q = randn({2, 3, 40, 64}), k = randn({2, 3, 40, 64}), v = randn({2, 3, 40, 64});
  // CPU: the fused reference kernel on the same bfloat16 values.
  const FusedAttention cpu_fused(Device::CPU, true), cuda_fused(Device::CUDA, true);
  std::vector<Tensor> results[2];
  for (Device device : {Device::CPU, Device::CUDA}) {
    const int i = device == Device::CUDA;
    Tensor qb = q.to(DType::BFloat16).to(device).detach().requires_grad_(true);
    Tensor kb = k.to(DType::BFloat16).to(device).detach().requires_grad_(true);
    Tensor vb = v.to(DType::BFloat16).to(device).detach().requires_grad_(true);
    const Tensor out = F::scaled_dot_product_attention(qb, kb, vb, {.causal = true});
    CHECK(out.dtype() == DType::BFloat16);
    sum(out.to(DType::Float32) * out.to(DType::Float32)).backward();
    Tensor qf = q.to(device).detach().requires_grad_(true);
    Tensor amp_out;
    {
      AutocastGuard amp;
      amp_out = F::scaled_dot_product_attention(qf, k.to(device), v.to(device), {.causal = true});
    }
    CHECK(amp_out.dtype() == DType::BFloat16);
    sum(amp_out.to(DType::Float32)).backward();
    CHECK(qf.grad().dtype() == DType::Float32);
    results[i] = {out, qb.grad(), kb.grad(), vb.grad(), amp_out, qf.grad()};
  }
  const char* names[] = {"out", "dq", "dk", "dv", "autocast out", "autocast dq"};
  for (int j = 0; j < 6; ++j) check_near(results[1][j], results[0][j], 2e-2f, names[j]);
}

TEST_CASE(
    "on CUDA, KV-cache decoding (at most 8 queries) takes the decoding kernel, also in "
    "float32; 9 to 15 queries the unfused path") {
  LOOM_REQUIRE_GPU();
  const Tensor q = randn({1, 2, 16, 32}).to(Device::CUDA).requires_grad_(true);
  const Tensor k = randn({1, 2, 40, 32}).to(Device::CUDA);
  auto fused = [](const Tensor& t) {
    for (auto node = t.grad_fn(); node;
         node = node->inputs.empty() ? nullptr : node->inputs[0].node)
      if (node->name == "scaled_dot_product_attention") return true;
    return false;
  };
  auto attend = [&](int64_t queries) {  // the last `queries` positions of the 40
    return F::scaled_dot_product_attention(q.narrow(2, 16 - queries, queries), k, k,
                                           {.causal = true, .query_offset = 40 - queries});
  };
  // The default: float32 attention is fused only when decoding.
  CHECK(fused(attend(1)));
  CHECK(fused(attend(8)));
  CHECK_FALSE(fused(attend(9)));
  CHECK_FALSE(fused(attend(16)));
  CHECK_FALSE(fused(F::scaled_dot_product_attention(
      q.narrow(2, 15, 1), k, k, {.dropout_p = 0.1f, .training = true})));  // no dropout there
  {
    const FusedAttention on(Device::CUDA, true);
    CHECK(fused(attend(16)));
    CHECK(fused(attend(1)));
    CHECK_FALSE(fused(attend(12)));
  }
  const FusedAttention off(Device::CUDA, false);
  CHECK_FALSE(fused(attend(1)));
  // The decoding kernel's values and gradients equal the unfused path's.
  std::vector<Tensor> results[2];
  for (int on = 0; on < 2; ++on) {
    F::set_fused_attention(Device::CUDA, on == 1);
    const Tensor leaf = q.detach().requires_grad_(true);
    const Tensor out = F::scaled_dot_product_attention(leaf.narrow(2, 13, 3), k, k,
                                                       {.causal = true, .query_offset = 37});
    sum(out * out).backward();
    results[on] = {out.detach(), leaf.grad()};
  }
  check_near(results[1][0], results[0][0], 1e-5f, "decoding vs unfused out");
  check_near(results[1][1], results[0][1], 1e-5f, "decoding vs unfused dq");
}

TEST_CASE("without gradients CUDA attention reads a KV cache's window in place, every kernel") {
  // Keys and values side by side in a (2, B, h, capacity, d) cache, as nn::KVCache; the
  // filled positions are views whose matrices lie capacity * d apart (AttentionArgs::kv_stride):
  // the decoding kernel (3 queries), the float32 tiled kernel and the bfloat16 one (20 queries)
  // read them in place, against the CPU's fused kernel on contiguous copies.
  LOOM_REQUIRE_GPU();
  const FusedAttention cpu_fused(Device::CPU, true), cuda_fused(Device::CUDA, true);
  manual_seed(13);
  const int64_t b = 2, h = 3, capacity = 150, filled = 131, d = 64;
  const Tensor cache = randn({2, b, h, capacity, d});
  NoGradGuard no_grad;
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    const Tensor gpu_cache = cache.to(dtype).to(Device::CUDA);
    const Tensor k = gpu_cache.select(0, 0).narrow(2, 0, filled);
    const Tensor v = gpu_cache.select(0, 1).narrow(2, 0, filled);
    REQUIRE_FALSE(k.is_contiguous());
    for (const int64_t tq : {3, 20}) {
      CAPTURE(tq);
      const Tensor q = randn({b, h, tq, d}).to(dtype);
      const F::AttentionOptions o{.causal = true, .query_offset = filled - tq};
      const Tensor expected = F::scaled_dot_product_attention(q, k.to(Device::CPU).contiguous(),
                                                              v.to(Device::CPU).contiguous(), o);
      const Tensor out = F::scaled_dot_product_attention(q.to(Device::CUDA), k, v, o);
      check_near(out, expected, dtype == DType::Float32 ? 2e-5f : 2e-2f,
                 std::string(dtype_name(dtype)) + " cache window");
    }
  }
}
