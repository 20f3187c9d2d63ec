#include "data/dataset.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "data/splitmix.h"

namespace loom::data {

TensorDataset::TensorDataset(std::vector<Tensor> tensors, std::vector<std::string> names)
    : names_(std::move(names)) {
  LOOM_CHECK(!tensors.empty(), "TensorDataset: needs at least one tensor");
  LOOM_CHECK(names_.empty() || names_.size() == tensors.size(),
             "TensorDataset: {} names for {} tensors; name every tensor or none", names_.size(),
             tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    LOOM_CHECK(t.defined() && t.dim() >= 1,
               "TensorDataset: tensor {} must have at least one dimension, got shape {}", k,
               t.defined() ? shape_str(t.shape()) : "undefined");
    LOOM_CHECK(t.size(0) == tensors[0].size(0),
               "TensorDataset: tensor {} has shape {} but tensor 0 has shape {}; the sizes of "
               "dim 0 (the number of examples) must agree",
               k, shape_str(t.shape()), shape_str(tensors[0].shape()));
    // Host copies made here, on the caller's thread, so that get() only reads memory.
    tensors_.push_back(t.detach().to(Device::CPU).contiguous());
  }
  size_ = tensors_[0].size(0);
}

Example TensorDataset::get(int64_t index) const {
  LOOM_CHECK(index >= 0 && index < size_, "TensorDataset::get: index {} out of range [0, {})",
             index, size_);
  Example example;
  example.reserve(tensors_.size());
  for (const Tensor& t : tensors_) {
    const Shape row_shape(t.shape().begin() + 1, t.shape().end());
    Tensor row = Tensor::empty(row_shape, t.dtype(), Device::CPU);
    const size_t row_bytes = static_cast<size_t>(row.numel()) * element_size(t.dtype());
    std::memcpy(row.raw_data(), static_cast<const char*>(t.raw_data()) + index * row_bytes,
                row_bytes);
    example.push_back(std::move(row));
  }
  return example;
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  LOOM_CHECK(dataset_ != nullptr, "Subset: the dataset is null");
  for (int64_t i : indices_)
    LOOM_CHECK(i >= 0 && i < dataset_->size(),
               "Subset: index {} is outside the dataset's {} examples", i, dataset_->size());
}

Example Subset::get(int64_t index) const {
  LOOM_CHECK(index >= 0 && index < size(), "Subset::get: index {} out of range [0, {})", index,
             size());
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  uint64_t seed) {
  LOOM_CHECK(dataset != nullptr, "random_split: the dataset is null");
  const int64_t n = dataset->size();
  int64_t total = 0;
  for (int64_t length : lengths) {
    LOOM_CHECK(length >= 0, "random_split: length {} is negative", length);
    total += length;
  }
  LOOM_CHECK(total == n,
             "random_split: the lengths sum to {} but the dataset has {} examples", total, n);
  const std::vector<int64_t> order = random_permutation(n, seed);
  std::vector<std::shared_ptr<Subset>> subsets;
  auto next = order.begin();
  for (int64_t length : lengths) {
    subsets.push_back(std::make_shared<Subset>(dataset, std::vector<int64_t>(next, next + length)));
    next += length;
  }
  return subsets;
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<double>& fractions,
                                                  uint64_t seed) {
  LOOM_CHECK(dataset != nullptr, "random_split: the dataset is null");
  double sum = 0;
  for (double f : fractions) {
    LOOM_CHECK(f >= 0 && f <= 1, "random_split: fraction {} is outside [0, 1]", f);
    sum += f;
  }
  LOOM_CHECK(std::abs(sum - 1.0) < 1e-6, "random_split: the fractions sum to {}, not 1", sum);
  // PyTorch's rule: floor(f * n) each, then the examples left over one by one, round robin.
  const int64_t n = dataset->size();
  std::vector<int64_t> lengths;
  for (double f : fractions) lengths.push_back(static_cast<int64_t>(std::floor(f * n)));
  int64_t left = n - std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  for (size_t i = 0; left > 0; i = (i + 1) % lengths.size(), --left) ++lengths[i];
  return random_split(std::move(dataset), lengths, seed);
}

LanguageModelDataset::LanguageModelDataset(std::vector<int64_t> tokens, int64_t context,
                                           int64_t stride)
    : tokens_(std::move(tokens)), context_(context), stride_(stride == 0 ? context : stride) {
  LOOM_CHECK(context_ >= 1 && stride_ >= 1,
             "LanguageModelDataset: context ({}) and stride ({}) must be positive", context,
             stride);
  LOOM_CHECK(static_cast<int64_t>(tokens_.size()) >= context_ + 1,
             "LanguageModelDataset: {} tokens are too few for one window of context {} "
             "(needs context + 1 = {} tokens: the targets are shifted by one)",
             tokens_.size(), context_, context_ + 1);
}

int64_t LanguageModelDataset::size() const {
  // Window i needs tokens up to s + context (inclusive) with s = i * stride.
  return (static_cast<int64_t>(tokens_.size()) - context_ - 1) / stride_ + 1;
}

Example LanguageModelDataset::get(int64_t index) const {
  LOOM_CHECK(index >= 0 && index < size(),
             "LanguageModelDataset::get: index {} out of range [0, {})", index, size());
  const int64_t start = index * stride_;
  const size_t bytes = static_cast<size_t>(context_) * sizeof(int64_t);
  Tensor x = Tensor::empty({context_}, DType::Int64, Device::CPU);  // [T]
  Tensor y = Tensor::empty({context_}, DType::Int64, Device::CPU);  // [T]
  std::memcpy(x.raw_data(), tokens_.data() + start, bytes);
  std::memcpy(y.raw_data(), tokens_.data() + start + 1, bytes);
  return {x, y};
}

}  // namespace loom::data
