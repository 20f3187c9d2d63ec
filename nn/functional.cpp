// nn::functional basics: linear, layer_norm and dropout.
#include "nn/functional.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::nn::functional {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  // x [..., in], weight [out, in], bias [out] -> [..., out]
  LOOM_CHECK(x.defined() && weight.defined(), "linear: undefined input or weight");
  LOOM_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1),
             "linear: input of shape {} does not match weight of shape {} (expected input "
             "[..., {}])",
             shape_str(x.shape()), shape_str(weight.shape()),
             weight.dim() == 2 ? weight.size(1) : -1);
  const int64_t in = weight.size(1), out = weight.size(0);
  LOOM_CHECK(!bias.defined() || bias.shape() == Shape{out},
             "linear: bias of shape {} does not match weight of shape {}", shape_str(bias.shape()),
             shape_str(weight.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = out;
  // One GEMM over all leading positions: [rows, in] @ [in, out].
  Tensor y = matmul(x.reshape({-1, in}), weight.t());  // [rows, out]
  if (bias.defined()) y = y + bias;
  return y.reshape(out_shape);  // [..., out]
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  return loom::layer_norm(x, weight, bias, eps);
}

Tensor dropout(const Tensor& x, float p, bool training) { return loom::dropout(x, p, training); }

}  // namespace loom::nn::functional
