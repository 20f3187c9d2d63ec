// Elementwise launch planning. A kernel walks the output's row-major index space and finds
// each operand's element through that operand's strides. Fewer dims mean less index
// arithmetic per element, so the plan simplifies the shape first, for all operands at once:
//   * size-1 dims are dropped (they never move any offset);
//   * a dim folds into the one before it when every operand steps over the pair as one run
//     (stride[d-1] == stride[d] * shape[d]), as in PyTorch's TensorIterator::coalesce_dimensions.
// A contiguous tensor of any rank thus becomes one dim of stride 1, and when every operand
// ends like that the kernels take their fast path (offset = index).
#include "backends/cuda/launch_plan.h"

#include "core/error.h"

namespace loom::cuda {

Elementwise plan_elementwise(const char* op, const Shape& shape,
                             std::initializer_list<const Tensor*> tensors) {
  const std::vector<const Tensor*> ts(tensors);
  auto stride_of = [](const Tensor* t, size_t d) { return t->defined() ? t->strides()[d] : 0; };
  std::vector<int64_t> dims;                             // kept sizes
  std::vector<std::vector<int64_t>> strides(ts.size());  // kept strides, per operand
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < ts.size() && merge; ++k)
      merge = strides[k].back() == stride_of(ts[k], d) * shape[d];
    for (size_t k = 0; k < ts.size(); ++k) {
      if (merge)
        strides[k].back() = stride_of(ts[k], d);
      else
        strides[k].push_back(stride_of(ts[k], d));
    }
    if (merge)
      dims.back() *= shape[d];
    else
      dims.push_back(shape[d]);
  }
  LOOM_CHECK(dims.size() <= static_cast<size_t>(kMaxDims),
             "{}: a strided view of shape {} has {} dims that cannot be merged; the CUDA "
             "kernels support {} (call contiguous() first)",
             op, shape_str(shape), dims.size(), kMaxDims);

  Elementwise plan;
  plan.layout.ndim = static_cast<int>(dims.size());
  plan.layout.numel = shape_numel(shape);
  for (size_t d = 0; d < dims.size(); ++d) plan.layout.shape[d] = dims[d];
  plan.layout.contiguous = true;  // no dims left (one element) or one dim of stride 1 for all
  for (size_t k = 0; k < ts.size(); ++k) {
    Operand operand;
    operand.data = ts[k]->defined() ? ts[k]->raw_data() : nullptr;
    operand.bf16 = ts[k]->defined() && ts[k]->dtype() == DType::BFloat16;
    for (size_t d = 0; d < dims.size(); ++d) operand.strides[d] = strides[k][d];
    if (ts[k]->defined() && (dims.size() > 1 || (dims.size() == 1 && strides[k][0] != 1)))
      plan.layout.contiguous = false;
    plan.operands.push_back(operand);
  }
  // 32-bit index arithmetic when the index space and every operand's furthest element fit.
  constexpr int64_t kMax32 = int64_t{1} << 31;
  plan.layout.index32 = plan.layout.numel < kMax32;
  for (size_t k = 0; k < ts.size(); ++k) {
    int64_t furthest = 0;
    for (size_t d = 0; d < dims.size(); ++d) furthest += (dims[d] - 1) * strides[k][d];
    if (furthest >= kMax32) plan.layout.index32 = false;
  }
  return plan;
}

Layout matrix_layout(int64_t batch, int64_t rows, int64_t cols) {
  Layout layout;
  layout.ndim = 3;
  layout.numel = batch * rows * cols;
  layout.shape[0] = batch;
  layout.shape[1] = rows;
  layout.shape[2] = cols;
  return layout;
}

Operand matrix_operand(const void* data, int64_t batch_stride, int64_t ld) {
  Operand operand;
  operand.data = const_cast<void*>(data);
  operand.strides[0] = batch_stride;
  operand.strides[1] = ld;
  operand.strides[2] = 1;
  return operand;
}

}  // namespace loom::cuda
