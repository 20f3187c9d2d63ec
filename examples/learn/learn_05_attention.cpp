// Chapter 05 (docs/learn/05-attention.md): attention and masks.
// Trains a one-layer, one-head causal attention model to copy the previous token (the answer at
// position t is the token at t - 1), then draws its attention weights as a heat map: the causal
// mask empties the upper triangle and training puts the weight on the diagonal just below.
// Then the same input with a key padding mask: the padded keys get no weight at all.
//   learn_05_attention [out.png]   (default learn_05_attention.png)
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;
namespace F = nn::functional;

namespace {

constexpr int64_t kVocab = 8, kLen = 8, kDim = 32;

struct CopyModel : nn::Module {
  std::shared_ptr<nn::Embedding> tokens, positions;
  std::shared_ptr<nn::MultiheadAttention> attn;
  std::shared_ptr<nn::Linear> head;
  CopyModel() {
    tokens = register_module("tokens", std::make_shared<nn::Embedding>(kVocab, kDim));
    positions = register_module("positions", std::make_shared<nn::Embedding>(kLen, kDim));
    attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(kDim, 1));
    head = register_module("head", std::make_shared<nn::Linear>(kDim, kVocab));
  }
  // ids [B, T] -> logits [B, T, vocab]; weights receives the attention [B, T, T].
  Tensor forward(const Tensor& ids, Tensor* weights, const Tensor& padding = Tensor()) const {
    const Tensor x = tokens->forward(ids) + positions->forward(arange(ids.size(1)));
    auto [y, w] = attn->forward_with_weights(x, x, x, F::causal_mask(ids.size(1)), padding);
    if (weights) *weights = w;
    return head->forward(x + y);
  }
};

}  // namespace

int main(int argc, char** argv) try {
  const std::string out = learn::picture_path(
      argc, argv,
      "Chapter 05 (docs/learn/05-attention.md): the attention map of a tiny trained model.");
  manual_seed(0);
  CopyModel model;
  optim::AdamW opt(model.parameters(), 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f);
  float loss_value = 0.0f;
  for (int step = 0; step < 120; ++step) {
    const Tensor ids = randint(0, kVocab, {16, kLen});
    // Targets: the previous token; position 0 has none (ignore_index -100).
    const Tensor target =
        cat({full({16, 1}, -100.0f).to(DType::Int64), ids.narrow(1, 0, kLen - 1)}, 1);
    const Tensor loss = F::cross_entropy(model.forward(ids, nullptr), target);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item();
    if (step % 100 == 0 || step == 119) std::printf("step %3d  loss %.4f\n", step, loss_value);
  }

  NoGradGuard no_grad;
  const Tensor ids = tensor_i64({3, 1, 4, 1, 5, 7, 2, 6}, {1, kLen});
  Tensor weights, padded;
  model.forward(ids, &weights);
  // Key padding: the last two positions are padding (nonzero = blocked) for every query.
  model.forward(ids, &padded, tensor_i64({0, 0, 0, 0, 0, 0, 1, 1}, {1, kLen}));
  std::vector<std::string> labels;
  for (int64_t id : ids.to_vector_i64()) labels.push_back(std::to_string(id));
  const data::Image left = data::labelled_heatmap(weights.select(0, 0), labels, labels,
                                                  "causal: query (row) -> key", 24);
  const data::Image right =
      data::labelled_heatmap(padded.select(0, 0), labels, labels, "causal + 2 padded keys", 24);
  data::write_png(data::tile({left, right}, 2, 8), out);

  std::printf("\nattention weights (row = query position, column = key position):\n");
  const std::vector<float> w = weights.to_vector();
  for (int64_t i = 0; i < kLen; ++i) {
    for (int64_t j = 0; j < kLen; ++j) std::printf(" %4.2f", w[static_cast<size_t>(i * kLen + j)]);
    std::printf("\n");
  }
  const float on_previous = weights.select(0, 0).select(0, 5).select(0, 4).item();
  const float on_padding = padded.select(0, 0).select(0, 7).narrow(0, 6, 2).sum().item();
  std::printf("query 5 -> key 4: %.2f;  query 7 -> the two padded keys: %.2f\nwrote %s\n",
              on_previous, on_padding, out.c_str());
  return loss_value < 0.5f && on_previous > 0.5f && on_padding == 0.0f ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
