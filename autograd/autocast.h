// Automatic mixed precision: PyTorch's torch.autocast(device_type, dtype=torch.bfloat16) as an
// RAII scope. Inside it:
//   * matmul and linear (and so nn::Linear, scaled_dot_product_attention's two products, every
//     model's projections) cast float32 operands, a Linear's bias included, to bfloat16 and
//     multiply them with float32 accumulation; the result is bfloat16, rounded once (PyTorch's
//     "lower precision" list; on CUDA cuBLAS rounds a Linear's product before adding the bias). So
//     a Linear's output, and GELU of it, stay bfloat16 up to the next product;
//   * the ops PyTorch keeps in float32 (softmax, log_softmax, layer_norm, cross_entropy, sum,
//     exp, log, pow, rsqrt) return their float32 result for bfloat16 inputs instead of
//     rounding it to bfloat16 (cross_entropy and sum read the bfloat16 values in place);
//   * every other op runs in the dtype of its inputs (autograd/ops.h, "bfloat16"): bfloat16
//     with bfloat16 stays bfloat16, bfloat16 with float32 (a residual sum with the float32
//     stream) is float32.
// Parameters stay float32 (the master weights): the casts are recorded (a Linear casts inside its
// one node, whose backward GEMMs write float32 gradients directly), so their gradients arrive in
// float32, and the optimizer and its state never see bfloat16. Like PyTorch, run
// backward and the optimizer step outside the scope (inside works too; backward computes in
// float32 whatever the scope).
//
//   {
//     AutocastGuard amp;                 // torch.autocast("cuda", dtype=torch.bfloat16)
//     loss = cross_entropy(model.forward(x), y);
//   }
//   loss.backward();  optimizer.step();
//
// The state is per thread, as grad mode is; guards nest and restore the previous state.
#pragma once

#include "core/dtype.h"

namespace loom {

namespace autocast {
bool is_enabled();          // at::autocast::is_enabled()
void set_enabled(bool on);  // at::autocast::set_enabled()
DType get_dtype();          // the lower-precision dtype of the scope: bfloat16
}  // namespace autocast

class AutocastGuard {
 public:
  // dtype: the lower precision; bfloat16 is the one loom has (anything else throws).
  explicit AutocastGuard(bool enabled = true, DType dtype = DType::BFloat16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace loom
