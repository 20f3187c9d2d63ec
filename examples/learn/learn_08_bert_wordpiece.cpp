// Chapter 08 (docs/learn/08-bert.md): BERT's input, from WordPiece to the masked-LM rule.
// Learns a small WordPiece vocabulary, splits tricky sentences into basic tokens and ## pieces,
// builds [CLS] A [SEP] B [SEP] with its segment ids, masks it as BERT's pre-training does (and
// counts the 80/10/10 split over many draws), then runs an untrained BERT on it: its loss is
// about ln(vocab) + ln(2), the two heads' cross-entropies at uniform guessing.
#include <cmath>
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

int main(int argc, char** argv) try {
  learn::parse_args(argc, argv,
                    "Chapter 08 (docs/learn/08-bert.md): WordPiece, [CLS] A [SEP] B [SEP], "
                    "the masking rule and BERT's two losses.");
  const std::string text =
      "the player played playing plays and replays. the worker worked working works and reworks. "
      "unplayable, unworkable: newer newest lower lowest wider widest. ";
  const auto tok = data::WordPieceTokenizer::train(std::vector<std::string>(10, text), 75);
  auto joined = [](const std::vector<std::string>& pieces) {
    std::string out;
    for (size_t i = 0; i < pieces.size(); ++i) out += (i ? " " : "") + pieces[i];
    return out;
  };
  std::printf("WordPiece vocabulary: %lld tokens (5 special, the characters, then merges)\n",
              static_cast<long long>(tok.vocab_size()));
  // A word never seen in training still splits into known pieces, without [UNK].
  const std::vector<std::string> unseen = tok.tokenize("reworked");
  bool ok = unseen.size() > 1 && unseen[1] != "[UNK]";
  for (const char* s :
       {"The WORKERS replayed, unworkable!", "Ünplayed wídest-lowest", "rework the 游戏"})
    std::printf("\n'%s'\n  basic:     %s\n  wordpiece: %s\n", s,
                joined(data::WordPieceTokenizer::basic_tokenize(s, true)).c_str(),
                joined(tok.tokenize(s)).c_str());

  // [CLS] A [SEP] B [SEP]: segment 0 up to and including the first [SEP], 1 after it.
  const int64_t cls = tok.token_id("[CLS]"), sep = tok.token_id("[SEP]");
  std::vector<int64_t> ids{cls}, types{0};
  int64_t segment = 0;
  for (const char* sentence :
       {"the worker played and the player worked.", "unworkable, newer and wider replays."}) {
    for (int64_t id : tok.encode(sentence)) ids.push_back(id), types.push_back(segment);
    ids.push_back(sep), types.push_back(segment++);
  }
  const data::MaskingRule rule{cls, sep, tok.token_id("[MASK]"), tok.vocab_size()};
  // What masking did at position i: -1 not predicted, 0 [MASK], 1 a random token, 2 kept.
  auto kind = [&](const data::MaskedTokens& d, size_t i) {
    return d.labels[i] < 0 ? -1 : d.ids[i] == rule.mask_id ? 0 : d.ids[i] == ids[i] ? 2 : 1;
  };
  auto count = [&](const data::MaskedTokens& d, int64_t counts[3]) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (kind(d, i) >= 0) ++counts[kind(d, i)];
  };
  auto shows_all = [&](uint64_t s) {  // a draw with [MASK], random and kept positions
    int64_t c[3] = {0, 0, 0};
    count(data::mask_tokens(ids, rule, s), c);
    return c[0] > 0 && c[1] > 0 && c[2] > 0;
  };
  uint64_t seed = 0;
  while (!shows_all(seed)) ++seed;
  const data::MaskedTokens m = data::mask_tokens(ids, rule, seed);
  std::printf(
      "\n%zu tokens, 15%% of them predicted (seed %llu):\n"
      " pos  seg  token        input     label\n",
      ids.size(), static_cast<unsigned long long>(seed));
  const char* names[] = {"  -> [MASK]", "  -> random", "  -> kept"};
  for (size_t i = 0; i < ids.size(); ++i)
    std::printf("%4zu  %3lld  %-11s  %-8s  %s%s\n", i, static_cast<long long>(types[i]),
                tok.token(ids[i]).c_str(), tok.token(m.ids[i]).c_str(),
                kind(m, i) < 0 ? "-100" : tok.token(m.labels[i]).c_str(),
                kind(m, i) < 0 ? "" : names[kind(m, i)]);

  // The 80/10/10 rule over 20,000 draws of the same sequence ([CLS]/[SEP] never chosen).
  int64_t c[3] = {0, 0, 0};
  for (uint64_t s = 0; s < 20000; ++s) {
    const data::MaskedTokens d = data::mask_tokens(ids, rule, s);
    count(d, c);
    for (size_t i = 0; i < ids.size(); ++i)
      ok = ok && (d.labels[i] < 0 || (ids[i] != cls && ids[i] != sep));
  }
  const double n = static_cast<double>(c[0] + c[1] + c[2]);
  std::printf("\nover 20000 maskings: [MASK] %.3f, random %.3f, kept %.3f\n", c[0] / n, c[1] / n,
              c[2] / n);
  ok = ok && std::abs(c[0] / n - 0.8) < 0.01 && std::abs(c[1] / n - 0.1) < 0.01;

  // An untrained BERT on the example: both heads guess uniformly.
  manual_seed(0);
  const models::BertConfig config{.vocab_size = tok.vocab_size(),
                                  .hidden = 32,
                                  .n_layer = 2,
                                  .n_head = 2,
                                  .intermediate = 64,
                                  .max_position = 64};
  models::Bert bert(config);
  bert.eval();
  const auto T = static_cast<int64_t>(ids.size());
  const models::BertOutput out = bert.forward(tensor_i64(m.ids, {1, T}), tensor_i64(types, {1, T}));
  const float loss = models::bert_pretraining_loss(out, tensor_i64(m.labels, {1, T}),
                                                   tensor_i64(std::vector<int64_t>{0}, {1}))
                         .item();
  const double uniform = std::log(static_cast<double>(tok.vocab_size())) + std::log(2.0);
  std::printf("\nBERT %s\nmlm_logits %s, nsp_logits %s\nloss %.3f, ln(%lld) + ln(2) = %.3f\n",
              config.to_string().c_str(), shape_str(out.mlm_logits.shape()).c_str(),
              shape_str(out.nsp_logits.shape()).c_str(), loss,
              static_cast<long long>(tok.vocab_size()), uniform);
  return ok && std::abs(loss - uniform) < 0.25 ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
