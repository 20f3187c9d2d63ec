// The KV cache: its storage, one layer's step through it, and attention over it.
#include "nn/kv_cache.h"

#include <memory>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/backend.h"
#include "core/error.h"
#include "nn/functional.h"

namespace loom::nn {

KVCache::KVCache(int64_t layers, int64_t batch, int64_t heads, int64_t capacity,
                 int64_t head_dim, Device device)
    : batch_(batch), capacity_(capacity) {
  LOOM_CHECK(layers > 0 && batch > 0 && heads > 0 && capacity > 0 && head_dim > 0,
             "KVCache: layers {}, batch {}, heads {}, capacity {} and head_dim {} must be positive",
             layers, batch, heads, capacity, head_dim);
  for (int64_t i = 0; i < layers; ++i) {
    // Keys and values in one tensor (2, B, nh, capacity, hs), so a step writes both with one copy.
    keys_values_.push_back(zeros({2, batch, heads, capacity, head_dim}, device));
    keys_.push_back(keys_values_.back().select(0, 0));  // (B, nh, capacity, hs)
    values_.push_back(keys_values_.back().select(0, 1));
  }
}

LayerCache KVCache::layer(int64_t layer) const {
  LOOM_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()),
             "KVCache: layer {} outside [0, {})", layer, keys_.size());
  LayerCache cache;
  cache.keys = keys_[static_cast<size_t>(layer)];
  cache.values = values_[static_cast<size_t>(layer)];
  cache.keys_values = keys_values_[static_cast<size_t>(layer)];
  cache.length = length_;
  cache.position = position_;
  cache.mask = mask_;
  return cache;
}

void KVCache::advance(int64_t count) {
  LOOM_CHECK(count >= 0 && length_ + count <= capacity_,
             "KVCache: cannot hold {} more positions after {} (capacity {})", count, length_,
             capacity_);
  length_ += count;
}

void KVCache::reorder(const Tensor& rows, int64_t positions) {
  LOOM_CHECK(rows.defined() && rows.dtype() == DType::Int64 && rows.shape() == Shape{batch_},
             "KVCache::reorder: expected int64 rows [{}], got {}", batch_,
             rows.defined() ? shape_str(rows.shape()) : "undefined");
  LOOM_CHECK(positions >= -1 && positions <= capacity_,
             "KVCache::reorder: positions {} outside [0, capacity {}] (or -1: all)", positions,
             capacity_);
  NoGradGuard no_grad;
  if (positions >= 0 && positions < capacity_ && rows.device() == Device::CPU)
    return reorder_filled(rows, positions);
  // One gather of whole rows of each layer's contiguous storage into a new tensor that replaces
  // it: one pass for keys and values, where gathering the filled positions out of the strided
  // (B, nh, length, hs) views and copying them back took three each.
  for (size_t l = 0; l < keys_values_.size(); ++l) {
    keys_values_[l] = index_select(keys_values_[l], 1, rows);  // (2, B, nh, capacity, hs)
    keys_[l] = keys_values_[l].select(0, 0);
    values_[l] = keys_values_[l].select(0, 1);
  }
}

// The filled part of each row only, in place: storage (2, B, nh, capacity, hs) seen as 2 * B * nh
// rows of capacity * hs, of which the first positions * hs are filled. A beam that continues
// itself (rows[b] == b: 60% of them in seq2seq-mini-translate's beam-4 search) stays where it
// is; the others get their sources' filled prefixes copied over them where they lie, by
// Backend::move_rows, which copies aside only a source that is itself overwritten (a beam that
// continues another while its own row goes to a third). Gathering every row's prefix into new
// storage, as this path did first, cost that search 9.9 ms per batch; gathering the moved rows'
// prefixes aside and writing them back, as it did next, 5.6 (2 Sapphire Rapids cores).
void KVCache::reorder_filled(const Tensor& rows, int64_t positions) {
  if (positions == 0) return;  // nothing filled, nothing to move
  const Tensor r = rows.contiguous();
  const int64_t* source = r.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch_; ++b)
    LOOM_CHECK(source[b] >= 0 && source[b] < batch_,
               "KVCache::reorder: row {} continues from row {}, outside [0, {})", b, source[b],
               batch_);
  // Every layer has the same heads and head size: one list of moves serves them all.
  const Shape shape = keys_values_.front().shape();  // (2, B, nh, capacity, hs)
  const int64_t heads = shape[2], row = capacity_ * shape[4], filled = positions * shape[4];
  std::vector<int64_t> from, to;  // (kv, rows[b], h) -> (kv, b, h) for each b that moves
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t b = 0; b < batch_; ++b) {
      if (source[b] == b) continue;  // this beam continues itself
      for (int64_t h = 0; h < heads; ++h) {
        from.push_back((kv * batch_ + source[b]) * heads + h);
        to.push_back((kv * batch_ + b) * heads + h);
      }
    }
  if (to.empty()) return;  // every beam continues itself
  const auto moves = static_cast<int64_t>(to.size()), units = 2 * batch_ * heads;
  const Tensor from_index = tensor_i64(from, {moves}), to_index = tensor_i64(to, {moves});
  Backend& cpu = backend(Device::CPU);
  for (Tensor& storage : keys_values_) {  // keys_ and values_ are views of it: they follow
    Tensor prefixes = storage.view({units, row}).narrow(1, 0, filled);
    cpu.move_rows(from_index, to_index, units, filled, prefixes);
  }
}

KVCache KVCache::at_position(const Tensor& position, const Tensor& mask) const {
  KVCache step = *this;  // the same storage: the tensors are handles
  step.position_ = position;
  step.mask_ = mask;
  return step;
}

namespace {

// The positions a step of T positions writes: [length, length + T), or the device `position`
// (graph decoding, T = 1). Checks there is room for them.
void check_room(const LayerCache& cache, int64_t T) {
  if (cache.position.defined())
    LOOM_CHECK(T == 1, "KVCache: a step at a device position takes 1 new position, got {}", T);
  else
    LOOM_CHECK(cache.length + T <= cache.keys.size(2),
               "KVCache: cannot hold {} more positions after {} (capacity {})", T, cache.length,
               cache.keys.size(2));
}

// x's T positions (along `dim`) copied into `storage` (a handle to the cache's tensor) there.
void store(const LayerCache& cache, Tensor storage, int64_t dim, const Tensor& x) {
  if (cache.position.defined())  // to(): x itself when the dtypes are equal
    storage.index_copy_(dim, cache.position, x.to(storage.dtype()));
  else
    storage.narrow(dim, cache.length, x.size(dim)).copy_(x);
}

// k and v as one (2, ...) view when they are the two halves of one tensor (the same storage,
// shape and strides, v further on: keys and values split from one projection); else undefined.
Tensor as_pair(const Tensor& k, const Tensor& v) {
  if (k.impl()->storage() != v.impl()->storage() || k.shape() != v.shape() ||
      k.strides() != v.strides() || k.dtype() != v.dtype() || v.offset() <= k.offset())
    return Tensor();
  Shape shape = k.shape();
  Strides strides = k.strides();
  shape.insert(shape.begin(), 2);
  strides.insert(strides.begin(), v.offset() - k.offset());
  return Tensor(std::make_shared<TensorImpl>(k.impl()->storage(), shape, strides, k.offset(),
                                             k.dtype()));
}

}  // namespace

std::pair<Tensor, Tensor> LayerCache::append(const Tensor& k, const Tensor& v) const {
  // k, v (B, nh, T, hs) -> every key and value so far
  const int64_t T = k.size(2);
  check_room(*this, T);
  const Tensor kv = keys_values.defined() ? as_pair(k, v) : Tensor();  // (2, B, nh, T, hs)
  if (kv.defined()) {
    store(*this, keys_values, 3, kv);
  } else {
    store(*this, keys, 2, k);
    store(*this, values, 2, v);
  }
  // At a device position the whole storage, whose positions after it the mask hides.
  if (position.defined()) return {keys, values};
  return {keys.narrow(2, 0, length + T), values.narrow(2, 0, length + T)};
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        const LayerCache& cache, float dropout_p, bool training) {
  // q (B, nh, Tq, hs), k and v (B, nh, T, hs) -> (B, nh, Tq, hs)
  LOOM_CHECK(q.defined() && k.defined() && q.dim() == 4 && k.dim() == 4 &&
                 q.size(2) <= k.size(2),
             "causal_attention: queries {} must be the last positions of keys {}",
             q.defined() ? shape_str(q.shape()) : "undefined",
             k.defined() ? shape_str(k.shape()) : "undefined");
  const int64_t past = cache.defined() ? cache.length : 0, T = k.size(2), Tq = q.size(2);
  const auto [keys, values] = cache.defined() ? cache.append(k, v) : std::pair{k, v};
  // The first query sits at position past + T - Tq among the keys. A step at a device
  // position (graph decoding) sees all capacity keys, and the cache's mask hides those after it.
  const bool device_position = cache.position.defined();
  return functional::scaled_dot_product_attention(  // (B, nh, Tq, hs)
      q, keys, values,
      {.mask = device_position ? cache.mask : Tensor{},
       .dropout_p = dropout_p,
       .training = training,
       .causal = !device_position,
       .query_offset = device_position ? 0 : past + T - Tq});
}

}  // namespace loom::nn
