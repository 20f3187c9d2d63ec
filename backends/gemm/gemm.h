// Matrix products: C[b] = alpha op(A[b]) op(B[b]) + beta C[b] (+ a bias row, then an
// activation) over a batch, described by GemmArgs. The checks, the public method and the CPU's
// products (OpenBLAS) are in gemm.cpp; the CUDA ones (cuBLAS, and loom's own kernel for a
// product of a few rows) in gemm.cu.
#pragma once

#include <cstdint>
#include <optional>

#include "backends/unary_math.h"
#include "core/dtype.h"

namespace loom {

struct GemmArgs {
  // C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b in [0, batch); row-major matrices.
  // op(X) = X^T when trans is set. lda/ldb/ldc are row strides in elements; stride_* the
  // distance between consecutive batch items (0 = the same matrix for every item).
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  // Element types: A and B are both float32 or both bfloat16, C is float32 or bfloat16. Products
  // are always accumulated in float32 (bfloat16 products are exact in float32: cuBLAS's
  // CUBLAS_COMPUTE_32F on tensor cores, float32 BLAS on the upcast values on the CPU); a
  // bfloat16 C is rounded once, at the end.
  DType ab_type = DType::Float32, c_type = DType::Float32;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  // B in panels (0: in rows, as lda/ldb say): op(B) [k, n] stored as its columns in panels of
  // b_panel each, panel j holding columns [j * b_panel, (j + 1) * b_panel) as a [k, b_panel]
  // row-major block at b + j * ldb (zeros past column n), not transposed. What a
  // PackedWeightsGuard keeps of a weight (autograd/packed_weights.h): the columns a tile of C
  // reads at one step of k lie side by side, and a panel's k steps follow one another in memory.
  // CPU, float32, batch 1 only; b_panel is cpu::panel_columns().
  int64_t b_panel = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  // Items in groups of `group` (0: one group of all), for batches that no single stride reaches:
  // the heads of a (B, T, nh, hs) projection read as (B, nh, T, hs), item b * nh + h at
  // b * T * nh * hs + h * hs. Item i = o * group + j lies at o * group_stride_* + j * stride_*
  // (elements). Backend::gemm hands the groups one by one to a kernel that does not take them
  // all at once (cpu::gemm_takes_groups).
  int64_t group = 0;
  int64_t group_stride_a = 0, group_stride_b = 0, group_stride_c = 0;
  // A float32 row of n values (or null) that C starts from: C = alpha op(A) op(B) + beta C +
  // bias, the bias added to every row of every batch item (a Linear's y = x W^T + b, torch's
  // addmm with a broadcast input). A bfloat16 C takes the bias rounded to bfloat16, as
  // PyTorch's autocast casts addmm's input.
  const float* bias = nullptr;
  // An activation (relu, gelu or gelu_tanh) applied to every value of C as it is written, after
  // the bias and before a bfloat16 C is rounded: C = act(alpha op(A) op(B) + beta C + bias), a
  // Linear and its activation as one product (cuBLASLt's RELU_BIAS / GELU_BIAS epilogues).
  std::optional<UnaryOp> activation;
  // Where the activation goes: null, into C itself (above). Set, C keeps the product (and its
  // bias) and activation_out [m, n] (row stride ld_activation_out) gets activation(C +
  // activation_bias), activation_bias a float32 row of n values or null: a Linear and its
  // activation in a training step, whose backward reads the product x W^T as well as the
  // output act(x W^T + b) (autograd's linear_activation). CPU, float32, one item: the tiles
  // write it as they finish each band of C's rows, while the band is in the L1 cache, which
  // saves the activation's own pass reading C back from memory.
  float* activation_out = nullptr;
  int64_t ld_activation_out = 0;
  const float* activation_bias = nullptr;

  // Element offsets of item i's matrices.
  int64_t offset_a(int64_t i) const { return offset(i, stride_a, group_stride_a); }
  int64_t offset_b(int64_t i) const { return offset(i, stride_b, group_stride_b); }
  int64_t offset_c(int64_t i) const { return offset(i, stride_c, group_stride_c); }
  // Group o's items as a batch of one stride each (group > 0).
  GemmArgs group_args(int64_t o) const;
  // Item i's offset along an operand of these strides.
  int64_t offset(int64_t i, int64_t stride, int64_t group_stride) const {
    return group > 0 ? i / group * group_stride + i % group * stride : i * stride;
  }
};

// Backend::gemm's arguments, after its checks: m, n, batch > 0; pointers and strides checked;
// k may be 0 (C = beta * C).
using GemmKernel = void(const GemmArgs& args);

namespace cpu {
GemmKernel gemm;
// Whether cpu::gemm computes a batch in groups (GemmArgs::group) in one call: float32 products
// in its register tiles (gemm_tiled), whose operands it reads where they lie.
bool gemm_takes_groups(const GemmArgs& args);
}  // namespace cpu

namespace cuda {
GemmKernel gemm;
}  // namespace cuda

}  // namespace loom
