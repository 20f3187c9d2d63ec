// Decoding for the encoder-decoder Transformer (models/transformer.h): greedy search and beam
// search over its incremental decoder, kept beside the model as models/sampling.h is beside GPT.
//
//   encode the sources once -> for t = 0 .. max_len - 1:
//     logits of every row's next token (Transformer::decode_step: cached self-attention keys and
//     values, cross-attention keys and values of the memory computed once)
//     -> each sentence keeps its `beam` best continuations by total log-probability
//        (Sutskever et al. 2014; Wu et al. 2016, sec. 7); a continuation ending in eos among
//        the best `beam` candidates is finished, scored by log P / lp(Y) with GNMT's length
//        penalty lp(Y) = ((5 + |Y|) / 6)^alpha (|Y| counts the eos);
//     -> a sentence is done once it holds `beam` finished hypotheses (or at max_len, when its
//        live beams are finished as they stand); the cache rows follow their beams (reorder).
//   Beam 1 is greedy search: the single best token each step, stopping at eos.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::models {

class Transformer;

// GNMT's length penalty (Wu et al. 2016, eq. 14): ((5 + length) / 6)^alpha; 1 when alpha is 0.
double gnmt_length_penalty(int64_t length, double alpha);

struct Translation {
  std::vector<int64_t> tokens;  // without bos and eos
  double log_prob = 0.0;        // sum of the log-probabilities of tokens (and of eos if produced)
  double score = 0.0;           // log_prob / gnmt_length_penalty(tokens + eos, alpha)
  bool finished = false;        // ended with eos (false: cut at max_len)
};

// Decodes every source (each non-empty, at most the model's max_len ids; padded with pad_id
// into one batch) with beam search of width `beam` (1 = greedy), up to max_len new tokens.
// eos_id may lie outside the vocabulary (never produced: every sentence gets max_len tokens).
// Runs the model in evaluation mode (restored afterwards), without gradients.
std::vector<Translation> beam_search(Transformer& model,
                                     const std::vector<std::vector<int64_t>>& srcs, int64_t bos_id,
                                     int64_t eos_id, int64_t max_len, int64_t beam = 1,
                                     float length_penalty = 0.0f);

}  // namespace loom::models
