// Reductions along the middle axis of a contiguous [outer, n, inner] block: Backend::reduce's
// checks, and the CPU loops of sum, max, min (values) and argmax, argmin (int64 indices).
//   * inner == 1: each output reduces one contiguous row. Rows go to threads; a few long rows
//     (the full reduction x.sum() is outer = inner = 1) are instead split into one chunk per
//     thread, and the chunks' partial results are merged in order.
//   * inner > 1: out[o, i] = reduce_j x[o, j, i]; the loop over i is innermost, so each step
//     reads a contiguous row of x and updates a block of accumulators (vectorised across i).
// Sums of float32 accumulate in double, so the result does not depend on the thread count in
// any visible way and matches PyTorch's (pairwise) summation to float precision. Max/min
// propagate NaN and argmax/argmin treat NaN as the extreme, like PyTorch; ties go to the first
// index.
#include <cstddef>
#include <iterator>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/elementwise/cpu_float32.h"
#include "backends/reduce/reduce.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public method
namespace {
// The op's name in messages, in ReduceOp's order.
const char* reduce_name(ReduceOp op) {
  static constexpr const char* kNames[] = {"sum", "max", "min", "argmax", "argmin"};
  const auto i = static_cast<size_t>(op);
  return i < std::size(kNames) ? kNames[i] : "reduce";
}
}  // namespace

void Backend::reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                     Tensor& out) {
  const Contract c{device_, reduce_name(op), /*takes_bfloat16=*/op == ReduceOp::Sum};
  c.extents(outer, n, inner);
  c.on_device(x, "input");
  c.numel(x, outer * n * inner, "input");
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  const DType out_type = arg                            ? DType::Int64
                         : x.dtype() == DType::BFloat16 ? DType::Float32  // a bfloat16 sum
                                                        : x.dtype();
  c.output(out, out_type, outer * inner, "out");
  if (outer * inner == 0) return;
  if (n == 0) {
    LOOM_CHECK(op == ReduceOp::Sum,
               "{}: cannot reduce an empty dimension (input has {} elements along it)", c.op, n);
    fill(out, 0.0);
    return;
  }
  run(cpu::reduce, LOOM_CUDA_IMPL(cuda::reduce), op, contiguous(x), outer, n, inner, out);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

template <class T>
using SumAcc = std::conditional_t<std::is_same_v<T, float>, double, int64_t>;

template <class T>
bool is_nan(T v) {
  return v != v;  // always false for int64
}

// Orders two values for max (Greater) or min (Less): `better(v, best)` is true when v should
// replace best. NaN beats every number and the first NaN stays.
struct Greater {
  template <class T>
  static bool better(T v, T best) {
    return v > best || (is_nan(v) && !is_nan(best));
  }
};
struct Less {
  template <class T>
  static bool better(T v, T best) {
    return v < best || (is_nan(v) && !is_nan(best));
  }
};

// ------------------------------------------------------------------ row scans (inner == 1)
// Each scan reduces `len` contiguous values whose first has index `base` in the row, and
// returns a partial result; merge(a, b) combines partials of consecutive chunks a then b.

template <class T>
struct SumRow {
  using Partial = SumAcc<T>;
  static Partial scan(const T* x, int64_t len, int64_t) {
    Partial acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < len; ++j) acc += static_cast<Partial>(x[j]);
    return acc;
  }
  static Partial merge(Partial a, Partial b) { return a + b; }
  static T finish(Partial p) { return static_cast<T>(p); }
};

template <class T, class Order>
struct ExtremeRow {
  using Partial = T;
  static Partial scan(const T* x, int64_t len, int64_t) {
    // kLanes independent accumulators, so the loop over lanes vectorises despite the
    // NaN-aware comparison (which is not a reduction operator OpenMP knows).
    constexpr int64_t kLanes = 16;
    if (len < kLanes) {
      T best = x[0];
      for (int64_t j = 1; j < len; ++j) best = Order::better(x[j], best) ? x[j] : best;
      return best;
    }
    T lanes[kLanes];
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = x[l];
    int64_t j = kLanes;
    for (; j + kLanes <= len; j += kLanes) {
#pragma omp simd
      for (int64_t l = 0; l < kLanes; ++l)
        lanes[l] = Order::better(x[j + l], lanes[l]) ? x[j + l] : lanes[l];
    }
    T best = lanes[0];
    for (int64_t l = 1; l < kLanes; ++l) best = Order::better(lanes[l], best) ? lanes[l] : best;
    for (; j < len; ++j) best = Order::better(x[j], best) ? x[j] : best;
    return best;
  }
  static Partial merge(Partial a, Partial b) { return Order::better(b, a) ? b : a; }
  static T finish(Partial p) { return p; }
};

template <class T, class Order>
struct ArgRow {
  struct Partial {
    T value;
    int64_t index;
  };
  static Partial scan(const T* x, int64_t len, int64_t base) {
    Partial best{x[0], base};
    for (int64_t j = 1; j < len; ++j)
      if (Order::better(x[j], best.value)) best = {x[j], base + j};
    return best;
  }
  // Strict comparison: on a tie the earlier chunk (smaller index) wins.
  static Partial merge(Partial a, Partial b) { return Order::better(b.value, a.value) ? b : a; }
  static int64_t finish(Partial p) { return p.index; }
};

template <class Scan, class T, class Out>
void reduce_rows(const T* x, int64_t rows, int64_t n, Out* out) {
  using Partial = typename Scan::Partial;
  const int threads = cpu::max_threads();
  if (rows >= threads || rows * n < 2 * cpu::kGrainCheap) {
    cpu::parallel_for(0, rows, std::max<int64_t>(1, cpu::kGrainCheap / n),
                      [&](int64_t b, int64_t e) {
                        for (int64_t r = b; r < e; ++r)
                          out[r] = Scan::finish(Scan::scan(x + r * n, n, 0));
                      });
    return;
  }
  // Few long rows: split each row into one chunk per thread and merge the chunks in order.
  std::vector<Partial> partial(static_cast<size_t>(threads));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    const int64_t chunk = (n + threads - 1) / threads;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int t = 0; t < threads; ++t) {
      const int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
      if (b < e) partial[t] = Scan::scan(row + b, e - b, b);
    }
    Partial acc = partial[0];
    for (int t = 1; t < threads && t * chunk < n; ++t) acc = Scan::merge(acc, partial[t]);
    out[r] = Scan::finish(acc);
  }
}

// ------------------------------------------------------------------ column loops (inner > 1)
// Each call reduces columns [i0, i1) of one outer slice x[n, inner] into out[i0, i1).

template <class T>
void sum_columns(const T* x, int64_t n, int64_t inner, int64_t i0, int64_t i1, T* out) {
  SumAcc<T> acc[cpu::kColumnBlock];
  const int64_t w = i1 - i0;
  for (int64_t i = 0; i < w; ++i) acc[i] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T* row = x + j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) acc[i] += static_cast<SumAcc<T>>(row[i]);
  }
  for (int64_t i = 0; i < w; ++i) out[i0 + i] = static_cast<T>(acc[i]);
}

template <class T, class Order>
void extreme_columns(const T* x, int64_t n, int64_t inner, int64_t i0, int64_t i1, T* out) {
  T* best = out + i0;
  const int64_t w = i1 - i0;
  for (int64_t i = 0; i < w; ++i) best[i] = x[i0 + i];
  for (int64_t j = 1; j < n; ++j) {
    const T* row = x + j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) best[i] = Order::better(row[i], best[i]) ? row[i] : best[i];
  }
}

template <class T, class Order>
void arg_columns(const T* x, int64_t n, int64_t inner, int64_t i0, int64_t i1, int64_t* out) {
  T best[cpu::kColumnBlock];
  int64_t* index = out + i0;
  const int64_t w = i1 - i0;
  for (int64_t i = 0; i < w; ++i) {
    best[i] = x[i0 + i];
    index[i] = 0;
  }
  for (int64_t j = 1; j < n; ++j) {
    const T* row = x + j * inner + i0;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) {
      const bool take = Order::better(row[i], best[i]);
      best[i] = take ? row[i] : best[i];
      index[i] = take ? j : index[i];
    }
  }
}

// Runs column(x_slice, n, inner, i0, i1, out_slice) over every outer slice and column block.
template <class Column, class T, class Out>
void reduce_columns(const T* x, int64_t outer, int64_t n, int64_t inner, Out* out,
                    const Column& column) {
  // One slice of few columns (a bias gradient: [rows, 256] summed over the rows) would be one
  // task on one thread: narrower blocks give every thread some columns (each column's result
  // does not depend on the blocking).
  int64_t width = cpu::kColumnBlock;
  while (width > 32 && outer * ((inner + width - 1) / width) < cpu::max_threads()) width /= 2;
  const int64_t blocks = (inner + width - 1) / width;
  const int64_t work_per_task = n * std::min(inner, width);
  cpu::parallel_for(0, outer * blocks, std::max<int64_t>(1, cpu::kGrainCheap / work_per_task),
                    [&](int64_t b, int64_t e) {
                      for (int64_t task = b; task < e; ++task) {
                        const int64_t o = task / blocks, blk = task % blocks;
                        const int64_t i0 = blk * width;
                        const int64_t i1 = std::min(inner, i0 + width);
                        column(x + o * n * inner, n, inner, i0, i1, out + o * inner);
                      }
                    });
}

// One reduction: Row's scan when each output is one contiguous row (inner == 1), else the
// column loop.
template <class Row, class T, class Out, class Column>
void reduce_with(const T* x, int64_t outer, int64_t n, int64_t inner, Out* out,
                 const Column& column) {
  if (inner == 1) return reduce_rows<Row>(x, outer, n, out);
  reduce_columns(x, outer, n, inner, out, column);
}

// Columns [i0, i1) of the sums of a float32 [n, inner] over its rows with the arithmetic of
// cpu::column_sums_by_chunks: the same chunks of rows, each summed in doubles in row order, and
// the chunks' sums added in chunk order, so the same bits; but a block of columns at a time, the
// blocks shared among the threads. For a few rows of many columns (the gradient of Swin's
// attention bias, [64, 9604] summed over the batch), where the chunks' buffers of doubles,
// kSumChunks rows of `inner` each, filled, added to and added up on one thread, cost several
// times the reading of x: on 2 cores (2026-12-06) [64, 9604] 0.18 -> 0.057 ms, [256, 4802]
// 0.17 -> 0.12, [512, 4096] 0.23 -> 0.16, [1024, 512] the same; from a few thousand rows the
// chunks share the work more evenly ([3136, 384] 0.08 against 0.10), and keep it.
constexpr int64_t kBlockedSumRows = 32 * cpu::kSumChunks;  // chunks of at most 32 rows
void sum_columns_in_chunks(const float* x, int64_t n, int64_t inner, int64_t i0, int64_t i1,
                           float* out) {
  const int64_t chunks = std::clamp<int64_t>(n, 1, cpu::kSumChunks);
  const int64_t chunk_rows = (n + chunks - 1) / chunks;
  const int64_t w = i1 - i0;
  double total[cpu::kColumnBlock], part[cpu::kColumnBlock];
  for (int64_t c = 0; c < chunks; ++c) {
    double* sums = c == 0 ? total : part;
    std::fill(sums, sums + w, 0.0);
    const int64_t end = std::min(n, (c + 1) * chunk_rows);
    for (int64_t r = c * chunk_rows; r < end; ++r) {
      const float* row = x + r * inner + i0;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) sums[i] += row[i];
    }
    if (c == 0) continue;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) total[i] += part[i];
  }
  for (int64_t i = 0; i < w; ++i) out[i0 + i] = static_cast<float>(total[i]);
}

template <class T>
void reduce_typed(ReduceOp op, const T* x, int64_t outer, int64_t n, int64_t inner, Tensor& out) {
  const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
  T* vals = arg ? nullptr : out.data_ptr<T>();
  int64_t* idx = arg ? out.data_ptr<int64_t>() : nullptr;
  switch (op) {
    case ReduceOp::Sum:
      // The sums over every leading position of a float32 [n, inner] (a bias's gradient): in
      // chunks of rows, each read in order (cpu::column_sums_by_chunks), or, for a few rows,
      // the same chunks column block by column block.
      if constexpr (std::is_same_v<T, float>) {
        if (outer == 1 && inner > 1 && n <= kBlockedSumRows)
          return reduce_columns(x, 1, n, inner, vals, sum_columns_in_chunks);
        if (outer == 1 && inner > 1)
          return cpu::column_sums_by_chunks(n, inner, vals, [x, inner](int64_t r, double* sums) {
            const float* row = x + r * inner;
#pragma omp simd
            for (int64_t j = 0; j < inner; ++j) sums[j] += row[j];
          });
      }
      return reduce_with<SumRow<T>>(x, outer, n, inner, vals, sum_columns<T>);
    case ReduceOp::Max:
      return reduce_with<ExtremeRow<T, Greater>>(x, outer, n, inner, vals,
                                                 extreme_columns<T, Greater>);
    case ReduceOp::Min:
      return reduce_with<ExtremeRow<T, Less>>(x, outer, n, inner, vals, extreme_columns<T, Less>);
    case ReduceOp::ArgMax:
      return reduce_with<ArgRow<T, Greater>>(x, outer, n, inner, idx, arg_columns<T, Greater>);
    case ReduceOp::ArgMin:
      return reduce_with<ArgRow<T, Less>>(x, outer, n, inner, idx, arg_columns<T, Less>);
  }
  LOOM_FAIL("reduce: unknown op {}", static_cast<int>(op));
}

}  // namespace

void cpu::reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                 Tensor& out) {
  if (x.dtype() == DType::BFloat16)  // a sum (Backend::reduce): of the exact float32 values
    return reduce(op, float32_copy(x), outer, n, inner, out);
  if (x.dtype() == DType::Float32)
    reduce_typed<float>(op, x.data_ptr<float>(), outer, n, inner, out);
  else
    reduce_typed<int64_t>(op, x.data_ptr<int64_t>(), outer, n, inner, out);
}

}  // namespace loom
