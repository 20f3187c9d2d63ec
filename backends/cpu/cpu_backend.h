// The CPU kernel table: OpenBLAS (cblas_sgemm) for matrix products, OpenMP loops for the rest.
// Each group of kernels lives in its own file:
//   memory_and_copy.cpp  allocate/deallocate (cached), host copies, strided copy with casts, fill
//   unary.cpp            unary ops and their derivatives
//   binary.cpp           binary ops, comparisons, where, axpy
//   reduce.cpp           sum/max/min/argmax/argmin along the middle axis
//   softmax.cpp          softmax and log_softmax, forward and backward
//   gemm.cpp             batched cblas_sgemm
//   index.cpp            index_select, index_add, gather, scatter_add
//   random.cpp           Philox uniform and normal numbers
//   layer_norm.cpp, cross_entropy.cpp, adam.cpp   fused neural-network kernels
// The loop machinery they share is in loops.h, the vectorisable math functions in vec_math.h.
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

  // --- layout and fill ---
  void copy(const Tensor& src, Tensor& dst) override;
  void fill(Tensor& dst, double value) override;

  // --- elementwise ---
  void unary(UnaryOp op, const Tensor& x, Tensor& out, float a, float b) override;
  void unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, Tensor& out,
                      float a, float b) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) override;
  void axpy(float alpha, const Tensor& src, Tensor& dst) override;

  // --- reductions and softmax ---
  void reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
              Tensor& out) override;
  void softmax(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log,
               Tensor& out) override;
  void softmax_backward(const Tensor& grad, const Tensor& y, int64_t outer, int64_t n,
                        int64_t inner, bool log, Tensor& out) override;

  // --- matrix products ---
  void gemm(const GemmArgs& args) override;

  // --- indexing ---
  void index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                    Tensor& out) override;
  void index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                 Tensor& out) override;
  void gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
              Tensor& out) override;
  void scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                   Tensor& out) override;

  // --- random numbers ---
  void rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) override;
  void rand_normal(Tensor& out, uint64_t seed, uint64_t offset) override;

  // --- fused neural-network kernels ---
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y,
                  Tensor& mean, Tensor& rstd) override;
  void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                           const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dweight,
                           Tensor& dbias) override;
  void cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     float label_smoothing, Tensor& losses, Tensor& lse) override;
  void cross_entropy_backward(const Tensor& logits, const Tensor& target, const Tensor& lse,
                              int64_t ignore_index, float label_smoothing, float scale,
                              Tensor& dlogits) override;
  void adam_step(const AdamArgs& args, Tensor& param, const Tensor& grad, Tensor& m,
                 Tensor& v) override;

 private:
  CachingAllocator allocator_;  // freed blocks are kept for reuse (backends/caching_allocator.h)
};

}  // namespace loom
