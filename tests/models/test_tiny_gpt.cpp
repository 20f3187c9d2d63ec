// The tiny GPT of the learning path's chapter 05b (examples/learn/tiny_gpt.h): its last stage is
// models::GPT written head by head (the same logits from the same weights), and every stage
// that looks at the past looks at the past only.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "examples/learn/tiny_gpt.h"
#include "models/gpt.h"

using namespace loom;

namespace {

// The same sizes for both models: 256 bytes, context 16, 2 blocks of 4 heads, width 32.
const tiny_gpt::Config kTiny{
    .vocab_size = 256, .block_size = 16, .n_embd = 32, .n_head = 4, .n_layer = 2};
const models::GPTConfig kGPT{.vocab_size = 256,
                             .context = 16,
                             .n_layer = 2,
                             .n_head = 4,
                             .d_model = 32,
                             .dropout = 0.0f};

// "h.0.attn.heads.3.key.weight" -> "h.0.attn.c_attn" and the parts {3, "key", "weight"}.
struct HeadParameter {
  std::string c_attn;
  int64_t head;
  std::string role, kind;
};

bool parse_head_parameter(const std::string& name, HeadParameter& out) {
  const std::string marker = ".heads.";
  const size_t at = name.find(marker);
  if (at == std::string::npos) return false;
  const size_t head_end = name.find('.', at + marker.size());
  const size_t role_end = name.find('.', head_end + 1);
  out = {name.substr(0, at) + ".c_attn", std::stoll(name.substr(at + marker.size())),
         name.substr(head_end + 1, role_end - head_end - 1), name.substr(role_end + 1)};
  return true;
}

// models::GPT's state_dict from the tiny GPT's parameters: every name is the same but the
// heads', whose query, key and value layers stack into c_attn as GPT-2 lays it out, all the
// queries (head 0, 1, ...), then all the keys, then all the values: [3C, C] and [3C].
std::map<std::string, Tensor> as_gpt_state(const tiny_gpt::GPT& tiny) {
  std::map<std::string, Tensor> state;
  std::map<std::string, std::map<std::string, std::vector<Tensor>>> pieces;  // c_attn.kind -> role
  for (const auto& [name, p] : tiny.named_parameters()) {
    HeadParameter hp;
    if (!parse_head_parameter(name, hp)) {
      state[name] = p;
      continue;
    }
    std::vector<Tensor>& role = pieces[hp.c_attn + "." + hp.kind][hp.role];
    if (static_cast<int64_t>(role.size()) <= hp.head) role.resize(hp.head + 1);
    role[hp.head] = p;
  }
  for (auto& [name, roles] : pieces) {
    std::vector<Tensor> rows;
    for (const char* role : {"query", "key", "value"})
      for (const Tensor& t : roles[role]) rows.push_back(t);
    state[name] = cat(rows, 0);
  }
  return state;
}

// Every parameter of `model` redrawn ~ N(0, 0.3), so that LayerNorm gains and biases, which
// start at 1 and 0, take part in the comparison too.
void randomize(nn::Module& model) {
  NoGradGuard no_grad;
  for (auto& p : model.parameters()) p.copy_(randn(p.shape()) * 0.3f);
}

}  // namespace

TEST_CASE("tiny GPT: its last stage gives models::GPT's logits for the same weights") {
  manual_seed(0);
  tiny_gpt::GPT tiny(kTiny);
  randomize(tiny);
  models::GPT gpt(kGPT);
  // strict: every tensor of models::GPT is set, and none of the tiny GPT's is left over
  gpt.load_state_dict(as_gpt_state(tiny), true);
  CHECK(tiny.num_parameters() == gpt.num_parameters());
  const Tensor ids = randint(0, 256, {3, 16});  // (B, T)
  const Tensor expected = gpt.forward(ids);     // (B, T, vocab)
  const Tensor logits = tiny.forward(ids);      // (B, T, vocab)
  REQUIRE(logits.shape() == expected.shape());
  CHECK(max(abs(logits - expected)).item() < 1e-4f);
  CHECK(logits.allclose(expected, 1e-4, 1e-4));
  // Shorter sequences read the first rows of the position table in both.
  const Tensor prefix = ids.narrow(1, 0, 5);
  CHECK(tiny.forward(prefix).allclose(gpt.forward(prefix), 1e-4, 1e-4));
}

TEST_CASE("tiny GPT: every stage is causal, a later byte leaves earlier logits unchanged") {
  for (int stage = 1; stage <= 6; ++stage) {
    CAPTURE(stage);
    manual_seed(1);
    const auto model = tiny_gpt::make_stage(stage, kTiny);
    randomize(*model);
    const Tensor ids = randint(0, 256, {2, 12});  // (B, T)
    Tensor changed = ids.clone();
    changed.index_put_({indexing::Slice(), 7}, (ids.index({0, 7}).item<int64_t>() + 1) % 256);
    const Tensor a = model->forward(ids), b = model->forward(changed);  // (B, T, vocab)
    CHECK(a.narrow(1, 0, 7).allclose(b.narrow(1, 0, 7), 0.0, 0.0));  // positions 0..6: the same
    CHECK_FALSE(a.narrow(1, 7, 1).allclose(b.narrow(1, 7, 1), 1e-3, 1e-3));  // 7 saw the change
  }
}

TEST_CASE("tiny GPT: causal_softmax spreads row t over 0..t only, evenly from zero scores") {
  const Tensor wei = tiny_gpt::causal_softmax(zeros({4, 4}));  // (T, T)
  const std::vector<float> expected = {1, 0, 0, 0, 1 / 2.f, 1 / 2.f, 0, 0,
                                       1 / 3.f, 1 / 3.f, 1 / 3.f, 0, 1 / 4.f, 1 / 4.f, 1 / 4.f,
                                       1 / 4.f};
  CHECK(wei.allclose(tensor(expected, {4, 4}), 1e-6, 1e-7));
  // Scores of any size keep the future at exactly 0 and each row summing to 1.
  manual_seed(2);
  const Tensor w = tiny_gpt::causal_softmax(randn({2, 5, 5}) * 10.0f);  // (B, T, T)
  CHECK(equal(w.triu(1), zeros({2, 5, 5})));
  CHECK(w.sum(-1).allclose(ones({2, 5}), 1e-5, 1e-6));
}
