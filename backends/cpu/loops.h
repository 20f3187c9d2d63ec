// The loop machinery shared by the CPU kernels:
//   * parallel_for: splits a range into one contiguous chunk per OpenMP thread, and stays on the
//     calling thread when the range is small (starting a team costs microseconds).
//   * parallel_for_items: the same over the elements of a list of items (tensors) as one range.
//   * parallel_region: a region for kernels that share out their own loop (`omp for`), or the
//     body alone on the calling thread, without the team of one that `if (false)` starts.
//   * StridedIter: walks N same-shaped operands with arbitrary strides (0 for broadcast dims)
//     as a sequence of 1-D "runs" along the innermost dimension, after merging dimensions that
//     are laid out contiguously with respect to each other. A kernel only writes the body of a
//     run, so its inner loop is a plain (vectorisable) loop over pointers with fixed steps;
//     all-contiguous tensors collapse to one run per thread. This is the idea of PyTorch's
//     TensorIterator, reduced to what loom needs.
// The arguments were checked by Backend's public methods before any kernel runs.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "core/tensor.h"

// Put on the lambda that holds a vectorised inner loop: inlines every call in it (the op's
// functor and the vec_math.h functions), since a call left in the loop keeps it scalar.
#define LOOM_FLATTEN __attribute__((flatten))

namespace loom::cpu {

// Minimum elements per thread before a loop goes parallel: cheap ops (add, copy) are limited
// by memory and need large chunks to pay for the thread start; transcendental ops (exp, tanh,
// erf) cost ~10x more per element and go parallel sooner.
constexpr int64_t kGrainCheap = 16384;
constexpr int64_t kGrainHeavy = 2048;

// Columns a loop over strided data (a reduction, softmax or scan along a dim with inner > 1)
// takes per pass: their accumulators stay in registers and L1 while it walks the dim.
constexpr int64_t kColumnBlock = 256;

inline int max_threads() { return omp_in_parallel() ? 1 : omp_get_max_threads(); }

// Runs body() once on every OpenMP thread (a parallel region) when `parallel`, else once on the
// calling thread, without a region. `#pragma omp parallel if (false)` would also run it on one
// thread, but libgomp still starts a team of one and ends it with a futex call, about 1.3 us on a
// 2-core VM: as much as a decoding step's layer norm. A loop in body shared out by
// `#pragma omp for` runs whole on the calling thread in the second case. End such a loop with
// `nowait` when the region ends after it: the region's end waits for every thread anyway, and a
// second barrier cost 1.3-2 us more per region (2 threads, libgomp 12).
// Called from inside a program's own parallel region (its `#pragma omp parallel for` over
// inputs, each thread calling loom), body gets a team of one all the same: an `omp for` outside
// any region of loom's would bind to the program's team and share the loop out among threads
// that are inside other calls, each then covering only part of its own loop (a translation per
// thread gave wrong tokens for 22 of 32 sentences).
template <class Body>
void parallel_region(bool parallel, const Body& body) {
  if (!parallel && !omp_in_parallel()) return body();
#pragma omp parallel if (parallel)
  body();
}

// Calls fn(chunk_begin, chunk_end) on disjoint chunks covering [begin, end), in parallel when
// each thread gets at least `grain` items. fn must not throw (validate before the loop).
template <class Fn>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const Fn& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int threads =
      static_cast<int>(std::min<int64_t>(max_threads(), n / std::max<int64_t>(grain, 1)));
  if (threads <= 1) {
    fn(begin, end);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    if (b < e) fn(b, e);
  }
}

// Calls fn(item, begin, end) on disjoint stretches [begin, end) of items' elements that cover
// every item's [0, sizes[item]): the items as one range, their sizes end to end, cut into one
// chunk per thread as parallel_for cuts it. A list of tensors (a model's hundred-odd parameters
// in a multi-tensor optimizer step) then costs one parallel region, not one per tensor, and its
// small tensors (biases, norms) are shared out with the large. fn must not throw.
template <class Fn>
void parallel_for_items(std::span<const int64_t> sizes, int64_t grain, const Fn& fn) {
  std::vector<int64_t> starts(sizes.size() + 1, 0);  // item i: [starts[i], starts[i + 1])
  for (size_t i = 0; i < sizes.size(); ++i) starts[i + 1] = starts[i] + sizes[i];
  parallel_for(0, starts.back(), grain, [&](int64_t begin, int64_t end) {
    // The last item that starts at or before `begin` (skipping empty ones), then each in turn.
    auto item = std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1;
    for (; begin < end; ++item) {
      const int64_t stop = std::min(end, starts[item + 1]);
      if (stop > begin) fn(static_cast<size_t>(item), begin - starts[item], stop - starts[item]);
      begin = std::max(begin, stop);
    }
  });
}

// Calls fn(i) for every i in [0, count): items of `work` cheap elements each (an image plane, a
// channel), in parallel when there are enough of them to pay for the threads.
template <class Fn>
void parallel_for_each(int64_t count, int64_t work, const Fn& fn) {
  parallel_for(0, count, std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(work, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) fn(i);
               });
}

// The column sums of a [rows, cols] matrix that row_fn(r, acc) produces a row at a time, adding
// row r's values into acc[0, cols) (doubles): a bias's gradient, the sums of the gradient over
// every position. The rows are cut into kSumChunks chunks, which the threads sum in row order,
// each a contiguous stretch of memory; the chunks' sums are then added in chunk order. (A walk
// down the columns, a block of them per thread, reads a few KiB of each row at a stride: 0.5-0.7
// ms for 6,400 x 512, where this takes 0.1-0.25; 2026-11-30.) The chunks depend on `rows`
// alone, so the sums do not depend on the number of threads. Each chunk's sums stay in doubles
// until out[j] is rounded once.
constexpr int64_t kSumChunks = 32;
template <class RowFn>
void column_sums_by_chunks(int64_t rows, int64_t cols, float* out, const RowFn& row_fn) {
  const int64_t chunks = std::clamp<int64_t>(rows, 1, kSumChunks);
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  thread_local std::vector<double> buffer;  // kept from call to call, as the allocator would
  buffer.resize(static_cast<size_t>(chunks * cols));
  double* partial = buffer.data();  // (the workers see the calling thread's buffer through this)
  const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(chunk_rows * cols, 1));
  parallel_for(0, chunks, grain, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      double* acc = partial + c * cols;
      std::fill(acc, acc + cols, 0.0);
      const int64_t end = std::min(rows, (c + 1) * chunk_rows);
      for (int64_t r = c * chunk_rows; r < end; ++r) row_fn(r, acc);
    }
  });
  for (int64_t c = 1; c < chunks; ++c) {  // chunk 0's sums take the others', in order
    const double* acc = partial + c * cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) partial[j] += acc[j];
  }
  for (int64_t j = 0; j < cols; ++j) out[j] = static_cast<float>(partial[j]);
}

// Grain in rows for row-wise kernels whose rows have `cols` elements of heavy work each.
inline int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kGrainHeavy / std::max<int64_t>(cols, 1));
}

// A row-wise kernel whose every element costs an exp or an erf fills the core's window of
// instructions in flight with the arithmetic of the row at hand, so the loads of the rows
// after it start late, and where the rows come from memory (a saved activation, read again in
// the backward) the row waits for them: GELU's backward over vit-fmnist's 6,400 x 512 ran at
// 13 GB/s where a ReLU's reaches 36. Such a kernel asks, as it begins row r, for the lines of
// row r + rows_ahead(cols) of each operand it reads: the row that starts at least
// kPrefetchAheadBytes further on. (2 Intel Xeon cores, operands cold: GELU's backward with its
// bias sums 3.37 -> 2.42 ms at 6,400 x 512, 2.90 -> 2.02 at 12,544 x 256, 4 KiB ahead; 1, 2
// and 4 rows ahead within 8% of each other; in vit-fmnist's step 19.7 -> 14.2 ms. The softmax
// over rows of 50 and its backward, whose few exps a row leave the window room, and the layer
// norm's backward, whose arithmetic is light, ran no faster so: they do without.)
constexpr int64_t kPrefetchAheadBytes = 4096;
inline int64_t rows_ahead(int64_t cols) {
  return std::max<int64_t>(1, kPrefetchAheadBytes / (std::max<int64_t>(cols, 1) *
                                                      static_cast<int64_t>(sizeof(float))));
}
// Requests the cache lines of the `count` floats at p.
inline void prefetch_floats(const float* p, int64_t count) {
  for (int64_t j = 0; j < count; j += 64 / static_cast<int64_t>(sizeof(float)))
    __builtin_prefetch(p + j);
}

template <size_t N>
using Ptrs = std::array<char*, N>;
template <size_t N>
using Steps = std::array<int64_t, N>;  // byte step of each operand along a run

template <size_t N>
class StridedIter {
 public:
  // operands[0] is the output; every operand must have its shape. `op` names the caller.
  StridedIter(const std::array<const Tensor*, N>& operands, const char* op) {
    const Shape& shape = operands[0]->shape();
    for (size_t k = 0; k < N; ++k) {
      LOOM_CHECK(operands[k]->shape() == shape, "{}: operand {} has shape {}, expected {}", op, k,
                 shape_str(operands[k]->shape()), shape_str(shape));
      data_[k] = static_cast<char*>(operands[k]->raw_data());
    }
    numel_ = shape_numel(shape);
    // Merge from the innermost dim outwards: dim d folds into the run below it when every
    // operand steps over that run exactly (stride_d == stride_inner * size_inner).
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (shape[d] == 1) continue;
      bool merge = !shape_.empty();
      for (size_t k = 0; k < N && merge; ++k)
        merge = byte_stride(*operands[k], d) == strides_[k].back() * shape_.back();
      if (merge) {
        shape_.back() *= shape[d];
        continue;
      }
      shape_.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) strides_[k].push_back(byte_stride(*operands[k], d));
    }
    if (shape_.empty()) {  // a single element
      shape_.push_back(1);
      for (size_t k = 0; k < N; ++k) strides_[k].push_back(0);
    }
    std::reverse(shape_.begin(), shape_.end());
    for (auto& s : strides_) std::reverse(s.begin(), s.end());
  }

  int64_t numel() const { return numel_; }
  // The merged iteration space, for kernels with their own loop structure (blocked copy).
  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& byte_strides(size_t operand) const { return strides_[operand]; }
  char* data(size_t operand) const { return data_[operand]; }

  // Calls run(ptrs, steps, count) for runs covering every element; run processes `count`
  // elements starting at ptrs, advancing operand k by steps[k] bytes per element.
  template <class Run>
  void for_each(int64_t grain, const Run& run) const {
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) { run_range(b, e, run); });
  }

 private:
  static int64_t byte_stride(const Tensor& t, int64_t d) {
    return t.strides()[d] * static_cast<int64_t>(element_size(t.dtype()));
  }

  template <class Run>
  void run_range(int64_t begin, int64_t end, const Run& run) const {
    if (begin >= end) return;
    const size_t nd = shape_.size();
    std::vector<int64_t> idx(nd);
    int64_t rem = begin;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % shape_[d];
      rem /= shape_[d];
    }
    Steps<N> steps;
    Ptrs<N> p = data_;
    for (size_t k = 0; k < N; ++k) {
      steps[k] = strides_[k][nd - 1];
      for (size_t d = 0; d < nd; ++d) p[k] += idx[d] * strides_[k][d];
    }
    for (int64_t pos = begin;;) {
      const int64_t count = std::min(shape_[nd - 1] - idx[nd - 1], end - pos);
      run(p, steps, count);
      pos += count;
      if (pos >= end) return;
      // On to the next run: the pointers step in place (back to the row start, then a carry
      // through the outer dims) instead of being recomputed from the index, since short runs
      // (a key mask broadcast over 32 keys, a head of 64 values) spend much of their time here.
      for (size_t k = 0; k < N; ++k) p[k] -= idx[nd - 1] * strides_[k][nd - 1];
      idx[nd - 1] = 0;
      for (size_t d = nd - 1; d-- > 0;) {
        for (size_t k = 0; k < N; ++k) p[k] += strides_[k][d];
        if (++idx[d] < shape_[d]) break;
        for (size_t k = 0; k < N; ++k) p[k] -= shape_[d] * strides_[k][d];
        idx[d] = 0;
      }
    }
  }

  Shape shape_;                                  // merged dims, innermost last
  std::array<std::vector<int64_t>, N> strides_;  // bytes, per operand, per merged dim
  Ptrs<N> data_{};
  int64_t numel_ = 0;
};

}  // namespace loom::cpu
