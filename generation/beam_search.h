// Greedy search and beam search for any model that decodes a batch of sequences one token at a
// time (the encoder-decoder Transformer's translate is one: models/beam_search.h). The model
// supplies two functions, the next token's logits for every row and the reordering of its
// caches when rows change beams; the search does the rest.
//
//   for t = 0 .. max_len - 1:
//     logits of every row's next token (the model's step: with a cache, only the newest token)
//     -> each sentence keeps its `beam` best continuations by total log-probability
//        (Sutskever et al. 2014; Wu et al. 2016, sec. 7); a continuation ending in eos among
//        the best `beam` candidates is finished, scored by log P / lp(Y) with GNMT's length
//        penalty lp(Y) = ((5 + |Y|) / 6)^alpha (|Y| counts the eos);
//     -> a sentence is done once it holds `beam` finished hypotheses (or at max_len, when its
//        live beams are finished as they stand); the cache rows follow their beams (reorder).
//   Beam 1 is greedy search: the single best token each step, stopping at eos.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace loom::generation {

// GNMT's length penalty (Wu et al. 2016, eq. 14): ((5 + length) / 6)^alpha; 1 when alpha is 0.
double gnmt_length_penalty(int64_t length, double alpha);

struct Hypothesis {
  std::vector<int64_t> tokens;  // without bos and eos
  double log_prob = 0.0;        // sum of the log-probabilities of tokens (and of eos if produced)
  double score = 0.0;           // log_prob / gnmt_length_penalty(tokens + eos, alpha)
  bool finished = false;        // ended with eos (false: cut at max_len)
};

// The model's side of the search, over batch * beam rows, sentence-major (row b * beam + j is
// beam j of sentence b); the model has prepared a cache of that many rows.
struct BeamDecoder {
  // Each row's newest token (bos_id at the start) -> logits [rows, vocab] of the token after
  // it; the model appends the step to its cache.
  std::function<Tensor(const std::vector<int64_t>& tokens)> step;
  // Row r continues from row source_row[r], a row of the same sentence: the model's cache rows
  // follow. Not called for greedy search (beam 1).
  std::function<void(const std::vector<int64_t>& source_row)> reorder;
};

// Throws loom::Error naming `op` unless batch >= 1, bos_id is in [0, vocab), max_len >= 1, beam
// is in [1, vocab] and length_penalty is finite and >= 0: beam_search's checks, for a model
// to make before it prepares its cache.
void check_beam_search(int64_t batch, int64_t vocab, int64_t bos_id, int64_t max_len,
                       int64_t beam, float length_penalty, const char* op = "beam_search");

// Decodes `batch` sentences with beam search of width `beam` (1 = greedy), up to max_len new
// tokens each, and returns each sentence's best hypothesis (the highest score; ties to the one
// finished first). eos_id may lie outside the vocabulary (never produced: every sentence gets
// max_len tokens). Runs without gradients.
std::vector<Hypothesis> beam_search(const BeamDecoder& decoder, int64_t batch, int64_t vocab,
                                    int64_t bos_id, int64_t eos_id, int64_t max_len,
                                    int64_t beam = 1, float length_penalty = 0.0f);

// The `keep` largest entries of row[0, vocab) into out, largest first, ties to the lower index
// (as torch.topk and argmax pick the first): beam_search's choice of each beam's candidates,
// declared here for its tests.
void top_tokens(const float* row, int64_t vocab, size_t keep, std::vector<int64_t>& out);

}  // namespace loom::generation
