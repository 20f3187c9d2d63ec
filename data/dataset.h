// Datasets: indexable collections of examples, as torch.utils.data.Dataset (map-style).
//
// Threading: the DataLoader calls get() on its background thread while the main thread trains,
// so get() must not touch shared mutable state and must not run autograd ops. The datasets
// here build their tensors with Tensor::empty + memcpy from plain host data, which involves
// neither the autograd graph nor a backend kernel.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace loom::data {

// One example: its fields in a fixed order (e.g. {x, y} or {image, label}), CPU tensors.
using Example = std::vector<Tensor>;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Example `index`, 0 <= index < size(). Called from the DataLoader's worker threads.
  virtual Example get(int64_t index) const = 0;
  // The names of an example's fields, in order (e.g. {"image", "label"}), which a batch of
  // the DataLoader answers to: batch["image"]. Empty when the fields have no names.
  virtual std::vector<std::string> field_names() const { return {}; }
};

// Example i is row i (the slice along dim 0) of each tensor, as torch's TensorDataset.
// The tensors are kept as contiguous CPU tensors without autograd history.
class TensorDataset : public Dataset {
 public:
  // All tensors need at least one dimension and the same size along it. `names`, if given,
  // names the fields (one per tensor): TensorDataset({x, y}, {"data", "target"}).
  explicit TensorDataset(std::vector<Tensor> tensors, std::vector<std::string> names = {});
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  std::vector<std::string> field_names() const override { return names_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  std::vector<std::string> names_;
  int64_t size_ = 0;
};

// The examples of `dataset` at `indices`, in that order (torch.utils.data.Subset): example i
// is dataset.get(indices[i]). The subset shares the dataset; it copies nothing.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  std::vector<std::string> field_names() const override { return dataset_->field_names(); }
  const std::vector<int64_t>& indices() const { return indices_; }
  const Dataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// torch.utils.data.random_split: the examples of `dataset` dealt into disjoint subsets of the
// given lengths, in a random order fixed by `seed` (loom's SplitMix64 permutation, so the same
// seed gives the same split everywhere, though not the split PyTorch's generator would).
// Lengths are counts that sum to dataset->size(), or fractions that sum to 1: each subset
// then gets floor(fraction * size) examples and the remainder is dealt one by one to the
// subsets in order, as PyTorch does. random_split(data, {50000, 10000}, 0) and
// random_split(data, {0.9, 0.1}, 0) both work.
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed = 0);
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<double>& fractions,
                                                  uint64_t seed = 0);
// A braced list picks the form by its element type (a plain {8, 2} would otherwise match both).
template <typename T>
  requires std::is_arithmetic_v<T>
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  std::initializer_list<T> lengths,
                                                  uint64_t seed = 0) {
  if constexpr (std::is_floating_point_v<T>)
    return random_split(std::move(dataset), std::vector<double>(lengths.begin(), lengths.end()),
                        seed);
  else
    return random_split(std::move(dataset), std::vector<int64_t>(lengths.begin(), lengths.end()),
                        seed);
}

// Next-token prediction windows over a token stream (Radford et al. 2018, eq. 1: maximise
// sum_i log P(u_i | u_{i-k}, ..., u_{i-1})). Example i starts at s = i * stride and is
//   x = tokens[s     : s + context]       int64 [context]
//   y = tokens[s + 1 : s + context + 1]   int64 [context]   (x shifted left by one)
// stride = context tiles the stream with disjoint windows, so an epoch sees each token once;
// stride = 1 makes every offset a window, and a shuffling DataLoader then draws random
// windows as nanoGPT's get_batch does (without replacement within an epoch).
class LanguageModelDataset : public Dataset {
 public:
  // stride 0 means stride = context. Needs tokens.size() >= context + 1.
  LanguageModelDataset(std::vector<int64_t> tokens, int64_t context, int64_t stride = 0);
  int64_t size() const override;
  Example get(int64_t index) const override;  // {x, y}
  std::vector<std::string> field_names() const override { return {"x", "y"}; }
  int64_t context() const { return context_; }
  int64_t stride() const { return stride_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }

 private:
  std::vector<int64_t> tokens_;
  int64_t context_, stride_;
};

}  // namespace loom::data
