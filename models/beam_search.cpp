// Greedy and beam search over the Transformer's incremental decoder (see beam_search.h).
#include "models/beam_search.h"

#include <algorithm>

#include "autograd/ops.h"
#include "autograd/packed_weights.h"
#include "core/error.h"
#include "models/transformer.h"
#include "nn/eval_guard.h"

namespace loom::models {

namespace {

// The model's own checks (sources, max_len within the position table), then the search's.
void check_arguments(const Transformer& model, const std::vector<std::vector<int64_t>>& srcs,
                     int64_t bos_id, int64_t max_len, int64_t beam, float length_penalty) {
  const TransformerConfig& c = model.config();
  for (size_t i = 0; i < srcs.size(); ++i) {
    LOOM_CHECK(!srcs[i].empty() && static_cast<int64_t>(srcs[i].size()) <= c.max_len,
               "Transformer::translate: source {} has {} ids, needs 1 to max_len {}", i,
               srcs[i].size(), c.max_len);
    for (int64_t id : srcs[i])
      LOOM_CHECK(id >= 0 && id < c.src_vocab_size,
                 "Transformer::translate: source {} holds id {} outside [0, {})", i, id,
                 c.src_vocab_size);
  }
  LOOM_CHECK(max_len <= c.max_len,
             "Transformer::translate: max_len {} must be in [1, the model's max_len {}]", max_len,
             c.max_len);
  generation::check_beam_search(static_cast<int64_t>(srcs.size()), c.tgt_vocab_size, bos_id,
                                max_len, beam, length_penalty, "Transformer::translate");
}

}  // namespace

std::vector<Translation> beam_search(Transformer& model,
                                     const std::vector<std::vector<int64_t>>& srcs, int64_t bos_id,
                                     int64_t eos_id, int64_t max_len, int64_t beam,
                                     float length_penalty) {
  check_arguments(model, srcs, bos_id, max_len, beam, length_penalty);
  nn::EvalGuard eval(model);  // evaluation mode, no gradients; the caller's mode afterwards
  PackedWeightsGuard packed;  // every step's weights packed once (the encoder's, used once: not)
  const TransformerConfig& c = model.config();
  const int64_t B = static_cast<int64_t>(srcs.size());

  // Sources padded with pad_id into one batch (B, S); padding is masked as keys.
  size_t S = 0;
  for (const auto& s : srcs) S = std::max(S, s.size());
  std::vector<int64_t> padded(static_cast<size_t>(B) * S, c.pad_id);
  for (size_t b = 0; b < srcs.size(); ++b)
    std::copy(srcs[b].begin(), srcs[b].end(), padded.begin() + static_cast<std::ptrdiff_t>(b * S));
  const Device device = model.emb->weight.device();
  DecoderCache cache = model.start_decoding(
      tensor_i64(padded, {B, static_cast<int64_t>(S)}).to(device), max_len, beam);
  generation::BeamDecoder decoder{
      [&](const std::vector<int64_t>& tokens) {
        const auto rows = static_cast<int64_t>(tokens.size());
        return model.decode_step(tensor_i64(tokens, {rows}).to(device), cache);
      },
      [&](const std::vector<int64_t>& source_row) { cache.reorder(source_row); }};
  return generation::beam_search(decoder, B, c.tgt_vocab_size, bos_id, eos_id, max_len, beam,
                                 length_penalty);
}

// ============================================================================ Transformer's API

std::vector<int64_t> Transformer::translate(const std::vector<int64_t>& src, int64_t bos_id,
                                            int64_t eos_id, int64_t max_len, int64_t beam,
                                            float length_penalty) {
  return beam_search(*this, {src}, bos_id, eos_id, max_len, beam, length_penalty)[0].tokens;
}

std::vector<std::vector<int64_t>> Transformer::translate_batch(
    const std::vector<std::vector<int64_t>>& srcs, int64_t bos_id, int64_t eos_id, int64_t max_len,
    int64_t beam, float length_penalty) {
  std::vector<std::vector<int64_t>> out;
  for (auto& t : beam_search(*this, srcs, bos_id, eos_id, max_len, beam, length_penalty))
    out.push_back(std::move(t.tokens));
  return out;
}

}  // namespace loom::models
