// nn::functional basics: linear, layer_norm and dropout.
#include "nn/functional.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace loom::nn::functional {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  // x [..., in], weight [out, in], bias [out] -> [..., out]: one GEMM over all leading
  // positions that starts from the bias (loom::linear checks the shapes).
  LOOM_CHECK(x.defined() && weight.defined(), "linear: undefined input or weight");
  return loom::linear(x, weight, bias);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  return loom::layer_norm(x, weight, bias, eps);
}

std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual,
                                         const Tensor& weight, const Tensor& bias, float eps) {
  return loom::add_layer_norm(x, residual, weight, bias, eps);
}

Tensor dropout(const Tensor& x, float p, bool training) { return loom::dropout(x, p, training); }

}  // namespace loom::nn::functional
