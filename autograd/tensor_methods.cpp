// Method forms (x.sum(), x.softmax(-1), ...) of the free functions in autograd/ops.h.
#include "autograd/ops.h"

namespace loom {

Tensor Tensor::sum() const { return loom::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return loom::sum(*this, dim, keepdim); }
Tensor Tensor::mean() const { return loom::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return loom::mean(*this, dim, keepdim); }
Tensor Tensor::max(int64_t dim, bool keepdim) const { return loom::max(*this, dim, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return loom::argmax(*this, dim, keepdim); }
Tensor Tensor::exp() const { return loom::exp(*this); }
Tensor Tensor::log() const { return loom::log(*this); }
Tensor Tensor::sqrt() const { return loom::sqrt(*this); }
Tensor Tensor::abs() const { return loom::abs(*this); }
Tensor Tensor::pow(float exponent) const { return loom::pow(*this, exponent); }
Tensor Tensor::softmax(int64_t dim) const { return loom::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return loom::log_softmax(*this, dim); }
Tensor Tensor::matmul(const Tensor& other) const { return loom::matmul(*this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, float value) const {
  return loom::masked_fill(*this, mask, value);
}

}  // namespace loom
