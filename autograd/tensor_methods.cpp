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
Tensor Tensor::clamp(std::optional<float> min, std::optional<float> max) const {
  return loom::clamp(*this, min, max);
}
Tensor Tensor::clamp_min(float min) const { return loom::clamp_min(*this, min); }
Tensor Tensor::clamp_max(float max) const { return loom::clamp_max(*this, max); }
Tensor Tensor::floor() const { return loom::floor(*this); }
Tensor Tensor::ceil() const { return loom::ceil(*this); }
Tensor Tensor::round() const { return loom::round(*this); }
Tensor Tensor::trunc() const { return loom::trunc(*this); }
Tensor Tensor::softplus(float beta, float threshold) const {
  return loom::softplus(*this, beta, threshold);
}
Tensor Tensor::leaky_relu(float negative_slope) const {
  return loom::leaky_relu(*this, negative_slope);
}
Tensor Tensor::elu(float alpha) const { return loom::elu(*this, alpha); }
Tensor Tensor::logit(std::optional<float> eps) const { return loom::logit(*this, eps); }

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
Tensor Tensor::std(int64_t dim, bool unbiased, bool keepdim) const {
  return loom::std(*this, dim, unbiased, keepdim);
}
Tensor Tensor::sum(const Shape& dims, bool keepdim) const {
  return loom::sum(*this, dims, keepdim);
}
Tensor Tensor::mean(const Shape& dims, bool keepdim) const {
  return loom::mean(*this, dims, keepdim);
}
Tensor Tensor::var(const Shape& dims, int64_t correction, bool keepdim) const {
  return loom::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(const Shape& dims, int64_t correction, bool keepdim) const {
  return loom::std(*this, dims, correction, keepdim);
}
Tensor Tensor::prod() const { return loom::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return loom::prod(*this, dim, keepdim); }
Tensor Tensor::logsumexp(int64_t dim, bool keepdim) const {
  return loom::logsumexp(*this, dim, keepdim);
}
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const {
  return loom::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(float p) const { return loom::norm(*this, p); }
Tensor Tensor::norm(float p, int64_t dim, bool keepdim) const {
  return loom::norm(*this, p, dim, keepdim);
}
Tensor Tensor::norm(float p, const Shape& dims, bool keepdim) const {
  return loom::norm(*this, p, dims, keepdim);
}
Tensor Tensor::cumsum(int64_t dim) const { return loom::cumsum(*this, dim); }
Tensor Tensor::cumprod(int64_t dim) const { return loom::cumprod(*this, dim); }

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
Tensor Tensor::outer(const Tensor& other) const { return loom::outer(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return loom::bmm(*this, other); }
Tensor Tensor::baddbmm(const Tensor& batch1, const Tensor& batch2, float beta, float alpha) const {
  return loom::baddbmm(*this, batch1, batch2, beta, alpha);
}
Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, float beta, float alpha) const {
  return loom::addmm(*this, mat1, mat2, beta, alpha);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return loom::masked_fill(*this, mask, value);
}

// dtypes: comparisons, logical ops, where, tests and rounding division (autograd/ops_dtype.h)
#define LOOM_COMPARISON_METHOD(name)                                                    \
  Tensor Tensor::name(const Tensor& other) const { return loom::name(*this, other); } \
  Tensor Tensor::name(const Scalar& other) const { return loom::name(*this, other); }
LOOM_COMPARISON_METHOD(eq)
LOOM_COMPARISON_METHOD(ne)
LOOM_COMPARISON_METHOD(lt)
LOOM_COMPARISON_METHOD(le)
LOOM_COMPARISON_METHOD(gt)
LOOM_COMPARISON_METHOD(ge)
#undef LOOM_COMPARISON_METHOD
Tensor Tensor::logical_and(const Tensor& other) const { return loom::logical_and(*this, other); }
Tensor Tensor::logical_or(const Tensor& other) const { return loom::logical_or(*this, other); }
Tensor Tensor::logical_xor(const Tensor& other) const { return loom::logical_xor(*this, other); }
Tensor Tensor::logical_not() const { return loom::logical_not(*this); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return loom::where(condition, *this, other);
}
Tensor Tensor::any() const { return loom::any(*this); }
Tensor Tensor::all() const { return loom::all(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return loom::any(*this, dim, keepdim); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return loom::all(*this, dim, keepdim); }
bool Tensor::equal(const Tensor& other) const { return loom::equal(*this, other); }
bool Tensor::allclose(const Tensor& other, double rtol, double atol) const {
  return loom::allclose(*this, other, rtol, atol);
}
Tensor Tensor::div(const Tensor& other, std::optional<std::string_view> rounding_mode) const {
  return loom::div(*this, other, rounding_mode);
}
Tensor Tensor::div(const Scalar& other, std::optional<std::string_view> rounding_mode) const {
  return loom::div(*this, other, rounding_mode);
}
bool Tensor::is_floating_point() const { return loom::is_floating_point(dtype()); }

// selection, sorting and random (autograd/selection.h); normal_ and uniform_, which write in
// place, are in autograd/ops_creation.cpp beside the generator
ValuesIndices Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return loom::topk(*this, k, dim, largest, sorted);
}
ValuesIndices Tensor::sort(int64_t dim, bool descending) const {
  return loom::sort(*this, dim, descending);
}
Tensor Tensor::argsort(int64_t dim, bool descending) const {
  return loom::argsort(*this, dim, descending);
}
Tensor Tensor::min() const { return loom::min(*this); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const {
  return loom::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const Shape& dims, bool keepdim) const {
  return loom::amin(*this, dims, keepdim);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return loom::gather(*this, dim, index);
}
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return loom::index_select(*this, dim, index);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return loom::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Scalar& value) const {
  return loom::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return loom::scatter_add(*this, dim, index, src);
}
Tensor Tensor::bernoulli() const { return loom::bernoulli(*this); }
Tensor Tensor::bernoulli(float p) const { return loom::bernoulli(*this, p); }
Tensor Tensor::multinomial(int64_t num_samples, bool replacement) const {
  return loom::multinomial(*this, num_samples, replacement);
}

}  // namespace loom
