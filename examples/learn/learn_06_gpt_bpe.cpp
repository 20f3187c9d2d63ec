// Chapter 06 (docs/learn/06-gpt-bpe.md): GPT and byte-pair encoding.
// Learns BPE merges from a short text and shows the first ones and how a sentence splits, then
// trains a tiny GPT on the token ids of that text and lets it continue a prompt greedily.
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {

const char* kText =
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog and the dog saw the "
    "cat. then the cat sat on the log and the dog sat on the mat. ";

// "the| cat| sat" — the bytes of each token, separated by '|'.
std::string pieces(const data::BPETokenizer& bpe, const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "|" : "") + bpe.token_bytes(ids[i]);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  learn::parse_args(argc, argv,
                    "Chapter 06 (docs/learn/06-gpt-bpe.md): BPE merges and a tiny GPT.");
  std::string corpus;
  for (int i = 0; i < 8; ++i) corpus += kText;
  const auto bpe = data::BPETokenizer::train(corpus, 256 + 20);  // 20 merges
  std::printf("the first merges (id: left + right):\n");
  for (size_t k = 0; k < 8; ++k) {
    const auto [left, right] = bpe.merges()[k];
    std::printf("  %zu: '%s' + '%s' -> '%s'\n", 256 + k, bpe.token_bytes(left).c_str(),
                bpe.token_bytes(right).c_str(), bpe.token_bytes(256 + k).c_str());
  }
  const std::string sentence = "the dog sat on the cat.";
  const std::vector<int64_t> ids = bpe.encode(sentence);
  std::printf("\n'%s': %zu bytes -> %zu tokens: %s\n", sentence.c_str(), sentence.size(),
              ids.size(), pieces(bpe, ids).c_str());

  // A GPT small enough to train in a second on the token stream.
  manual_seed(0);
  models::GPTConfig config{.vocab_size = bpe.vocab_size(),
                           .context = 16,
                           .n_layer = 2,
                           .n_head = 2,
                           .d_model = 32,
                           .dropout = 0.0f};
  models::GPT gpt(config);
  std::printf("\nGPT %s: %lld parameters (the formula of GPTConfig::num_parameters: %lld)\n",
              config.to_string().c_str(), static_cast<long long>(gpt.num_parameters()),
              static_cast<long long>(config.num_parameters()));
  const std::vector<int64_t> stream = bpe.encode(corpus);
  const auto n = static_cast<int64_t>(stream.size());
  const Tensor all = tensor_i64(stream, {n});
  optim::AdamW opt(gpt.parameters(), 1e-2f);
  float last = 0.0f;
  for (int step = 0; step < 150; ++step) {
    // 8 random windows; the target of each position is the next token.
    const std::vector<int64_t> starts = randint(0, n - config.context - 1, {8}).to_vector_i64();
    std::vector<Tensor> xs, ys;
    for (int64_t s : starts) {
      xs.push_back(all.narrow(0, s, config.context));
      ys.push_back(all.narrow(0, s + 1, config.context));
    }
    const Tensor loss = nn::functional::cross_entropy(gpt.forward(stack(xs)), stack(ys));
    opt.zero_grad();
    loss.backward();
    opt.step();
    last = loss.item();
    if (step % 50 == 0 || step == 149) std::printf("step %3d  loss %.3f\n", step, last);
  }
  const std::vector<int64_t> prompt = bpe.encode("the dog");
  const std::vector<int64_t> out = gpt.generate(prompt, 12);  // greedy, with the KV cache
  std::printf("\ngreedy continuation of 'the dog': '%s'\n", bpe.decode(out).c_str());
  return last < 1.5f && ids.size() < sentence.size() ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
