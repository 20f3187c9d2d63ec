// Indexing kernels on a contiguous [outer, n, inner] view (int64 indices along the middle axis):
//   index_select  out[o, j, i] = x[o, index[j], i]             index [k]
//   index_add     out[o, index[j], i] += src[o, j, i]          (backward of index_select)
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

void check_extents(const char* op, int64_t outer, int64_t n, int64_t inner) {
  LOOM_CHECK(outer >= 0 && n >= 0 && inner >= 0, "{}: negative extent [{},{},{}]", op, outer, n,
             inner);
}

// The index tensor, contiguous and int64, with its element count checked.
Tensor index_input(const Tensor& index, int64_t numel, const char* op) {
  cpu::check_dtype(index, DType::Int64, op, "index");
  cpu::check_numel(index, numel, op, "index");
  return cpu::contiguous_input(index);
}

// Operands of the same dtype as `like`, contiguous, with the given element counts.
void check_data(const Tensor& t, DType dtype, int64_t numel, const char* op, const char* name) {
  cpu::check_dtype(t, dtype, op, name);
  cpu::check_contiguous(t, op, name);
  cpu::check_numel(t, numel, op, name);
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

void CpuBackend::index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                              const Tensor& index, Tensor& out) {
  const char* op = "index_select";
  check_extents(op, outer, n, inner);
  LOOM_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {}", op, shape_str(index.shape()));
  const int64_t k = index.numel();
  const Tensor idx = index_input(index, k, op);
  const Tensor xc = cpu::contiguous_input(x);
  check_data(xc, xc.dtype(), outer * n * inner, op, "input");
  check_data(out, xc.dtype(), outer * k * inner, op, "out");
  check_indices(idx.data_ptr<int64_t>(), k, n, op);
  if (outer * k * inner == 0) return;
  if (xc.dtype() == DType::Float32)
    index_select_typed(xc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                       out.data_ptr<float>());
  else
    index_select_typed(xc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                       out.data_ptr<int64_t>());
}

void CpuBackend::index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                           const Tensor& index, Tensor& out) {
  const char* op = "index_add";
  check_extents(op, outer, n, inner);
  LOOM_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {}", op, shape_str(index.shape()));
  const int64_t k = index.numel();
  const Tensor idx = index_input(index, k, op);
  const Tensor sc = cpu::contiguous_input(src);
  check_data(out, out.dtype(), outer * n * inner, op, "out");
  check_data(sc, out.dtype(), outer * k * inner, op, "src");
  check_indices(idx.data_ptr<int64_t>(), k, n, op);
  if (outer * k * inner == 0) return;
  if (out.dtype() == DType::Float32)
    index_add_typed(sc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                    out.data_ptr<float>());
  else
    index_add_typed(sc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                    out.data_ptr<int64_t>());
}

void CpuBackend::gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                        const Tensor& index, Tensor& out) {
  const char* op = "gather";
  check_extents(op, outer, n, inner);
  const int64_t slices = outer * inner;
  LOOM_CHECK(slices > 0 ? index.numel() % slices == 0 : index.numel() == 0,
             "{}: index with {} elements does not split into [{}, k, {}]", op, index.numel(), outer,
             inner);
  const int64_t k = slices > 0 ? index.numel() / slices : 0;
  const Tensor idx = index_input(index, index.numel(), op);
  const Tensor xc = cpu::contiguous_input(x);
  check_data(xc, xc.dtype(), outer * n * inner, op, "input");
  check_data(out, xc.dtype(), outer * k * inner, op, "out");
  check_indices(idx.data_ptr<int64_t>(), idx.numel(), n, op);
  if (outer * k * inner == 0) return;
  if (xc.dtype() == DType::Float32)
    gather_typed(xc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                 out.data_ptr<float>());
  else
    gather_typed(xc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                 out.data_ptr<int64_t>());
}

void CpuBackend::scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                             const Tensor& index, Tensor& out) {
  const char* op = "scatter_add";
  check_extents(op, outer, n, inner);
  const int64_t slices = outer * inner;
  LOOM_CHECK(slices > 0 ? index.numel() % slices == 0 : index.numel() == 0,
             "{}: index with {} elements does not split into [{}, k, {}]", op, index.numel(), outer,
             inner);
  const int64_t k = slices > 0 ? index.numel() / slices : 0;
  const Tensor idx = index_input(index, index.numel(), op);
  const Tensor sc = cpu::contiguous_input(src);
  check_data(out, out.dtype(), outer * n * inner, op, "out");
  check_data(sc, out.dtype(), outer * k * inner, op, "src");
  check_indices(idx.data_ptr<int64_t>(), idx.numel(), n, op);
  if (outer * k * inner == 0) return;
  if (out.dtype() == DType::Float32)
    scatter_add_typed(sc.data_ptr<float>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                      out.data_ptr<float>());
  else
    scatter_add_typed(sc.data_ptr<int64_t>(), outer, n, inner, idx.data_ptr<int64_t>(), k,
                      out.data_ptr<int64_t>());
}

}  // namespace loom
