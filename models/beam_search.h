// Decoding for the encoder-decoder Transformer (models/transformer.h): greedy search and beam
// search (generation/beam_search.h, whose header comment is the algorithm) over its
// incremental decoder. The sources are encoded once; each step runs Transformer::decode_step
// (cached self-attention keys and values, cross-attention keys and values of the memory
// computed once), and the cache rows follow their beams (DecoderCache::reorder).
#pragma once

#include <cstdint>
#include <vector>

#include "generation/beam_search.h"

namespace loom::models {

class Transformer;

using generation::gnmt_length_penalty;
using Translation = generation::Hypothesis;

// Decodes every source (each non-empty, at most the model's max_len ids; padded with pad_id
// into one batch) with beam search of width `beam` (1 = greedy), up to max_len new tokens.
// eos_id may lie outside the vocabulary (never produced: every sentence gets max_len tokens).
// Runs the model in evaluation mode (restored afterwards), without gradients. On the CPU with
// several threads, the sentences are decoded in one group per thread, each a batch of its own,
// where every group gets at least 32 rows (sentences x beam): the same tokens.
std::vector<Translation> beam_search(Transformer& model,
                                     const std::vector<std::vector<int64_t>>& srcs, int64_t bos_id,
                                     int64_t eos_id, int64_t max_len, int64_t beam = 1,
                                     float length_penalty = 0.0f);

}  // namespace loom::models
