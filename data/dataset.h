// Datasets: indexable collections of examples, as torch.utils.data.Dataset (map-style).
//
// Threading: the DataLoader calls get() on its background thread while the main thread trains,
// so get() must not touch shared mutable state and must not run autograd ops. The datasets
// here build their tensors with Tensor::empty + memcpy from plain host data, which involves
// neither the autograd graph nor a backend kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace loom::data {

// One example: its fields in a fixed order (e.g. {x, y} or {image, label}), CPU tensors.
using Example = std::vector<Tensor>;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Example `index`, 0 <= index < size(). Called from the DataLoader's worker thread.
  virtual Example get(int64_t index) const = 0;
};

// Example i is row i (the slice along dim 0) of each tensor, as torch's TensorDataset.
// The tensors are kept as contiguous CPU tensors without autograd history.
class TensorDataset : public Dataset {
 public:
  // All tensors need at least one dimension and the same size along it.
  explicit TensorDataset(std::vector<Tensor> tensors);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

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
  int64_t context() const { return context_; }
  int64_t stride() const { return stride_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }

 private:
  std::vector<int64_t> tokens_;
  int64_t context_, stride_;
};

}  // namespace loom::data
