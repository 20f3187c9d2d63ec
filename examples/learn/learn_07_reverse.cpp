// Chapter 07 (docs/learn/07-encoder-decoder.md): the encoder-decoder, beam search and BLEU.
// Trains a tiny Transformer to reverse sequences, draws its cross-attention (an anti-diagonal:
// output position t reads source position L-1-t), decodes with greedy and beam search and
// prints their log-probabilities and GNMT scores; then BLEU of a toy corpus step by step.
//   learn_07_reverse [out.png]   (default learn_07_reverse.png)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {
constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kVocab = 10, kLen = 6;

// Greedy (beam 1) and beam-4 decoding of one source with GNMT's alpha 0.6 -> {greedy, beam}.
std::vector<models::Translation> decode(models::Transformer& model, const char* when) {
  std::printf("\n%s, source 5 3 9 4 6 8:\n", when);
  std::vector<models::Translation> found;
  for (int64_t beam : {1, 4}) {
    found.push_back(
        models::beam_search(model, {{5, 3, 9, 4, 6, 8}}, kBos, kEos, 10, beam, 0.6f)[0]);
    std::printf("  %-8s", beam == 1 ? "greedy" : "beam 4");
    for (int64_t id : found.back().tokens) std::printf(" %lld", static_cast<long long>(id));
    std::printf("   log P %.4f  score %.4f\n", found.back().log_prob, found.back().score);
  }
  return found;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string out = learn::picture_path(
      argc, argv, "Chapter 07 (docs/learn/07-encoder-decoder.md): reversal, beam search, BLEU.");
  models::TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = kVocab;
  c.d_model = 32, c.n_head = 2, c.d_ff = 64, c.max_len = 16, c.dropout = 0.0f;
  c.n_encoder_layers = c.n_decoder_layers = 1;
  manual_seed(0);
  models::Transformer model(c);
  optim::Adam opt(model.parameters(), 1e-3f, 0.9f, 0.98f, 1e-9f);  // sec. 5.3
  float loss_value = 0.0f;
  std::vector<models::Translation> half;  // decoded after 100 steps
  for (int step = 0; step < 400; ++step) {
    opt.set_lr(optim::noam_lr(step + 1, c.d_model, 60, 1.0f));
    const Tensor src = randint(3, kVocab, {32, kLen});  // (B, L) tokens 3..9
    std::vector<int64_t> ids = src.to_vector_i64();
    for (size_t b = 0; b < ids.size(); b += kLen) std::reverse(&ids[b], &ids[b + kLen]);
    const Tensor rev = tensor_i64(ids, {32, kLen});  // the answer: each row reversed
    const Tensor bos = full({32, 1}, kBos).to(DType::Int64),
                 eos = full({32, 1}, kEos).to(DType::Int64);
    // Teacher forcing: the decoder reads bos + answer and predicts answer + eos.
    const Tensor logits = model.forward(src, cat({bos, rev}, 1));  // (B, L + 1, V)
    const Tensor loss = cross_entropy(logits, cat({rev, eos}, 1), kPad);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item();
    if (step % 100 == 0 || step == 399) std::printf("step %3d  loss %.4f\n", step, loss_value);
    if (step == 100) half = decode(model, "after 100 steps");
  }

  NoGradGuard no_grad;
  model.eval();
  std::vector<Tensor> cross;  // per decoder layer (B, heads, T, S)
  model.forward(tensor_i64({3, 4, 5, 6, 7, 8}, {1, kLen}),
                tensor_i64({kBos, 8, 7, 6, 5, 4, 3}, {1, kLen + 1}), &cross);
  const Tensor map = cross[0].select(0, 0).mean(0);  // heads averaged: (T, S)
  const std::vector<std::string> rows = {"bos", "8", "7", "6", "5", "4", "3"},
                                 cols = {"3", "4", "5", "6", "7", "8"};
  data::write_png(data::labelled_heatmap(map, rows, cols, "cross-attention: target -> source", 24),
                  out);
  // Row t predicts answer token t, the source's token L-1-t: its weight on that column.
  float on_mirror = 0.0f;
  for (int64_t t = 0; t < kLen; ++t) on_mirror += map.select(0, t).select(0, kLen - 1 - t).item();
  on_mirror /= kLen;

  const auto trained = decode(model, "after 400 steps");
  std::printf("cross-attention on the mirrored source position, mean of rows 0..5: %.2f\n",
              on_mirror);

  // BLEU by hand (Papineni et al. 2002): clipped n-gram precisions, brevity penalty.
  const std::vector<std::string> hyps = {"the cat sat on the mat", "a dog runs"},
                                 refs = {"the cat sat on a mat", "the dog runs fast"};
  const metrics::BleuStatistics s = metrics::bleu_statistics(hyps, {refs});
  std::printf("\nBLEU of 2 sentences: hypothesis length %lld, reference length %lld\n",
              static_cast<long long>(s.sys_len), static_cast<long long>(s.ref_len));
  double log_sum = 0.0;
  for (size_t n = 0; n < 4; ++n) {
    const double p = double(s.correct[n]) / double(s.total[n]);
    log_sum += std::log(p);
    std::printf("  %zu-grams: %lld of %lld match (clipped)  p%zu = %.4f\n", n + 1,
                static_cast<long long>(s.correct[n]), static_cast<long long>(s.total[n]), n + 1, p);
  }
  const double bp =
      s.sys_len < s.ref_len ? std::exp(1.0 - double(s.ref_len) / double(s.sys_len)) : 1.0;
  const double by_hand = 100.0 * bp * std::exp(log_sum / 4.0);
  const double bleu = metrics::corpus_bleu(hyps, refs);
  std::printf("  BP = %.4f   BLEU = 100 BP exp(mean log p) = %.4f;  corpus_bleu %.4f\nwrote %s\n",
              bp, by_hand, bleu, out.c_str());
  const bool ok = loss_value < 0.1f &&
                  trained[1].tokens == std::vector<int64_t>{8, 6, 4, 9, 3, 5} &&
                  half[1].score >= half[0].score && trained[1].score >= trained[0].score &&
                  on_mirror > 0.5f && std::abs(by_hand - bleu) < 1e-6;
  return ok ? 0 : 1;
}
