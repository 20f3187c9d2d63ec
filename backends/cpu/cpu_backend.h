// The CPU kernel table: OpenBLAS (cblas_sgemm) for matrix products, OpenMP loops for the rest.
// Each group of kernels lives in its own file:
//   memory_and_copy.cpp  allocate/deallocate (cached), host copies, strided copy with casts, fill
//   unary.cpp            unary ops and their derivatives (loops over backends/unary_math.h)
//   binary.cpp           binary ops, comparisons, where, axpy
//   reduce.cpp           sum/max/min/argmax/argmin along the middle axis
//   softmax.cpp          softmax and log_softmax, forward and backward
//   gemm.cpp             batched cblas_sgemm
//   index.cpp            index_select, index_add, gather, scatter_add
//   random.cpp           Philox uniform and normal numbers
//   layer_norm.cpp, cross_entropy.cpp, adam.cpp   fused neural-network kernels
//   multi_tensor.cpp     clip_grad_norm's sum of squares and scaling over lists of tensors
//   attention.cpp        fused scaled-dot-product attention (the reference for the CUDA kernels)
// The loop machinery they share is in loops.h, the vectorisable math functions in vec_math.h.
// Every kernel is an *_impl: Backend's public methods (backends/backend.cpp) check the
// arguments first.
#pragma once

#include "backends/backend.h"
#include "backends/caching_allocator.h"

namespace loom {

class CpuBackend final : public Backend {
 public:
  CpuBackend();  // in memory_and_copy.cpp

  // --- memory ---
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;

 protected:
  // The kernels (see Backend: the checks are done before they are called).
  void copy_impl(const Tensor& src, Tensor& dst) override;
  void fill_impl(Tensor& dst, double value) override;
  void arange_impl(Tensor& dst, double start, double step) override;
  void unary_impl(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) override;
  void unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y,
                           Tensor& out, float a, float b) override;
  void bias_unary_impl(UnaryOp op, const Tensor& x, const Tensor& bias, Tensor& out) override;
  void bias_unary_backward_impl(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& bias,
                                Tensor& out) override;
  void binary_impl(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void where_impl(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) override;
  void axpy_impl(float alpha, const Tensor& src, Tensor& dst) override;
  void reduce_impl(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                   Tensor& out) override;
  void softmax_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
                    Tensor& out) override;
  void softmax_backward_impl(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                             int64_t inner, bool log, Tensor& out) override;
  void gemm_impl(const GemmArgs& args) override;
  void gemm_bfloat16(const GemmArgs& args);  // bfloat16 A/B or C, through float32 buffers
  // GemmArgs::activation over a float32 C, in place (unary.cpp, with the unary ops' loops).
  static void activate_gemm_output(const GemmArgs& args);
  void index_select_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                         const Tensor& index, Tensor& out) override;
  void index_add_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                      const Tensor& index, Tensor& out) override;
  void index_copy_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                       const Tensor& index, Tensor& out) override;
  void gather_impl(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                   Tensor& out) override;
  void scatter_add_impl(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                        const Tensor& index, Tensor& out) override;
  void rand_uniform_impl(Tensor& out, uint64_t seed, uint64_t offset) override;
  void rand_normal_impl(Tensor& out, uint64_t seed, uint64_t offset) override;
  void layer_norm_impl(const Tensor& x, const Tensor& residual, const Tensor& weight,
                       const Tensor& bias, float eps, Tensor& sum, Tensor& y, Tensor& mean,
                       Tensor& rstd) override;
  void layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                                Tensor& dbias) override;
  void cross_entropy_impl(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                          float label_smoothing, Tensor& losses, Tensor& lse) override;
  void cross_entropy_backward_impl(const Tensor& logits, const Tensor& target, const Tensor& lse,
                                   int64_t ignore_index, float label_smoothing, float scale,
                                   const Tensor& scale_by, Tensor& dlogits) override;
  void adam_step_impl(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                      Tensor& v) override;
  void adam_step_multi_impl(const AdamArgs& args, std::span<Tensor> params,
                            std::span<const Tensor> grads, std::span<Tensor> ms,
                            std::span<Tensor> vs) override;
  void sum_of_squares_multi_impl(std::span<const Tensor> xs, Tensor& out) override;
  void scale_multi_impl(std::span<Tensor> xs, float alpha) override;
  void attention_forward_impl(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& mask, const AttentionArgs& args, Tensor& out,
                              Tensor& lse) override;
  void attention_backward_impl(const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& mask, const Tensor& out,
                               const Tensor& lse, const AttentionArgs& args, Tensor& dq,
                               Tensor& dk, Tensor& dv) override;
  void sample_impl(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                   uint64_t seed, uint64_t offset, const Tensor& offset_by,
                   Tensor& out) override;  // sample.cpp

 private:
  // The reference path of the elementwise kernels for bfloat16 operands: t itself when it is
  // float32, else an exact float32 copy of it (undefined stays undefined).
  Tensor float32_copy(const Tensor& t);
  // Runs kernel(out32) on a float32 output: `out` itself, or a float32 buffer whose values
  // are then rounded once into the bfloat16 `out`.
  template <class Kernel>
  void into(Tensor& out, const Kernel& kernel) {
    if (out.dtype() == DType::Float32) return kernel(out);
    Tensor result = Tensor::empty(out.shape(), DType::Float32, Device::CPU);
    kernel(result);
    copy(result, out);
  }

  CachingAllocator allocator_;  // freed blocks are kept for reuse (backends/caching_allocator.h)
};

namespace cpu {
// The next token from one row of n logits (sample.cpp; the rules of Backend::sample), drawn
// at `uniform` in [0, 1); models::sample_token runs it on a host vector.
int64_t sample_row(const float* logits, int64_t n, float temperature, int64_t top_k, float top_p,
                   float uniform);
}  // namespace cpu

}  // namespace loom
