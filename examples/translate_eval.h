// How train_translate measures its model on a split: the token-weighted validation loss, and
// corpus BLEU (sacreBLEU's, metrics/text.h) of beam-search translations against the split's
// German sentences.
#pragma once

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "loom.h"
#include "translate_data.h"

namespace loom::translate_example {

// A decoded translation as text: byte-level BPE can produce any bytes, and BLEU (metrics/text.h)
// takes UTF-8 only, so each maximal ill-formed subsequence becomes one U+FFFD (Unicode's
// recommended practice, which Python's bytes.decode("utf-8", "replace") follows).
inline std::string replace_invalid_utf8(const std::string& bytes) {
  const std::string_view text(bytes);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const data::Utf8Sequence seq = data::utf8_sequence(text.substr(i));
    if (seq.valid()) {
      out.append(text.substr(i, seq.length));
      i += seq.length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the ill-formed prefix (at least the lead byte)
      i += std::max<size_t>(seq.well_formed, 1);
    }
  }
  return out;
}

// Token-weighted cross-entropy (no smoothing) of the first `count` validation examples.
inline double validation_loss(models::Transformer& model, const std::vector<Example>& valid,
                              int64_t count, int64_t pad, Device device) {
  nn::EvalGuard eval(model);
  const size_t n = std::min(valid.size(), static_cast<size_t>(count));
  double nats = 0;
  double tokens = 0;
  for (size_t s = 0; s < n; s += 64) {
    std::vector<size_t> rows;
    for (size_t i = s; i < std::min(n, s + 64); ++i) rows.push_back(i);
    const Batch b = collate(valid, rows, pad, device);
    nats += cross_entropy(model.forward(b.src, b.tgt_in), b.tgt_out, pad).item() *
            static_cast<double>(b.target_tokens);
    tokens += static_cast<double>(b.target_tokens);
  }
  return tokens > 0 ? nats / tokens : std::numeric_limits<double>::quiet_NaN();
}

// Corpus BLEU (sacreBLEU's defaults) of the first `count` examples of a split, translated with
// beam search in batches of 32 against the split's German sentences. `shown` of them go to
// `hypotheses` for printing.
inline double split_bleu(models::Transformer& model, const data::BPETokenizer& tok,
                         const Specials& sp, const std::vector<Example>& examples,
                         const std::vector<data::TranslationPair>& pairs, int64_t count,
                         int64_t beam, int64_t max_tokens,
                         std::vector<std::string>* hypotheses = nullptr) {
  const size_t n =
      count > 0 ? std::min(examples.size(), static_cast<size_t>(count)) : examples.size();
  std::vector<std::string> hyps;
  std::vector<std::string> refs;
  // The weights are fixed for every batch: packed once for them all (autograd/packed_weights.h),
  // not once per batch.
  PackedWeightsGuard packed;
  for (size_t s = 0; s < n; s += 32) {
    std::vector<std::vector<int64_t>> srcs;
    for (size_t i = s; i < std::min(n, s + 32); ++i) srcs.push_back(examples[i].src);
    for (const auto& ids :
         model.translate_batch(srcs, sp.bos, sp.eos, max_tokens, beam, kLengthPenalty))
      hyps.push_back(replace_invalid_utf8(tok.decode(ids)));
  }
  for (size_t i = 0; i < n; ++i) refs.push_back(pairs[examples[i].pair].german);
  if (hypotheses) *hypotheses = hyps;
  return metrics::corpus_bleu(hyps, refs);
}

}  // namespace loom::translate_example
