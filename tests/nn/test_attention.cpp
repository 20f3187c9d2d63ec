// MultiheadAttention and scaled dot-product attention: PyTorch golden checks (self- and
// cross-attention, float/boolean/per-head masks, key padding, attention weights), gradient
// checks, mask invariants and error paths.
#include <cmath>
#include <limits>
#include <tuple>

#include "nn_golden.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

TEST_CASE("MultiheadAttention self-attention matches PyTorch with causal and padding masks") {
  nn::MultiheadAttention mha(8, 2);
  load_case_state(mha, "mha_self");
  auto in = case_inputs("mha_self");  // x [2,5,8], causal float mask [5,5], padding int64 [2,5]
  auto [out, weights] = mha.forward_with_weights(in[0], in[0], in[0], in[1], in[2]);
  check_close(weights, fixture("mha_self.weights"), 1e-4f, 1e-6f, "averaged weights");
  check_case("mha_self", out, in, &mha);
}

TEST_CASE("MultiheadAttention cross-attention matches PyTorch with a per-head float mask") {
  nn::MultiheadAttention mha(8, 2);
  load_case_state(mha, "mha_cross");
  auto in = case_inputs("mha_cross");  // q [2,3,8], k [2,5,8], v [2,5,8], mask [4,3,5]
  auto [out, weights] = mha.forward_with_weights(in[0], in[1], in[2], in[3], Tensor(), false);
  check_close(weights, fixture("mha_cross.weights"), 1e-4f, 1e-6f, "per-head weights");
  check_case("mha_cross", out, in, &mha);
}

TEST_CASE("MultiheadAttention over a shared key/value memory matches PyTorch, boolean mask") {
  nn::MultiheadAttention mha(8, 2);
  load_case_state(mha, "mha_memory");
  auto in = case_inputs("mha_memory");  // q [2,3,8], memory [2,5,8], int64 mask [3,5]
  check_case("mha_memory", mha.forward(in[0], in[1], in[1], in[2]), in, &mha);
}

TEST_CASE("MultiheadAttention without biases matches PyTorch's bias=False") {
  nn::MultiheadAttention mha(8, 2, 0.0f, false);
  CHECK(mha.named_parameters().size() == 2);  // in_proj_weight, out_proj.weight
  load_case_state(mha, "mha_nobias");
  auto in = case_inputs("mha_nobias");  // x [2,4,8]
  check_case("mha_nobias", mha.forward(in[0], in[0], in[0]), in, &mha);
}

TEST_CASE("MultiheadAttention's dropout zeroes attention weights in training and scales the rest") {
  manual_seed(31);
  nn::MultiheadAttention mha(8, 2, 0.5f);
  const Tensor x = randn({2, 4, 8});
  mha.eval();
  const auto [out_eval, w_eval] = mha.forward_with_weights(x, x, x, Tensor(), Tensor(), false);
  mha.train();
  const auto [out_train, w_train] = mha.forward_with_weights(x, x, x, Tensor(), Tensor(), false);
  // Inverted dropout on the probabilities (as PyTorch): each weight is dropped or doubled.
  const std::vector<float> e = w_eval.to_vector(), t = w_train.to_vector();
  int dropped = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (t[i] == 0.0f) {
      ++dropped;
    } else {
      CHECK(t[i] == doctest::Approx(2.0f * e[i]).epsilon(1e-5));
    }
  }
  CHECK(dropped > 0);
  CHECK(dropped < static_cast<int>(e.size()));
  CHECK(out_train.to_vector() != out_eval.to_vector());
  mha.eval();
  check_close(mha.forward(x, x, x), out_eval, 0.0f, 0.0f, "eval is deterministic");
}

TEST_CASE("a boolean mask and its additive form give the same attention") {
  manual_seed(4);
  nn::MultiheadAttention mha(4, 2);
  const Tensor x = randn({2, 3, 4});
  const Tensor blocked = tensor_i64({0, 1, 1, 0, 0, 1, 0, 0, 0}, {3, 3});
  const Tensor additive = F::additive_mask(blocked);
  const float inf = std::numeric_limits<float>::infinity();
  check_close(additive, masked_fill(zeros({3, 3}), blocked.to(DType::Float32), -inf), 0.0f, 0.0f,
              "additive_mask");
  check_close(mha.forward(x, x, x, blocked), mha.forward(x, x, x, additive), 0.0f, 0.0f,
              "bool vs float mask");
  // A padding mask equals the same blocking written as a per-sequence [B*heads, T, T] mask.
  const Tensor pad = tensor_i64({0, 0, 1, 0, 0, 0}, {2, 3});
  std::vector<float> per_head;
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) per_head.push_back(b == 0 && j == 2 ? -inf : 0.0f);
  check_close(mha.forward(x, x, x, Tensor(), pad),
              mha.forward(x, x, x, tensor(per_head, {4, 3, 3})), 1e-6f, 1e-7f, "key padding");
}

TEST_CASE("causal_mask blocks exactly the future positions") {
  const std::vector<float> m = F::causal_mask(4).to_vector();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const float v = m[i * 4 + j];
      CHECK((j > i ? std::isinf(v) && v < 0 : v == 0.0f));
    }
  // With it, changing a later token never changes an earlier output.
  manual_seed(8);
  nn::MultiheadAttention mha(4, 1);
  Tensor x = randn({1, 3, 4});
  const Tensor before = mha.forward(x, x, x, F::causal_mask(3)).narrow(1, 0, 2);
  Tensor x2 = x.clone();
  x2.narrow(1, 2, 1).copy_(randn({1, 1, 4}));
  const Tensor after = mha.forward(x2, x2, x2, F::causal_mask(3)).narrow(1, 0, 2);
  check_close(after, before, 1e-6f, 1e-7f, "causality");
}

TEST_CASE("scaled_dot_product_attention is softmax(QK^T/sqrt(d))V with weights and masks") {
  manual_seed(9);
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 2});
  Tensor weights;
  const Tensor out = F::scaled_dot_product_attention(q, k, v, Tensor(), 0.0f, false, &weights);
  const Tensor expected_w = softmax(matmul(q, k.transpose(1, 2)) / 2.0f, -1);  // sqrt(4) = 2
  check_close(weights, expected_w, 1e-5f, 1e-6f, "weights");
  check_close(out, matmul(expected_w, v), 1e-5f, 1e-6f, "output");
  gradcheck(
      [](const std::vector<Tensor>& t) {
        return weighted_sum(F::scaled_dot_product_attention(t[0], t[1], t[2], t[3]));
      },
      {q, k, v, randn({3, 5})}, 1e-2f, 2e-2f, 2e-3f, "sdpa");
  // Dropout acts on the probabilities, only in training: each is dropped or scaled by 1/(1-p).
  const Tensor eval_out = F::scaled_dot_product_attention(q, k, v, Tensor(), 0.5f, false);
  check_close(eval_out, out, 0.0f, 0.0f, "no dropout in eval");
  Tensor dropped_w;
  const Tensor train_out =
      F::scaled_dot_product_attention(q, k, v, Tensor(), 0.5f, true, &dropped_w);
  const std::vector<float> dw = dropped_w.to_vector(), ew = expected_w.to_vector();
  int dropped = 0;
  for (size_t i = 0; i < dw.size(); ++i) {
    dropped += dw[i] == 0.0f;
    CHECK((dw[i] == 0.0f || std::fabs(dw[i] - 2.0f * ew[i]) < 1e-5f));
  }
  CHECK(dropped > 0);
  check_close(train_out, matmul(dropped_w, v), 1e-5f, 1e-6f, "dropped weights used");
}

TEST_CASE("gradcheck: MultiheadAttention self and cross, all parameters") {
  manual_seed(10);
  nn::MultiheadAttention mha(4, 2);
  {
    NoGradGuard guard;
    mha.in_proj_bias.copy_(randn({12}) * 0.1f);
  }
  const Tensor x = randn({2, 3, 4}), mem = randn({2, 2, 4});
  gradcheck(
      [&](const std::vector<Tensor>& t) {
        return weighted_sum(mha.forward(t[0], t[0], t[0], F::causal_mask(3)));
      },
      {x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj->weight, mha.out_proj->bias}, 1e-2f,
      2e-2f, 2e-3f, "self-attention");
  mha.zero_grad();  // gradcheck reads .grad after one backward: start from none
  gradcheck(
      [&](const std::vector<Tensor>& t) { return weighted_sum(mha.forward(t[0], t[1], t[1])); },
      {x.detach().clone(), mem, mha.in_proj_weight}, 1e-2f, 2e-2f, 2e-3f, "cross-attention");
}

TEST_CASE("MultiheadAttention initialises like PyTorch") {
  manual_seed(12);
  nn::MultiheadAttention mha(16, 4);
  CHECK(mha.head_dim == 4);
  // xavier_uniform_ on [48, 16]: bound sqrt(6 / (16 + 48)).
  const float bound = std::sqrt(6.0f / 64.0f);
  for (float w : mha.in_proj_weight.to_vector()) CHECK(std::fabs(w) <= bound);
  for (float b : mha.in_proj_bias.to_vector()) CHECK(b == 0.0f);
  for (float b : mha.out_proj->bias.to_vector()) CHECK(b == 0.0f);
  const auto names = mha.named_parameters();
  REQUIRE(names.size() == 4);
  CHECK(names[0].first == "in_proj_weight");
  CHECK(names[3].first == "out_proj.bias");
}

TEST_CASE("MultiheadAttention rejects bad shapes, naming the layer") {
  check_error([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "10", "3"});
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = zeros({2, 5, 8});
  check_error(
      [&] {
        mha.forward(zeros({2, 5, 6}), x, x);
      },
      {"MultiheadAttention(embed_dim=8, num_heads=2)", "[2,5,6]"});
  check_error([&] { mha.forward(zeros({5, 8}), zeros({5, 8}), zeros({5, 8})); }, {"[5,8]"});
  check_error([&] { mha.forward(x, x, x, zeros({4, 5})); }, {"attn_mask", "[4,5]"});
  check_error([&] { mha.forward(x, x, x, zeros({3, 5, 5})); }, {"attn_mask", "[3,5,5]"});
  check_error(
      [&] {
        mha.forward(x, x, x, Tensor(), tensor_i64({0, 0}, {1, 2}));
      },
      {"key_padding_mask", "[1,2]"});
  check_error([&] { mha.forward(x, zeros({2, 4, 8}), zeros({2, 3, 8})); }, {"[2,4,8]", "[2,3,8]"});
  check_error(
      [&] {
        F::scaled_dot_product_attention(zeros({1, 2, 4}), zeros({1, 3, 4}), zeros({1, 3, 4}),
                                        zeros({2, 2}));
      },
      {"scaled_dot_product_attention", "[2,2]"});
}

// --- the one attention function: causal flag, query offset, mask helpers -----------------------

namespace {

// softmax(q k^T / sqrt(d) + mask) v written out, the reference for the fast paths.
Tensor reference_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.size(-1)));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  if (mask.defined()) scores = scores + mask;
  return matmul(softmax(scores, -1), v);
}

}  // namespace

TEST_CASE("causal_mask(T_q, T_k, offset) blocks key j exactly when j > offset + i") {
  for (auto [q_len, k_len, offset] :
       {std::tuple{4, 4, 0}, std::tuple{2, 5, 3}, std::tuple{3, 5, 0}, std::tuple{1, 6, 5}}) {
    const std::vector<float> m = F::causal_mask(q_len, k_len, offset).to_vector();
    for (int i = 0; i < q_len; ++i)
      for (int j = 0; j < k_len; ++j) {
        const float v = m[static_cast<size_t>(i * k_len + j)];
        CHECK((j > offset + i ? std::isinf(v) && v < 0 : v == 0.0f));
      }
  }
  check_close(F::causal_mask(4, 4, 0), F::causal_mask(4), 0.0f, 0.0f, "square form");
}

TEST_CASE("scaled_dot_product_attention's causal flag equals the explicit causal mask") {
  manual_seed(41);
  const Tensor q = randn({2, 2, 5, 4}), k = randn({2, 2, 5, 4}), v = randn({2, 2, 5, 3});
  const Tensor flag = F::scaled_dot_product_attention(q, k, v, {.causal = true});
  check_close(flag, F::scaled_dot_product_attention(q, k, v, F::causal_mask(5)), 0.0f, 0.0f,
              "causal flag vs causal_mask");
  check_close(flag, reference_attention(q, k, v, F::causal_mask(5)), 1e-5f, 1e-6f, "reference");
  // Fewer queries than keys, no offset: the first query sees the first key only (PyTorch's
  // is_causal alignment).
  const Tensor q3 = q.narrow(2, 0, 3);
  check_close(F::scaled_dot_product_attention(q3, k, v, {.causal = true}),
              reference_attention(q3, k, v, F::causal_mask(3, 5)), 1e-5f, 1e-6f, "T_q < T_k");
  // The flag combines with a mask: a padding mask blocks keys on top of the causal structure.
  const Tensor pad = F::padding_mask(tensor_i64({0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5}));
  check_close(F::scaled_dot_product_attention(q, k, v, {.mask = pad, .causal = true}),
              reference_attention(q, k, v, pad + F::causal_mask(5)), 1e-5f, 1e-6f,
              "causal + padding");
}

TEST_CASE("a query offset gives exactly the rows of the full causal attention (KV cache)") {
  manual_seed(42);
  const Tensor q = randn({2, 3, 6, 4}), k = randn({2, 3, 6, 4}), v = randn({2, 3, 6, 4});
  const Tensor full = F::scaled_dot_product_attention(q, k, v, {.causal = true});  // [2,3,6,4]
  for (int64_t past = 0; past < 6; ++past)
    for (int64_t n = 1; past + n <= 6; ++n) {
      INFO("past " << past << ", new " << n);
      // Queries [past, past + n) against the keys a cache would hold then: [0, past + n).
      const Tensor rows = F::scaled_dot_product_attention(
          q.narrow(2, past, n), k.narrow(2, 0, past + n), v.narrow(2, 0, past + n),
          {.causal = true, .query_offset = past});
      check_close(rows, full.narrow(2, past, n), 1e-5f, 1e-6f, "cached rows");
    }
}

TEST_CASE("padding_mask turns key padding into an additive [B, 1, 1, T_k] mask") {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor pad = tensor_i64({0, 0, 1, 0, 1, 1}, {2, 3});
  const Tensor mask = F::padding_mask(pad);
  CHECK(mask.shape() == Shape{2, 1, 1, 3});
  check_close(mask.reshape({2, 3}), tensor({0, 0, -inf, 0, -inf, -inf}, {2, 3}), 0.0f, 0.0f,
              "values");
  // A float key padding mask is already additive: only reshaped.
  const Tensor bias = tensor({0.5f, 0.0f, -1.0f}, {1, 3});
  check_close(F::padding_mask(bias), bias.reshape({1, 1, 1, 3}), 0.0f, 0.0f, "float");
  // With it, attention ignores the padded keys: the same as dropping them.
  manual_seed(43);
  const Tensor q = randn({2, 2, 4, 4}), k = randn({2, 2, 3, 4}), v = randn({2, 2, 3, 4});
  const Tensor out = F::scaled_dot_product_attention(q, k, v, mask);
  check_close(out.narrow(0, 0, 1),
              F::scaled_dot_product_attention(q.narrow(0, 0, 1), k.narrow(0, 0, 1).narrow(2, 0, 2),
                                              v.narrow(0, 0, 1).narrow(2, 0, 2)),
              1e-5f, 1e-6f, "padded keys dropped");
  check_error([] { F::padding_mask(zeros({3})); }, {"padding_mask", "[3]"});
}

TEST_CASE("scaled_dot_product_attention gives the same result for strided and contiguous heads") {
  // Heads split out of [B, T, heads, d] (MultiheadAttention's and GPT's layout) are copied into
  // a contiguous layout inside; the cache's evenly spaced views are read in place.
  manual_seed(44);
  const Tensor x = randn({2, 5, 3, 4});
  const Tensor heads = x.transpose(1, 2);  // [2, 3, 5, 4], strided
  const Tensor cache = randn({2, 3, 9, 4});
  const Tensor window = cache.narrow(2, 0, 5);  // [2, 3, 5, 4], evenly spaced
  for (const Tensor& kv : {heads, window}) {
    const Tensor out = F::scaled_dot_product_attention(heads, kv, kv, {.causal = true});
    check_close(out,
                reference_attention(heads.contiguous(), kv.contiguous(), kv.contiguous(),
                                    F::causal_mask(5)),
                1e-5f, 1e-6f, "layout");
  }
}

TEST_CASE("gradcheck: scaled_dot_product_attention through the causal path") {
  manual_seed(45);
  const Tensor q = randn({1, 2, 3, 4}), k = randn({1, 2, 3, 4}), v = randn({1, 2, 3, 2});
  gradcheck(
      [](const std::vector<Tensor>& t) {
        return weighted_sum(F::scaled_dot_product_attention(t[0], t[1], t[2], {.causal = true}));
      },
      {q, k, v}, 1e-2f, 2e-2f, 2e-3f, "causal");
  // Two new queries after two cached keys, with an additive bias on top.
  gradcheck(
      [](const std::vector<Tensor>& t) {
        return weighted_sum(F::scaled_dot_product_attention(
            t[0], t[1], t[2], {.mask = t[3], .causal = true, .query_offset = 2}));
      },
      {randn({1, 2, 2, 4}), randn({1, 2, 4, 4}), randn({1, 2, 4, 2}), randn({2, 4})}, 1e-2f, 2e-2f,
      2e-3f, "causal with offset and mask");
}

TEST_CASE("scaled_dot_product_attention rejects a bad query offset") {
  const Tensor x = zeros({1, 2, 3, 4});
  check_error(
      [&] { F::scaled_dot_product_attention(x, x, x, {.causal = true, .query_offset = -1}); },
      {"scaled_dot_product_attention", "query_offset -1"});
  check_error([&] { F::scaled_dot_product_attention(x, x, x, {.query_offset = 2}); },
              {"query_offset 2", "causal"});
  check_error([] { F::causal_mask(2, 3, -1); }, {"causal_mask", "-1"});
}
