// The key/value cache of autoregressive decoding (e.g. Pope et al. 2022, "Efficiently Scaling
// Transformer Inference"): every attention layer keeps the keys and values it computed for the
// positions seen so far, so that generating one more token costs one position's work instead of
// re-running the prefix. GPT's generation and the encoder-decoder Transformer's incremental
// decoder both keep their self-attention's keys and values here.
//
//   KVCache               storage for all layers, allocated once for `capacity` positions
//   KVCache::layer(i)     LayerCache: layer i's handles to it, as its attention sees them
//   causal_attention      attention of the newest positions through a LayerCache (or none)
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace loom::nn {

// One layer's part of a KVCache: handles to the cache's storage (views, cheap to copy), so
// writing through them fills the KVCache. A default-constructed LayerCache is "no cache".
struct LayerCache {
  Tensor keys, values;  // (B, nh, capacity, hs); positions [0, length) hold earlier tokens
  // (2, B, nh, capacity, hs) whose halves are keys and values (KVCache's storage), so that
  // keys and values split from one projection are written with one copy.
  Tensor keys_values;
  int64_t length = 0;  // positions already cached = the position of the first new token
  // Decoding by a recorded graph (GPT::generate on a GPU), one new token per step: its position
  // is not known on the host but held in device memory, `position` (1) int64, and attention
  // covers all capacity positions with the additive `mask` (capacity): 0 up to the position,
  // -inf after it. Undefined (the default): the position is `length`.
  Tensor position, mask;

  bool defined() const { return keys.defined(); }
  // Writes k and v (B, nh, T, hs) at positions [length, length + T) and returns every key and
  // value so far, (B, nh, length + T, hs) each: views of the cache, no copy. With a device
  // `position` (T = 1), writes there and returns the whole storage (B, nh, capacity, hs). One
  // copy when k and v are the two halves of one tensor (split from one projection: a step is
  // then one kernel), two otherwise. Inference only: no gradient flows through the cache. The
  // KVCache's length moves on only when the whole model has written (KVCache::advance).
  std::pair<Tensor, Tensor> append(const Tensor& k, const Tensor& v) const;
};

class KVCache {
 public:
  // `layers` attention layers of `heads` heads of size head_dim, for `batch` rows and up to
  // `capacity` positions (zeros).
  KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t capacity, int64_t head_dim,
          Device device = Device::CPU);

  int64_t length() const { return length_; }  // positions filled, 0..capacity
  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  void clear() { length_ = 0; }

  // Layer `layer`'s part of the cache, for its attention.
  LayerCache layer(int64_t layer) const;
  // Layer `layer`'s keys and values, (B, nh, capacity, hs); positions [0, length()) are valid.
  Tensor& keys(int64_t layer) { return keys_.at(static_cast<size_t>(layer)); }
  Tensor& values(int64_t layer) { return values_.at(static_cast<size_t>(layer)); }
  // Marks `count` more positions as filled (a model calls this after every layer wrote).
  void advance(int64_t count);
  // Row i continues from row rows[i] (beam search): rows (batch) int64 on the cache's device.
  // Positions [0, positions) move: all `capacity` by default (-1), since a step at a device
  // position (at_position) writes past length(); length() when only the host's steps wrote,
  // which on the CPU moves only the filled part of each row.
  void reorder(const Tensor& rows, int64_t positions = -1);
  // The same cache (shared storage), its layers writing at the device `position` (1) int64 and
  // attending through `mask` (capacity) (see LayerCache), for a step recorded as a CUDA graph.
  KVCache at_position(const Tensor& position, const Tensor& mask) const;

 private:
  void reorder_filled(const Tensor& rows, int64_t positions);  // reorder's CPU path
  // keys_[i] and values_[i] are the two halves of keys_values_[i] (views).
  std::vector<Tensor> keys_values_, keys_, values_;
  int64_t length_ = 0, batch_, capacity_;
  Tensor position_, mask_;  // see at_position
};

// Causal self-attention (Vaswani et al. 2017, eq. 1 with sec. 3.2.3's mask) of the newest T
// positions, through `cache`: k, v (B, nh, T, hs) of positions [past, past + T), past =
// cache.length (0 without a cache), are appended to the cache, and q (B, nh, Tq, hs), the queries
// of the last Tq <= T of them, attends to every key so far up to its own position
// -> (B, nh, Tq, hs). At a device position (graph decoding) the cache's mask does the masking.
// Dropout p on the probabilities when training.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        const LayerCache& cache = {}, float dropout_p = 0.0f,
                        bool training = false);

}  // namespace loom::nn
