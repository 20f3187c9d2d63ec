// Greedy and beam search over the Transformer's incremental decoder (see beam_search.h).
#include "models/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "models/transformer.h"

namespace loom::models {

double gnmt_length_penalty(int64_t length, double alpha) {
  return alpha == 0.0 ? 1.0 : std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One candidate continuation: beam `beam` of a sentence extended by `token`.
struct Candidate {
  double log_prob;
  int64_t beam, token;
};

// Restores the model's training mode on scope exit.
class EvalScope {
 public:
  explicit EvalScope(Transformer& model) : model_(model), was_training_(model.is_training()) {
    model_.eval();
  }
  ~EvalScope() { model_.train(was_training_); }

 private:
  Transformer& model_;
  bool was_training_;
};

void check_arguments(const Transformer& model, const std::vector<std::vector<int64_t>>& srcs,
                     int64_t bos_id, int64_t max_len, int64_t beam, float length_penalty) {
  const TransformerConfig& c = model.config();
  LOOM_CHECK(!srcs.empty(), "Transformer::translate: no source sentences");
  for (size_t i = 0; i < srcs.size(); ++i) {
    LOOM_CHECK(!srcs[i].empty() && static_cast<int64_t>(srcs[i].size()) <= c.max_len,
               "Transformer::translate: source {} has {} ids, needs 1 to max_len {}", i,
               srcs[i].size(), c.max_len);
    for (int64_t id : srcs[i])
      LOOM_CHECK(id >= 0 && id < c.src_vocab_size,
                 "Transformer::translate: source {} holds id {} outside [0, {})", i, id,
                 c.src_vocab_size);
  }
  LOOM_CHECK(bos_id >= 0 && bos_id < c.tgt_vocab_size,
             "Transformer::translate: bos_id {} outside [0, {})", bos_id, c.tgt_vocab_size);
  LOOM_CHECK(max_len >= 1 && max_len <= c.max_len,
             "Transformer::translate: max_len {} must be in [1, the model's max_len {}]", max_len,
             c.max_len);
  LOOM_CHECK(beam >= 1 && beam <= c.tgt_vocab_size,
             "Transformer::translate: beam {} must be in [1, tgt_vocab_size {}]", beam,
             c.tgt_vocab_size);
  LOOM_CHECK(length_penalty >= 0.0f && std::isfinite(length_penalty),
             "Transformer::translate: length_penalty {} must be finite and >= 0", length_penalty);
}

// The `keep` largest entries of row[0, vocab), largest first, ties to the lower index (as
// torch.topk / argmax pick the first): one pass that keeps a short sorted list. (Sorting an
// index array of the whole vocabulary for every beam at every step cost more than the
// decoder's own arithmetic for small models.)
void top_tokens(const float* row, int64_t vocab, size_t keep, std::vector<int64_t>& out) {
  out.clear();
  for (int64_t v = 0; v < vocab; ++v) {
    const float x = row[v];
    if (out.size() == keep) {
      if (!(x > row[out.back()])) continue;  // no better than the worst kept (or NaN)
      out.pop_back();
    }
    auto pos = out.end();  // after every kept value >= x: those have lower indices
    while (pos != out.begin() && row[*(pos - 1)] < x) --pos;
    out.insert(pos, v);
  }
}

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

std::vector<Translation> beam_search(Transformer& model,
                                     const std::vector<std::vector<int64_t>>& srcs, int64_t bos_id,
                                     int64_t eos_id, int64_t max_len, int64_t beam,
                                     float length_penalty) {
  check_arguments(model, srcs, bos_id, max_len, beam, length_penalty);
  EvalScope eval(model);
  NoGradGuard no_grad;
  const TransformerConfig& c = model.config();
  const int64_t B = static_cast<int64_t>(srcs.size()), k = beam, R = B * k, V = c.tgt_vocab_size;
  const double alpha = length_penalty;

  // Sources padded with pad_id into one batch (B, S); padding is masked as keys.
  size_t S = 0;
  for (const auto& s : srcs) S = std::max(S, s.size());
  std::vector<int64_t> padded(static_cast<size_t>(B) * S, c.pad_id);
  for (size_t b = 0; b < srcs.size(); ++b)
    std::copy(srcs[b].begin(), srcs[b].end(), padded.begin() + static_cast<std::ptrdiff_t>(b * S));
  const Device device = model.emb->weight.device();
  DecoderCache cache =
      model.start_decoding(tensor_i64(padded, {B, static_cast<int64_t>(S)}).to(device), max_len, k);

  // Per row (sentence-major: row b * k + j is beam j of sentence b): score, tokens so far.
  std::vector<double> score(static_cast<size_t>(R), kNegInf);
  std::vector<std::vector<int64_t>> history(static_cast<size_t>(R));
  std::vector<int64_t> tokens(static_cast<size_t>(R), bos_id);
  for (int64_t b = 0; b < B; ++b) score[static_cast<size_t>(b * k)] = 0.0;  // one live beam
  std::vector<std::vector<Translation>> finished(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);

  auto finish = [&](int64_t b, std::vector<int64_t> toks, double log_prob, bool eos) {
    const int64_t length = static_cast<int64_t>(toks.size()) + (eos ? 1 : 0);
    finished[static_cast<size_t>(b)].push_back(
        {std::move(toks), log_prob, log_prob / gnmt_length_penalty(length, alpha), eos});
  };

  for (int64_t t = 0; t < max_len; ++t) {
    const Tensor logits = model.decode_step(tensor_i64(tokens, {R}).to(device), cache);  // (R, V)
    const std::vector<float> logp = log_softmax(logits, 1).to_vector();
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
          best_candidates(logp.data() + b * k * V, V, beam_scores, static_cast<size_t>(2 * k));
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
    if (k > 1) cache.reorder(source_row);
    for (int64_t r = 0; r < R; ++r) {
      const auto& h = history[static_cast<size_t>(r)];
      tokens[static_cast<size_t>(r)] = h.empty() ? bos_id : h.back();
    }
  }

  std::vector<Translation> result(static_cast<size_t>(B));
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
