// The reversal task of chapter 07, shared by learn_07_reverse (which trains it and reads its
// cross-attention) and learn_05a_positions (which trains it with a piece removed): sources of
// six tokens 3..9, the target the same tokens reversed, framed by bos and eos, and the tiny
// encoder-decoder (D 32, 2 heads, one layer each side, no dropout) that learns it.
#pragma once

#include <algorithm>
#include <vector>

#include "loom.h"

namespace learn {

// Ids 0, 1, 2 are padding, bos and eos; 3..9 are the tokens; a source is kLen of them.
constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kVocab = 10, kLen = 6;

// The model: D 32, 2 heads, one layer each side, no dropout.
inline loom::models::TransformerConfig reverse_config() {
  loom::models::TransformerConfig c;
  c.src_vocab_size = c.tgt_vocab_size = kVocab;
  c.d_model = 32, c.n_head = 2, c.d_ff = 64, c.max_len = 16, c.dropout = 0.0f;
  c.n_encoder_layers = c.n_decoder_layers = 1;
  return c;
}

// `rows` random sources and what teacher forcing needs: the decoder reads bos + answer and
// predicts answer + eos.
struct ReverseBatch {
  loom::Tensor src;      // (rows, L) tokens 3..9
  loom::Tensor answer;   // (rows, L) each source row reversed
  loom::Tensor tgt_in;   // (rows, L + 1) bos + answer
  loom::Tensor tgt_out;  // (rows, L + 1) answer + eos
};

inline ReverseBatch reverse_batch(int64_t rows) {
  using namespace loom;
  const Tensor src = randint(3, kVocab, {rows, kLen});
  std::vector<int64_t> ids = src.to_vector_i64();
  for (size_t b = 0; b < ids.size(); b += kLen) std::reverse(&ids[b], &ids[b + kLen]);
  const Tensor answer = tensor_i64(ids, {rows, kLen});
  const Tensor bos = full({rows, 1}, kBos).to(DType::Int64),
               eos = full({rows, 1}, kEos).to(DType::Int64);
  return {src, answer, cat({bos, answer}, 1), cat({answer, eos}, 1)};
}

}  // namespace learn
