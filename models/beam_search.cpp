// Greedy and beam search over the Transformer's incremental decoder (see beam_search.h).
#include "models/beam_search.h"

#include <omp.h>

#include <algorithm>
#include <exception>

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

// Decodes srcs as one batch on the calling thread's share of the machine.
std::vector<Translation> decode_batch(Transformer& model,
                                      const std::vector<std::vector<int64_t>>& srcs,
                                      int64_t bos_id, int64_t eos_id, int64_t max_len,
                                      int64_t beam, float length_penalty) {
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

// The fewest rows (sentences x beams) worth a group of their own. Fewer rows multiply in
// shorter register tiles (16 rows: two tiles of 8 where 32 make 11, 11 and 10), and every group
// pays each kernel's call for itself: seq2seq-mini's greedy decoding of 32 sentences ran 5-10%
// slower in two groups of 16 than as one batch, where beam-4's 128 rows ran 8-13% faster in two
// groups of 64 (2026-12-05, 2 cores).
constexpr int64_t kGroupRows = 32;

// How many groups the sentences are decoded in, one thread each: on the CPU, one per thread,
// each of at least kGroupRows rows (and one sentence), unless the caller is already one of a
// team's threads.
int64_t sentence_groups(const Transformer& model, int64_t sentences, int64_t beam) {
  if (model.emb->weight.device() != Device::CPU || omp_in_parallel()) return 1;
  const int64_t groups = std::min<int64_t>(get_num_threads(), sentences * beam / kGroupRows);
  return std::clamp<int64_t>(groups, 1, sentences);
}

}  // namespace

// A decoding step's products are small (128 rows for beam-4 over 32 sentences), and cut among
// the threads each costs a parallel region, over a thousand in a decoding of 24 tokens, and
// the work between the products (the beams' scores and choices, the cache's reordering, the
// kernels' calls) runs on one thread. So on the CPU the sentences are cut into one group per
// thread instead, and each thread decodes its group as a batch of its own, start to end, its
// products single-threaded (loom's loops run on the calling thread alone inside a parallel
// region): one region for the whole decoding. Each sentence's search is its own (beams never
// cross sentences), so the groups' results, in order, are the whole batch's. The threads share
// the packed copies of the weights (PackedWeightsGuard's are the process's).
std::vector<Translation> beam_search(Transformer& model,
                                     const std::vector<std::vector<int64_t>>& srcs, int64_t bos_id,
                                     int64_t eos_id, int64_t max_len, int64_t beam,
                                     float length_penalty) {
  check_arguments(model, srcs, bos_id, max_len, beam, length_penalty);
  nn::EvalGuard eval(model);  // switched once here, so that the threads' guards write nothing
  const auto B = static_cast<int64_t>(srcs.size());
  const int64_t groups = sentence_groups(model, B, beam);
  if (groups == 1) return decode_batch(model, srcs, bos_id, eos_id, max_len, beam, length_penalty);
  std::vector<std::vector<Translation>> parts(static_cast<size_t>(groups));
  std::exception_ptr failure;  // the first group's error, rethrown on the calling thread
#pragma omp parallel for num_threads(static_cast<int>(groups)) schedule(static, 1)
  for (int64_t g = 0; g < groups; ++g) {
    try {
      const std::vector<std::vector<int64_t>> group(srcs.begin() + g * B / groups,
                                                    srcs.begin() + (g + 1) * B / groups);
      parts[static_cast<size_t>(g)] =
          decode_batch(model, group, bos_id, eos_id, max_len, beam, length_penalty);
    } catch (...) {
#pragma omp critical(loom_beam_search_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  std::vector<Translation> out;
  for (auto& part : parts)
    for (auto& t : part) out.push_back(std::move(t));
  return out;
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
