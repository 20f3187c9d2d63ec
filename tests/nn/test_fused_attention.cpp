// The fused attention kernel (FlashAttention-2 style, Backend::attention_forward/backward) on the
// CPU against the unfused composite of scaled_dot_product_attention, its oracle: values and the
// gradients of q, k and v, with causal masks (offset or not), padding and arbitrary additive
// masks, lengths that fit no tile, T_q != T_k, dropout (the same Philox draw, so bit for bit the
// same keep pattern), bfloat16, a fully blocked row (NaN), finite differences, errors, dispatch.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backends/attention/attention_cpu.h"
#include "core/profiler.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;
using loom::indexing::Slice;
namespace F = loom::nn::functional;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Turns the fused path on (or off) for `device` inside a scope, then back to the default.
struct FusedScope {
  Device device;
  FusedScope(Device d, bool on) : device(d) { F::set_fused_attention(d, on); }
  ~FusedScope() { F::reset_fused_attention(device); }
};

// Whether `t` came out of the fused op (its node, or the node of the reshape after it).
bool from_fused(const Tensor& t) {
  for (auto node = t.grad_fn(); node; node = node->inputs.empty() ? nullptr : node->inputs[0].node)
    if (node->name == "scaled_dot_product_attention") return true;
  return false;
}

struct Result {
  Tensor out, dq, dk, dv;
  bool fused = false;
};

// out = attention(q, k, v) and the gradients of sum(out * weight), with fused attention on or
// off; the same seed before each run gives both the same dropout draw.
Result attend(const Tensor& q, const Tensor& k, const Tensor& v, const F::AttentionOptions& o,
              bool fused, uint64_t seed = 7) {
  FusedScope scope(q.device(), fused);
  manual_seed(seed);
  Tensor qq = q.detach().requires_grad_(true), kk = k.detach().requires_grad_(true),
         vv = v.detach().requires_grad_(true);
  Tensor out = F::scaled_dot_product_attention(qq, kk, vv, o);
  const Tensor weight =
      cos(arange_f(0.0f, static_cast<float>(out.numel()), 1.0f, q.device()).reshape(out.shape()) *
          0.37f);
  sum(out.to(DType::Float32) * weight).backward();
  return {out.detach(), qq.grad(), kk.grad(), vv.grad(), from_fused(out)};
}

Tensor as_float(const Tensor& t) { return t.to(DType::Float32).to(Device::CPU); }

void check_same(const Result& fused, const Result& ref, float rtol, float atol,
                const std::string& what) {
  check_close(as_float(fused.out), as_float(ref.out), rtol, atol, what + " out");
  check_close(as_float(fused.dq), as_float(ref.dq), rtol, atol, what + " dq");
  check_close(as_float(fused.dk), as_float(ref.dk), rtol, atol, what + " dk");
  check_close(as_float(fused.dv), as_float(ref.dv), rtol, atol, what + " dv");
}

// Fused against unfused on [B, H, T, d] float32 inputs.
void compare(int64_t tq, int64_t tk, int64_t d, const F::AttentionOptions& o,
             const std::string& what, int64_t batch = 2, int64_t heads = 3) {
  manual_seed(tq * 1000 + tk * 10 + d);
  const Tensor q = randn({batch, heads, tq, d}), k = randn({batch, heads, tk, d}),
               v = randn({batch, heads, tk, d});
  const Result fused = attend(q, k, v, o, true), ref = attend(q, k, v, o, false);
  REQUIRE(fused.fused);
  REQUIRE_FALSE(ref.fused);
  check_same(fused, ref, 1e-4f, 2e-5f, what);
}

}  // namespace

TEST_CASE("fused attention equals the unfused path, values and gradients, at odd lengths") {
  for (int64_t t : {1, 17, 33, 100}) compare(t, t, 16, {}, "T=" + std::to_string(t));
  compare(5, 23, 8, {}, "T_q 5 != T_k 23");
  compare(17, 17, 5, {}, "head_dim 5");
}

TEST_CASE("fused causal attention equals the unfused path, with and without a query offset") {
  for (int64_t t : {1, 17, 33})
    compare(t, t, 16, {.causal = true}, "causal T=" + std::to_string(t));
  compare(7, 40, 16, {.causal = true, .query_offset = 33}, "causal offset 33");
  compare(9, 40, 8, {.causal = true, .query_offset = 5}, "causal offset 5 (late keys hidden)");
}

TEST_CASE("fused attention takes a padding mask and an arbitrary additive mask, unmaterialised") {
  const int64_t batch = 2, tk = 19;
  // Padding [B, 1, 1, T_k]: the last 4 keys of sequence 1 are padding.
  std::vector<float> pad(batch * tk, 0.0f);
  for (int64_t j = tk - 4; j < tk; ++j) pad[tk + j] = -kInf;
  const Tensor padding = F::padding_mask(tensor(pad, {batch, tk}));  // [B, 1, 1, T_k]
  compare(11, tk, 16, {.mask = padding}, "padding mask", batch);
  compare(11, tk, 16, {.mask = padding, .causal = true, .query_offset = 8}, "padding + causal",
          batch);
  // A bias broadcast over the batch [H, T_q, T_k] (Swin-like) and one full-size mask.
  manual_seed(3);
  compare(11, tk, 8, {.mask = randn({3, 11, tk})}, "bias [H, T_q, T_k]", batch);
  compare(11, tk, 8, {.mask = randn({batch, 3, 11, tk}) * 2.0f}, "full additive mask", batch);
}

TEST_CASE("fused attention reads heads split out of a projection (strided views)") {
  manual_seed(11);
  const int64_t b = 2, t = 13, h = 4, d = 8;
  const Tensor x = randn({b, t, 3 * h * d});
  auto head = [&](int64_t i) {  // [B, T, h*d] slice -> [B, h, T, d], strided
    return x.narrow(2, i * h * d, h * d).reshape({b, t, h, d}).transpose(1, 2);
  };
  const F::AttentionOptions o{.causal = true};
  check_same(attend(head(0), head(1), head(2), o, true),
             attend(head(0), head(1), head(2), o, false), 1e-4f, 2e-5f, "strided heads");
}

TEST_CASE("without gradients fused attention reads a KV cache's window in place") {
  // A cache (2, B, h, capacity, d) holding keys and values side by side, as nn::KVCache:
  // the first `filled` positions of each head are a window whose matrices lie capacity * d
  // apart. The fused forward reads them there (AttentionArgs::kv_stride), with no copy.
  manual_seed(12);
  const int64_t b = 2, h = 3, capacity = 20, filled = 13, d = 8;
  const Tensor cache = randn({2, b, h, capacity, d});
  const Tensor k = cache.select(0, 0).narrow(2, 0, filled);  // (B, h, 13, d), strided
  const Tensor v = cache.select(0, 1).narrow(2, 0, filled);
  REQUIRE_FALSE(k.is_contiguous());
  for (const int64_t tq : {1, 4}) {
    const Tensor q = randn({b, h, tq, d});
    const F::AttentionOptions o{.causal = true, .query_offset = filled - tq};
    const Tensor expected = attend(q, k, v, o, false).out;
    NoGradGuard no_grad;
    FusedScope scope(Device::CPU, true);
    check_close(F::scaled_dot_product_attention(q, k, v, o), expected, 1e-4f, 2e-5f,
                "cache window, " + std::to_string(tq) + " queries");
    // The kernel itself, given the window's matrices and their stride.
    Tensor out = Tensor::empty({b * h, tq, d}), lse = Tensor::empty({b * h, tq});
    const AttentionArgs args{.n = b * h,
                             .q_len = tq,
                             .kv_len = filled,
                             .head_dim = d,
                             .kv_stride = capacity * d,
                             .scale = 1.0f / std::sqrt(8.0f),
                             .causal = true,
                             .query_offset = filled - tq};
    cpu_backend().attention_forward(q.reshape({b * h, tq, d}), k.reshape({b * h, filled, d}),
                                    v.reshape({b * h, filled, d}), Tensor(), args, out, lse);
    check_close(out.reshape({b, h, tq, d}), expected, 1e-4f, 2e-5f, "kernel, kv_stride");
  }
  // One key and value matrix broadcast over the heads (stride 0) overlaps itself: copied.
  NoGradGuard no_grad;
  const Tensor q = randn({1, h, 2, d}), shared = randn({1, 1, filled, d});
  const Tensor kb = shared.expand({1, h, filled, d}), vb = (shared * 2.0f).expand(kb.shape());
  const Tensor unfused = F::scaled_dot_product_attention(q, kb, vb);
  FusedScope scope(Device::CPU, true);
  check_close(F::scaled_dot_product_attention(q, kb, vb), unfused, 1e-4f, 2e-5f,
              "broadcast keys and values");
}

TEST_CASE("fused attention dropout draws the unfused path's keep pattern from the same seed") {
  const F::AttentionOptions o{.dropout_p = 0.3f, .training = true, .causal = true};
  compare(17, 17, 8, o, "dropout causal");
  compare(6, 33, 16, {.dropout_p = 0.5f, .training = true}, "dropout T_q != T_k");
  // Both reserve the same counters: the next random number after either is the same.
  const Tensor q = randn({1, 2, 9, 8});
  attend(q, q, q, o, true, 99);
  const float after_fused = rand({1}).item();
  attend(q, q, q, o, false, 99);
  CHECK(rand({1}).item() == after_fused);
  // Not training: no dropout, no counters.
  manual_seed(5);
  {
    FusedScope scope(Device::CPU, true);
    F::scaled_dot_product_attention(q, q, q, {.dropout_p = 0.3f, .training = false});
  }
  const float next = rand({1}).item();
  manual_seed(5);
  CHECK(rand({1}).item() == next);
}

// The oracle is the unfused path on the upcast values: the fused kernel computes in float32 on
// them and rounds once, so only that rounding (and the inputs' gradients') differs.
TEST_CASE("fused attention in bfloat16 matches the unfused path within bf16 tolerance") {
  manual_seed(21);
  const Tensor q = randn({2, 2, 17, 16}).to(DType::BFloat16),
               k = randn({2, 2, 33, 16}).to(DType::BFloat16),
               v = randn({2, 2, 33, 16}).to(DType::BFloat16);
  for (bool causal : {false, true}) {
    const F::AttentionOptions o{.causal = causal, .query_offset = causal ? 16 : 0};
    const Result fused = attend(q, k, v, o, true);
    const Result ref = attend(as_float(q), as_float(k), as_float(v), o, false);
    REQUIRE(fused.fused);
    CHECK(fused.out.dtype() == DType::BFloat16);
    CHECK(fused.dq.dtype() == DType::BFloat16);
    check_same(fused, ref, 3e-2f, 3e-2f, causal ? "bf16 causal" : "bf16");
  }
}

TEST_CASE("under autocast fused attention on float32 inputs runs in bfloat16") {
  manual_seed(22);
  const Tensor q = randn({1, 2, 9, 8}), k = randn({1, 2, 9, 8}), v = randn({1, 2, 9, 8});
  FusedScope scope(Device::CPU, true);
  Tensor qq = q.detach().requires_grad_(true);
  Tensor out;
  {
    AutocastGuard amp;
    out = F::scaled_dot_product_attention(qq, k, v, {.causal = true});
  }
  CHECK(out.dtype() == DType::BFloat16);
  CHECK(from_fused(out));
  sum(out.to(DType::Float32)).backward();
  CHECK(qq.grad().dtype() == DType::Float32);  // through the recorded cast
  const Tensor ref = F::scaled_dot_product_attention(q, k, v, {.causal = true});
  check_close(as_float(out), ref, 3e-2f, 3e-2f, "autocast");
}

TEST_CASE("a fully blocked query row gives NaN in the fused path, as in the unfused one") {
  manual_seed(23);
  const Tensor q = randn({1, 1, 4, 8}), k = randn({1, 1, 6, 8}), v = randn({1, 1, 6, 8});
  std::vector<float> m(4 * 6, 0.0f);
  for (int j = 0; j < 6; ++j) m[2 * 6 + j] = -kInf;  // query 2 sees no key
  m[0 * 6 + 5] = -kInf;
  const Tensor mask = tensor(m, {4, 6});
  FusedScope scope(Device::CPU, true);
  const Tensor fused = F::scaled_dot_product_attention(q, k, v, {.mask = mask});
  F::set_fused_attention(Device::CPU, false);
  const Tensor ref = F::scaled_dot_product_attention(q, k, v, {.mask = mask});
  const std::vector<float> f = fused.to_vector(), r = ref.to_vector();
  for (int c = 0; c < 8; ++c) {
    CHECK(std::isnan(f[2 * 8 + c]));
    CHECK(std::isnan(r[2 * 8 + c]));
  }
  check_close(fused.narrow(2, 0, 2), ref.narrow(2, 0, 2), 1e-5f, 1e-6f, "rows 0-1");
  check_close(fused.narrow(2, 3, 1), ref.narrow(2, 3, 1), 1e-5f, 1e-6f, "row 3");
}

// One problem set through both CPU kernels of backends/attention: the reference (a query row
// at a time) and the tiled one (small matrix products), forward and backward.
struct KernelRun {
  Tensor out, lse, dq, dk, dv;
};
KernelRun run_kernels(bool tiled, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& mask, const AttentionArgs& a) {
  KernelRun r{zeros(q.shape()), zeros({a.n, a.q_len}), zeros(q.shape()), zeros(k.shape()),
              zeros(v.shape())};
  const Tensor dout = philox_tensor(q.shape(), 99);
  (tiled ? cpu::attention_forward_tiled : cpu::attention_forward_reference)(q, k, v, mask, a,
                                                                            r.out, r.lse);
  (tiled ? cpu::attention_backward_tiled : cpu::attention_backward_reference)(
      dout, q, k, v, mask, r.out, r.lse, a, r.dq, r.dk, r.dv);
  return r;
}

TEST_CASE("the CPU's tiled attention kernels give the reference kernels' values and gradients") {
  struct Shape4 {
    int64_t n, q_len, kv_len, head_dim;
    bool causal;
    int64_t query_offset;
    float dropout_p;
    bool mask;
  };
  // Lengths and head dims that fill no vector (13, 21, 20, 7) and ones that do (50 x 32, a
  // ViT's; 64); causal with and without an offset; dropout; a broadcast additive mask.
  for (const Shape4& c : {Shape4{3, 13, 21, 20, false, 0, 0.0f, true},
                          Shape4{2, 5, 12, 7, true, 7, 0.0f, false},
                          Shape4{2, 16, 16, 64, true, 0, 0.2f, false},
                          Shape4{4, 50, 50, 32, false, 0, 0.1f, true}}) {
    CAPTURE(c.q_len);
    CAPTURE(c.kv_len);
    CAPTURE(c.head_dim);
    const Tensor q = philox_tensor({c.n, c.q_len, c.head_dim}, 1) * 2.0f;
    const Tensor k = philox_tensor({c.n, c.kv_len, c.head_dim}, 2) * 2.0f;
    const Tensor v = philox_tensor({c.n, c.kv_len, c.head_dim}, 3);
    Tensor mask;
    if (c.mask) {  // [1, q_len, kv_len] broadcast over the problems, one row blocked entirely
      mask = philox_tensor({1, c.q_len, c.kv_len}, 4);
      mask.index_put_({0, 1}, -kInf);
      mask = mask.expand({c.n, c.q_len, c.kv_len});
    }
    AttentionArgs a{.n = c.n, .q_len = c.q_len, .kv_len = c.kv_len, .head_dim = c.head_dim,
                    .kv_stride = c.kv_len * c.head_dim,
                    .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                    .causal = c.causal, .query_offset = c.query_offset,
                    .dropout_p = c.dropout_p, .seed = 5, .offset = 11};
    const KernelRun tiled = run_kernels(true, q, k, v, mask, a);
    const KernelRun ref = run_kernels(false, q, k, v, mask, a);
    check_close(tiled.out, ref.out, 1e-5f, 1e-6f, "out");
    check_close(tiled.lse, ref.lse, 1e-5f, 1e-6f, "lse");
    check_close(tiled.dq, ref.dq, 1e-4f, 1e-5f, "dq");
    check_close(tiled.dk, ref.dk, 1e-4f, 1e-5f, "dk");
    check_close(tiled.dv, ref.dv, 1e-4f, 1e-5f, "dv");
    if (c.mask) CHECK(std::isnan(tiled.out.index({0, 1, 0}).item<float>()));  // the blocked row
  }
}

// The decoding kernel sums the lanes of 16 keys' products at once (sum_lanes_16); each score
// must be the bits of summing that key's lanes alone (sum_lanes), so that a key's score does not
// depend on whether it falls in a block of 16. Values of mixed sizes make the order matter.
TEST_CASE("sum_lanes_16 gives each vector's sum_lanes, to the bit") {
  int64_t wrong = 0, order_matters = 0;
  for (uint64_t trial = 0; trial < 50; ++trial) {
    cpu::Vec16 p[16];
    for (int j = 0; j < 16; ++j)
      for (int l = 0; l < 16; ++l) {
        const uint64_t counter = (trial * 16 + static_cast<uint64_t>(j)) * 16 + l;
        const float x = philox_uniform(counter, 8) - 0.5f;
        p[j][l] = x * std::ldexp(1.0f, static_cast<int>(philox_uniform(counter, 9) * 40) - 20);
      }
    float sums[16];
    cpu::sum_lanes_16(p, sums);
    for (int j = 0; j < 16; ++j) {
      const float one = cpu::sum_lanes(p[j]);
      wrong += std::memcmp(&sums[j], &one, sizeof one) != 0;
      float in_turn = 0.0f;  // the lanes added one after another: another order
      for (int l = 0; l < 16; ++l) in_turn += p[j][l];
      order_matters += in_turn != one;
    }
  }
  CHECK(wrong == 0);
  CHECK(order_matters > 0);  // the values tell the orders apart
}

TEST_CASE("the CPU's decoding attention kernel gives the reference kernel's values") {
  struct Case {
    int64_t n, q_len, kv_len, head_dim, capacity;
    bool causal;
    float dropout_p;
    bool mask;
  };
  // A decoding step's problems: one query or a few (a beam's), keys and values in a cache
  // window whose matrices lie `capacity` rows apart, or contiguous; head dims that fill no
  // vector (7) and ones that do (64); one key; causal with the queries last; dropout; a mask
  // with one query's every key blocked (NaN).
  // 37 keys: two blocks of 16 scored together and 5 one by one.
  for (const Case& c : {Case{6, 1, 13, 64, 20, true, 0.0f, false},
                        Case{4, 1, 37, 32, 40, false, 0.0f, false},
                        Case{5, 4, 24, 64, 24, false, 0.0f, true},
                        Case{3, 8, 21, 7, 30, true, 0.3f, false},
                        Case{4, 2, 1, 16, 9, false, 0.0f, false},
                        Case{2, 3, 11, 32, 11, false, 0.2f, true}}) {
    CAPTURE(c.q_len);
    CAPTURE(c.kv_len);
    CAPTURE(c.head_dim);
    const int64_t d = c.head_dim;
    const Tensor q = philox_tensor({c.n, c.q_len, d}, 1) * 2.0f;
    const Tensor k_cache = philox_tensor({c.n, c.capacity, d}, 2) * 2.0f;
    const Tensor v_cache = philox_tensor({c.n, c.capacity, d}, 3);
    Tensor mask;
    if (c.mask) {  // [n, q_len, kv_len], query 1's every key blocked
      mask = philox_tensor({c.n, c.q_len, c.kv_len}, 4);
      mask.index_put_({Slice(), 1}, -kInf);
    }
    const AttentionArgs a{.n = c.n, .q_len = c.q_len, .kv_len = c.kv_len, .head_dim = d,
                          .kv_stride = c.capacity * d,
                          .scale = 1.0f / std::sqrt(static_cast<float>(d)), .causal = c.causal,
                          .query_offset = c.kv_len - c.q_len, .dropout_p = c.dropout_p,
                          .seed = 5, .offset = 11};
    // The reference reads contiguous K and V: the window's first kv_len rows, copied.
    const Tensor k = k_cache.narrow(1, 0, c.kv_len), v = v_cache.narrow(1, 0, c.kv_len);
    AttentionArgs dense = a;
    dense.kv_stride = c.kv_len * d;
    Tensor out = zeros(q.shape()), lse = zeros({c.n, c.q_len});
    Tensor ref_out = zeros(q.shape()), ref_lse = zeros({c.n, c.q_len});
    cpu::attention_forward_decoding(q, k, v, mask, a, out, lse);
    cpu::attention_forward_reference(q, k.contiguous(), v.contiguous(), mask, dense, ref_out,
                                     ref_lse);
    if (c.mask) {
      CHECK(std::isnan(out.index({0, 1, 0}).item<float>()));
      CHECK(std::isnan(lse.index({0, 1}).item<float>()));
      out.index_put_({Slice(), 1}, 0.0f), ref_out.index_put_({Slice(), 1}, 0.0f);
      lse.index_put_({Slice(), 1}, 0.0f), ref_lse.index_put_({Slice(), 1}, 0.0f);
    }
    check_close(out, ref_out, 1e-5f, 1e-6f, "out");
    check_close(lse, ref_lse, 1e-5f, 1e-6f, "lse");
  }
}

TEST_CASE("fused attention gradients match finite differences") {
  manual_seed(24);
  FusedScope scope(Device::CPU, true);
  const Tensor mask = randn({3, 5});
  gradcheck(
      [&](const std::vector<Tensor>& in) {
        const Tensor out = F::scaled_dot_product_attention(
            in[0], in[1], in[2], {.mask = mask, .causal = true, .query_offset = 2});
        return sum(out * out);
      },
      {randn({1, 2, 3, 4}), randn({1, 2, 5, 4}), randn({1, 2, 5, 4})}, 1e-2f, 2e-2f, 2e-3f,
      "fused attention");
}

TEST_CASE("the attention kernels reject bad shapes and dtypes, naming the op") {
  Backend& be = cpu_backend();
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 4});
  Tensor out = Tensor::empty({2, 3, 4}), lse = Tensor::empty({2, 3});
  const AttentionArgs args{.n = 2, .q_len = 3, .kv_len = 5, .head_dim = 4};
  expect_error(
      [&] {
        be.attention_forward(q, randn({2, 6, 4}), v, Tensor(), args, out, lse);
      },
      {"attention_forward", "key", "[2,6,4]", "[2,5,4]"});
  expect_error([&] { be.attention_forward(q, k, v.to(DType::BFloat16), Tensor(), args, out, lse); },
               {"attention_forward", "value", "bfloat16", "float32"});
  expect_error(
      [&] {
        be.attention_forward(q, k, v, randn({2, 3, 4}), args, out, lse);
      },
      {"attention_forward", "mask", "[2,3,4]"});
  Tensor bad_lse = Tensor::empty({2, 4});
  expect_error([&] { be.attention_forward(q, k, v, Tensor(), args, out, bad_lse); },
               {"attention_forward", "lse"});
  AttentionArgs dropped = args;
  dropped.dropout_p = 1.0f;
  expect_error([&] { be.attention_forward(q, k, v, Tensor(), dropped, out, lse); },
               {"attention_forward", "dropout_p"});
  // K and V read in place: rows contiguous, matrices kv_stride apart, as the strides must say.
  const Tensor buffer = randn({2, 7, 4});
  AttentionArgs strided = args;
  strided.kv_stride = 28;
  expect_error(
      [&] { be.attention_forward(q, buffer.narrow(1, 0, 5), k, Tensor(), strided, out, lse); },
      {"attention_forward", "value", "strides [20,4,1]", "[28,4,1]"});
  strided.kv_stride = 12;
  expect_error([&] { be.attention_forward(q, k, v, Tensor(), strided, out, lse); },
               {"attention_forward", "kv_stride 12", "20"});
  Tensor dq = Tensor::empty({2, 3, 4}), dk = Tensor::empty({2, 5, 4}),
         dv = Tensor::empty({2, 4, 4});
  expect_error([&] { be.attention_backward(q, q, k, v, Tensor(), out, lse, args, dq, dk, dv); },
               {"attention_backward", "dv", "[2,4,4]"});
  strided.kv_stride = 28;
  expect_error(
      [&] {
        be.attention_backward(q, q, buffer.narrow(1, 0, 5), buffer.narrow(1, 0, 5), Tensor(), out,
                              lse, strided, dq, dk, dk);
      },
      {"attention_backward", "kv_stride 28", "contiguous"});
  FusedScope scope(Device::CPU, true);
  expect_error(
      [&] {
        F::scaled_dot_product_attention(randn({1, 2, 3, 4}), randn({1, 2, 5, 4}),
                                        randn({1, 2, 5, 4}), {.mask = randn({4, 5})});
      },
      {"scaled_dot_product_attention", "[4,5]"});
}

TEST_CASE("attention dispatch: weights requested or a mask needing its gradient run unfused") {
  manual_seed(25);
  const Tensor q = randn({1, 2, 5, 4}).requires_grad_(true);
  FusedScope scope(Device::CPU, true);
  CHECK(from_fused(F::scaled_dot_product_attention(q, q, q)));
  Tensor weights;
  const Tensor with_weights = F::scaled_dot_product_attention(q, q, q, {.attn_weights = &weights});
  CHECK_FALSE(from_fused(with_weights));
  CHECK(weights.shape() == Shape{1, 2, 5, 5});
  Tensor bias = randn({2, 5, 5}).requires_grad_(true);
  const Tensor biased = F::scaled_dot_product_attention(q, q, q, {.mask = bias});
  CHECK_FALSE(from_fused(biased));
  sum(biased).backward();
  CHECK(bias.grad().defined());
  // The defaults (functional_attention.cpp): the CPU fuses only float32 decoding (at most
  // kAttentionDecodeQueries queries, no gradients); the GPU fuses bfloat16.
  F::reset_fused_attention(Device::CPU);
  CHECK_FALSE(F::fused_attention_enabled(Device::CPU));
  CHECK_FALSE(from_fused(F::scaled_dot_product_attention(q, q, q)));  // 5 queries with gradients
  CHECK_FALSE(from_fused(F::scaled_dot_product_attention(q.to(DType::BFloat16),
                                                         q.to(DType::BFloat16),
                                                         q.to(DType::BFloat16))));
  CHECK(F::fused_attention_enabled(Device::CUDA));
  // Without gradients there is no node to tell the paths apart: the profiler counts the fused
  // kernel's calls.
  const auto fused_calls = [](const Tensor& query, const Tensor& keys) {
    NoGradGuard no_grad;
    profiler::Profile profile;
    F::scaled_dot_product_attention(query, keys, keys);
    int64_t calls = 0;
    for (const profiler::Row& row : profile.key_averages())
      if (row.name == "attention_forward") calls += row.calls;
    return calls;
  };
  const Tensor keys = randn({1, 2, 12, 4});
  CHECK(fused_calls(randn({1, 2, kAttentionDecodeQueries, 4}), keys) == 1);
  CHECK(fused_calls(randn({1, 2, kAttentionDecodeQueries + 1, 4}), keys) == 0);
  CHECK(fused_calls(randn({1, 2, 1, 4}).to(DType::BFloat16), keys.to(DType::BFloat16)) == 0);
}
