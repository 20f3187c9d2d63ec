// Indexing kernels on a contiguous [outer, n, inner] view (int64 indices along the middle axis):
//   index_select  out[o, j, i] = x[o, index[j], i]             index [k]
//   index_add     out[o, index[j], i] += src[o, j, i]          (backward of index_select)
//   index_copy    out[o, index[j], i] = src[o, j, i]           (any element type)
//   gather        out[o, j, i] = x[o, index[o, j, i], i]       index [outer, k, inner]
//   scatter_add   out[o, index[o, j, i], i] += src[o, j, i]    (backward of gather)
// Every index is checked against [0, n) before any element moves. The two accumulating kernels
// may hit the same output element from different j, so they are parallelised over o or over
// columns i (each thread owns whole output columns), never over j.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"

namespace loom {

namespace {

// Throws loom::Error naming op and the first index outside [0, n).
void check_indices(const int64_t* index, int64_t count, int64_t n, const char* op) {
  bool bad = false;
  const bool parallel = count > 4 * cpu::kGrainCheap;
#pragma omp parallel for reduction(|| : bad) schedule(static) if (parallel)
  for (int64_t j = 0; j < count; ++j) bad = bad || index[j] < 0 || index[j] >= n;
  if (!bad) return;
  for (int64_t j = 0; j < count; ++j)
    LOOM_CHECK(index[j] >= 0 && index[j] < n,
               "{}: index {} (at position {}) is out of range for a dimension of size {}; valid "
               "indices are [0, {})",
               op, index[j], j, n, n);
}

template <class T>
void index_select_typed(const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* index,
                        int64_t k, T* out) {
  cpu::parallel_for(0, outer * k, std::max<int64_t>(1, cpu::kGrainCheap / inner),
                    [=](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r) {
                        const int64_t o = r / k, j = r % k;
                        const T* src = x + (o * n + index[j]) * inner;
                        std::memcpy(out + r * inner, src, static_cast<size_t>(inner) * sizeof(T));
                      }
                    });
}

// Runs body(o, i0, i1) over all outer slices and all columns so that no two threads touch the
// same column of the same slice: threads split the slices when there are enough of them, else
// the columns; small problems stay serial.
template <class Body>
void for_each_owned_block(int64_t outer, int64_t inner, int64_t work, const Body& body) {
  const int threads = cpu::max_threads();
  if (work < 2 * cpu::kGrainCheap || threads == 1) {
    for (int64_t o = 0; o < outer; ++o) body(o, 0, inner);
  } else if (outer >= threads) {
    cpu::parallel_for(0, outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) body(o, 0, inner);
    });
  } else {
    cpu::parallel_for(0, inner, 16, [&](int64_t b, int64_t e) {
      for (int64_t o = 0; o < outer; ++o) body(o, b, e);
    });
  }
}

template <class T>
void index_add_typed(const T* src, int64_t outer, int64_t n, int64_t inner, const int64_t* index,
                     int64_t k, T* out) {
  for_each_owned_block(outer, inner, outer * k * inner, [=](int64_t o, int64_t i0, int64_t i1) {
    for (int64_t j = 0; j < k; ++j) {
      const T* s = src + (o * k + j) * inner;
      T* d = out + (o * n + index[j]) * inner;
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) d[i] += s[i];
    }
  });
}

template <class T>
void gather_typed(const T* x, int64_t outer, int64_t n, int64_t inner, const int64_t* index,
                  int64_t k, T* out) {
  cpu::parallel_for(0, outer * k, std::max<int64_t>(1, cpu::kGrainCheap / inner),
                    [=](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r) {
                        const int64_t o = r / k;
                        const int64_t* idx = index + r * inner;
                        const T* xs = x + o * n * inner;
                        T* dst = out + r * inner;
                        for (int64_t i = 0; i < inner; ++i) dst[i] = xs[idx[i] * inner + i];
                      }
                    });
}

template <class T>
void scatter_add_typed(const T* src, int64_t outer, int64_t n, int64_t inner, const int64_t* index,
                       int64_t k, T* out) {
  for_each_owned_block(outer, inner, outer * k * inner, [=](int64_t o, int64_t i0, int64_t i1) {
    T* dst = out + o * n * inner;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = (o * k + j) * inner;
      for (int64_t i = i0; i < i1; ++i) dst[index[r + i] * inner + i] += src[r + i];
    }
  });
}

}  // namespace

void CpuBackend::index_select_impl(const Tensor& xc, int64_t outer, int64_t n, int64_t inner,
                                   const Tensor& idx, Tensor& out) {
  const int64_t k = idx.numel();
  check_indices(idx.data_ptr<int64_t>(), k, n, "index_select");
  if (outer * k * inner == 0) return;
  if (xc.dtype() == DType::Float32)
    index_select_typed(xc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                       out.data_ptr<float>());
  else
    index_select_typed(xc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                       out.data_ptr<int64_t>());
}

void CpuBackend::index_add_impl(const Tensor& sc, int64_t outer, int64_t n, int64_t inner,
                                const Tensor& idx, Tensor& out) {
  const int64_t k = idx.numel();
  check_indices(idx.data_ptr<int64_t>(), k, n, "index_add");
  if (outer * k * inner == 0) return;
  if (out.dtype() == DType::Float32)
    index_add_typed(sc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                    out.data_ptr<float>());
  else
    index_add_typed(sc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                    out.data_ptr<int64_t>());
}

void CpuBackend::index_copy_impl(const Tensor& sc, int64_t outer, int64_t n, int64_t inner,
                                 const Tensor& idx, Tensor& out) {
  const int64_t k = idx.numel();
  const int64_t* index = idx.data_ptr<int64_t>();
  check_indices(index, k, n, "index_copy");
  if (outer * k * inner == 0) return;
  // Rows of raw bytes, so every dtype takes the same loop; each (o, j) row is one memcpy.
  const size_t row_bytes = static_cast<size_t>(inner) * element_size(out.dtype());
  const auto* src = static_cast<const unsigned char*>(sc.raw_data());
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  cpu::parallel_for(0, outer, std::max<int64_t>(1, cpu::kGrainCheap / (k * inner)),
                    [=](int64_t b, int64_t e) {
                      for (int64_t o = b; o < e; ++o)
                        for (int64_t j = 0; j < k; ++j)  // in order: the last of repeats wins
                          std::memcpy(dst + (o * n + index[j]) * row_bytes,
                                      src + (o * k + j) * row_bytes, row_bytes);
                    });
}

void CpuBackend::gather_impl(const Tensor& xc, int64_t outer, int64_t n, int64_t inner,
                             const Tensor& idx, Tensor& out) {
  const int64_t slices = outer * inner;
  const int64_t k = slices > 0 ? idx.numel() / slices : 0;
  check_indices(idx.data_ptr<int64_t>(), idx.numel(), n, "gather");
  if (outer * k * inner == 0) return;
  if (xc.dtype() == DType::Float32)
    gather_typed(xc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                 out.data_ptr<float>());
  else
    gather_typed(xc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                 out.data_ptr<int64_t>());
}

void CpuBackend::scatter_add_impl(const Tensor& sc, int64_t outer, int64_t n, int64_t inner,
                                  const Tensor& idx, Tensor& out) {
  const int64_t slices = outer * inner;
  const int64_t k = slices > 0 ? idx.numel() / slices : 0;
  check_indices(idx.data_ptr<int64_t>(), idx.numel(), n, "scatter_add");
  if (outer * k * inner == 0) return;
  if (out.dtype() == DType::Float32)
    scatter_add_typed(sc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                      out.data_ptr<float>());
  else
    scatter_add_typed(sc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                      out.data_ptr<int64_t>());
}

}  // namespace loom
