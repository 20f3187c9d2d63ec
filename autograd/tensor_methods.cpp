// Method forms (x.sum(), x.softmax(-1), ...) of the free functions in autograd/ops.h; the rule
// for which ops have one is stated in core/tensor.h. Each is a one-line call of the free
// function, so a method and its function can never disagree.
#include "autograd/ops.h"

namespace loom {

// unary elementwise: x.exp() ... x.cos() from the table's list (LOOM_UNARY_FUNCTIONS in
// backends/unary_math.h), the rest by hand
#define LOOM_UNARY_METHOD(Op, name) \
  Tensor Tensor::name() const { return loom::name(*this); }
LOOM_UNARY_FUNCTIONS(LOOM_UNARY_METHOD)
#undef LOOM_UNARY_METHOD
Tensor Tensor::sign() const { return loom::sign(*this); }
Tensor Tensor::clamp(float min, float max) const { return loom::clamp(*this, min, max); }
Tensor Tensor::pow(float exponent) const { return loom::pow(*this, exponent); }

// reductions
Tensor Tensor::sum() const { return loom::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return loom::sum(*this, dim, keepdim); }
Tensor Tensor::mean() const { return loom::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return loom::mean(*this, dim, keepdim); }
Tensor Tensor::max() const { return loom::max(*this); }
Tensor Tensor::max(int64_t dim, bool keepdim) const { return loom::max(*this, dim, keepdim); }
Tensor Tensor::min(int64_t dim, bool keepdim) const { return loom::min(*this, dim, keepdim); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return loom::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(int64_t dim, bool keepdim) const { return loom::argmin(*this, dim, keepdim); }
Tensor Tensor::var(int64_t dim, bool unbiased, bool keepdim) const {
  return loom::var(*this, dim, unbiased, keepdim);
}
Tensor Tensor::sum_to(const Shape& shape) const { return loom::sum_to(*this, shape); }

// softmax
Tensor Tensor::softmax(int64_t dim) const { return loom::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return loom::log_softmax(*this, dim); }

// shape ops that copy
Tensor Tensor::roll(int64_t shift, int64_t dim) const { return loom::roll(*this, shift, dim); }
Tensor Tensor::roll(std::vector<int64_t> shifts, std::vector<int64_t> dims) const {
  return loom::roll(*this, std::move(shifts), std::move(dims));
}
Tensor Tensor::tril(int64_t k) const { return loom::tril(*this, k); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return loom::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(std::vector<int64_t> sizes, int64_t dim) const {
  return loom::split(*this, std::move(sizes), dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  return loom::chunk(*this, chunks, dim);
}
Tensor Tensor::triu(int64_t k) const { return loom::triu(*this, k); }

// two tensors
Tensor Tensor::matmul(const Tensor& other) const { return loom::matmul(*this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, float value) const {
  return loom::masked_fill(*this, mask, value);
}

}  // namespace loom
