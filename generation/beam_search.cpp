// Greedy and beam search over a model's incremental decoder (see beam_search.h).
#include "generation/beam_search.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/packed_weights.h"
#include "core/error.h"

namespace loom::generation {

double gnmt_length_penalty(int64_t length, double alpha) {
  return alpha == 0.0 ? 1.0 : std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

void check_beam_search(int64_t batch, int64_t vocab, int64_t bos_id, int64_t max_len,
                       int64_t beam, float length_penalty, const char* op) {
  LOOM_CHECK(batch >= 1, "{}: no source sentences", op);
  LOOM_CHECK(bos_id >= 0 && bos_id < vocab, "{}: bos_id {} outside [0, {})", op, bos_id, vocab);
  LOOM_CHECK(max_len >= 1, "{}: max_len {} must be at least 1", op, max_len);
  LOOM_CHECK(beam >= 1 && beam <= vocab, "{}: beam {} must be in [1, the vocabulary's {}]", op,
             beam, vocab);
  LOOM_CHECK(length_penalty >= 0.0f && std::isfinite(length_penalty),
             "{}: length_penalty {} must be finite and >= 0", op, length_penalty);
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One candidate continuation: beam `beam` of a sentence extended by `token`.
struct Candidate {
  double log_prob;
  int64_t beam, token;
};

}  // namespace

// One pass that keeps a short sorted list. (Sorting an index array of the whole vocabulary for
// every beam at every step cost more than the decoder's own arithmetic for small models.) Once
// the list is full, a value must beat its worst to enter, which few do: so the row is compared
// with the worst kept a block of kBlock values at a time (vector comparisons into a bit mask),
// and only the values whose bit is set are offered, in order (each is compared again with the
// worst, which may have risen within the block). Nothing compares above NaN, so this agrees
// with offering every value in turn on rows with NaN too.
void top_tokens(const float* row, int64_t vocab, size_t keep, std::vector<int64_t>& out) {
  out.clear();
  if (keep == 0) return;
  const auto offer = [&](int64_t v) {  // v enters the list if it beats the worst kept
    const float x = row[v];
    if (out.size() == keep) {
      if (!(x > row[out.back()])) return;  // no better than the worst kept (or NaN)
      out.pop_back();
    }
    auto pos = out.end();  // after every kept value >= x: those have lower indices
    while (pos != out.begin() && row[*(pos - 1)] < x) --pos;
    out.insert(pos, v);
  };
  constexpr int64_t kBlock = 32;  // one bit each in `above`
  int64_t v = 0;
  for (; v + kBlock <= vocab; v += kBlock) {
    if (out.size() < keep) {
      for (int64_t i = v; i < v + kBlock; ++i) offer(i);
      continue;
    }
    const float worst = row[out.back()];
    uint32_t above = 0;  // bit i: row[v + i] beats the worst kept when the block begins
#pragma omp simd reduction(| : above)
    for (int64_t i = 0; i < kBlock; ++i) above |= static_cast<uint32_t>(row[v + i] > worst) << i;
    for (; above != 0; above &= above - 1) offer(v + std::countr_zero(above));
  }
  for (; v < vocab; ++v) offer(v);
}

namespace {

// The `count` best candidates of one sentence, best first (ties: lower beam, then lower token):
// the best `count` of each live beam's row, merged.
std::vector<Candidate> best_candidates(const float* logp, int64_t vocab,
                                       const std::vector<double>& scores, size_t count) {
  std::vector<Candidate> all;
  std::vector<int64_t> top;
  top.reserve(count + 1);
  for (size_t j = 0; j < scores.size(); ++j) {
    if (scores[j] == kNegInf) continue;
    const float* row = logp + static_cast<int64_t>(j) * vocab;
    top_tokens(row, vocab, std::min(count, static_cast<size_t>(vocab)), top);
    for (int64_t token : top)
      all.push_back({scores[j] + row[token], static_cast<int64_t>(j), token});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Candidate& a, const Candidate& b) { return a.log_prob > b.log_prob; });
  if (all.size() > count) all.resize(count);
  return all;
}

}  // namespace

std::vector<Hypothesis> beam_search(const BeamDecoder& decoder, int64_t batch, int64_t vocab,
                                    int64_t bos_id, int64_t eos_id, int64_t max_len, int64_t beam,
                                    float length_penalty) {
  check_beam_search(batch, vocab, bos_id, max_len, beam, length_penalty);
  NoGradGuard no_grad;
  PackedWeightsGuard packed;  // the same weights every step: each packed once
  const int64_t B = batch, k = beam, R = B * k, V = vocab;
  const double alpha = length_penalty;

  // Per row (sentence-major: row b * k + j is beam j of sentence b): score, tokens so far.
  std::vector<double> score(static_cast<size_t>(R), kNegInf);
  std::vector<std::vector<int64_t>> history(static_cast<size_t>(R));
  std::vector<int64_t> tokens(static_cast<size_t>(R), bos_id);
  for (int64_t b = 0; b < B; ++b) score[static_cast<size_t>(b * k)] = 0.0;  // one live beam
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);

  auto finish = [&](int64_t b, std::vector<int64_t> toks, double log_prob, bool eos) {
    const int64_t length = static_cast<int64_t>(toks.size()) + (eos ? 1 : 0);
    finished[static_cast<size_t>(b)].push_back(
        {std::move(toks), log_prob, log_prob / gnmt_length_penalty(length, alpha), eos});
  };

  for (int64_t t = 0; t < max_len; ++t) {
    const Tensor logits = decoder.step(tokens);  // (R, V)
    LOOM_CHECK(logits.dim() == 2 && logits.size(0) == R && logits.size(1) == V,
               "beam_search: the model's step gave logits of shape {}, expected {}",
               shape_str(logits.shape()), shape_str({R, V}));
    // Read where the host can: on the CPU the kernel's own output, not a copy of it.
    const Tensor logp_host =
        log_softmax(logits, 1).to(Device::CPU).to(DType::Float32).contiguous();
    const float* logp = logp_host.data_ptr<float>();
    const bool last = t + 1 == max_len;
    std::vector<int64_t> source_row(static_cast<size_t>(R));
    std::vector<double> new_score(static_cast<size_t>(R), kNegInf);
    std::vector<std::vector<int64_t>> new_history(static_cast<size_t>(R));
    for (int64_t b = 0; b < B; ++b) {
      const auto first = static_cast<size_t>(b * k);
      for (int64_t j = 0; j < k; ++j) source_row[first + static_cast<size_t>(j)] = b * k;
      if (done[static_cast<size_t>(b)]) continue;
      const std::vector<double> beam_scores(score.begin() + static_cast<std::ptrdiff_t>(first),
                                            score.begin() + static_cast<std::ptrdiff_t>(first + k));
      // 2k candidates always leave k that do not end in eos.
      const auto candidates =
          best_candidates(logp + b * k * V, V, beam_scores, static_cast<size_t>(2 * k));
      int64_t live = 0;
      for (size_t rank = 0; rank < candidates.size() && live < k; ++rank) {
        const Candidate& cand = candidates[rank];
        const auto from = first + static_cast<size_t>(cand.beam);
        if (cand.token == eos_id) {  // finished only if among the k best (as fairseq)
          if (rank < static_cast<size_t>(k)) finish(b, history[from], cand.log_prob, true);
          continue;
        }
        const auto to = first + static_cast<size_t>(live++);
        source_row[to] = static_cast<int64_t>(from);
        new_score[to] = cand.log_prob;
        new_history[to] = history[from];
        new_history[to].push_back(cand.token);
      }
      for (int64_t j = live; j < k; ++j)  // fewer live beams than k: dead rows
        new_history[first + static_cast<size_t>(j)] = history[first];
      if (last)
        for (int64_t j = 0; j < live; ++j) {
          const auto row = first + static_cast<size_t>(j);
          finish(b, new_history[row], new_score[row], false);
        }
      if (last || static_cast<int64_t>(finished[static_cast<size_t>(b)].size()) >= k)
        done[static_cast<size_t>(b)] = true;
    }
    score = std::move(new_score);
    history = std::move(new_history);
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    if (k > 1) decoder.reorder(source_row);
    for (int64_t r = 0; r < R; ++r) {
      const auto& h = history[static_cast<size_t>(r)];
      tokens[static_cast<size_t>(r)] = h.empty() ? bos_id : h.back();
    }
  }

  std::vector<Hypothesis> result(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    auto& f = finished[static_cast<size_t>(b)];
    // The highest score wins; ties go to the earlier finished (as a stable sort).
    const auto best = std::max_element(
        f.begin(), f.end(), [](const auto& x, const auto& y) { return x.score < y.score; });
    LOOM_CHECK(best != f.end(), "beam_search: sentence {} ended with no hypothesis", b);
    result[static_cast<size_t>(b)] = std::move(*best);
  }
  return result;
}

}  // namespace loom::generation
