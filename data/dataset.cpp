#include "data/dataset.h"

#include <cstring>

#include "core/error.h"

namespace loom::data {

TensorDataset::TensorDataset(std::vector<Tensor> tensors) {
  LOOM_CHECK(!tensors.empty(), "TensorDataset: needs at least one tensor");
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
