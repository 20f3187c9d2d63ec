// The indexing kernels (index.h): Backend's checks, then the CPU loops.
// Every index is checked against [0, n) before any element moves. The two accumulating kernels
// may hit the same output element from different j, so they are parallelised over o or over
// columns i (each thread owns whole output columns), never over j. index_copy into one matrix
// (outer 1) writes its rows in parallel when no index repeats.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/index/index.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
namespace {

// k of an index that splits into [outer, k, inner] (gather, scatter_add).
int64_t index_depth(const Contract& c, const Tensor& index, int64_t outer, int64_t inner) {
  c.dtype(index, DType::Int64, "index");
  const int64_t slices = outer * inner;
  LOOM_CHECK(slices > 0 ? index.numel() % slices == 0 : index.numel() == 0,
             "{}: index with {} elements does not split into [{}, k, {}]", c.op, index.numel(),
             outer, inner);
  return slices > 0 ? index.numel() / slices : 0;
}

// A 1-D index (index_select, index_add, index_copy); returns its length k.
int64_t index_length(const Contract& c, const Tensor& index) {
  c.dtype(index, DType::Int64, "index");
  LOOM_CHECK(index.dim() <= 1, "{}: index must be 1-D, got shape {}", c.op,
             shape_str(index.shape()));
  return index.numel();
}

// Whether t is a [rows, cols] matrix whose rows are whole but may lie further apart than cols
// (a narrow of the columns).
bool padded_rows(const Tensor& t, int64_t rows, int64_t cols) {
  return t.dim() == 2 && t.size(0) == rows && t.size(1) == cols &&
         (cols <= 1 || t.stride(1) == 1) && (rows <= 1 || t.stride(0) >= cols);
}

}  // namespace

void Backend::index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                           const Tensor& index, Tensor& out) {
  const Contract c{device_, "index_select"};
  c.extents(outer, n, inner);
  const int64_t k = index_length(c, index);
  c.on_device(x, "input");
  c.numel(x, outer * n * inner, "input");
  // On the CPU, rows picked from one matrix (outer 1) are read and written where they lie when
  // x and out are matrices of padded rows: the filled prefix of each row of a KV cache, which
  // its reorder moves (nn/kv_cache.cpp).
  const bool in_place = device_ == Device::CPU && outer == 1 && padded_rows(x, n, inner) &&
                        padded_rows(out, k, inner);
  if (in_place) {
    c.on_device(out, "out");
    c.dtype(out, x.dtype(), "out");
  } else {
    c.output(out, x.dtype(), outer * k * inner, "out");
  }
  if (k > 0)
    run(cpu::index_select, LOOM_CUDA_IMPL(cuda::index_select), in_place ? x : contiguous(x),
        outer, n, inner, contiguous(index), out);
}

// index_add's and index_copy's checks: src [outer, k, inner] of out's dtype, out [outer, n,
// inner], index 1-D of length k; returns k.
static int64_t check_index_update(const Contract& c, const Tensor& src, int64_t outer, int64_t n,
                                  int64_t inner, const Tensor& index, const Tensor& out) {
  c.extents(outer, n, inner);
  const int64_t k = index_length(c, index);
  c.output(out, out.dtype(), outer * n * inner, "out");
  c.input(src, out.dtype(), outer * k * inner, "src");
  return k;
}

void Backend::index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                        const Tensor& index, Tensor& out) {
  if (check_index_update(Contract{device_, "index_add"}, src, outer, n, inner, index, out) > 0)
    run(cpu::index_add, LOOM_CUDA_IMPL(cuda::index_add), contiguous(src), outer, n, inner,
        contiguous(index), out);
}

void Backend::index_copy(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                         const Tensor& index, Tensor& out) {
  const Contract c{device_, "index_copy", /*takes_bfloat16=*/true};
  // On the CPU, rows written into one matrix (outer 1) of padded rows are written where they
  // lie: the filled prefixes of a KV cache's rows, which its reorder moves (nn/kv_cache.cpp).
  int64_t k = 0;
  if (device_ == Device::CPU && outer == 1 && padded_rows(out, n, inner)) {
    c.extents(outer, n, inner);
    k = index_length(c, index);
    c.on_device(out, "out");
    c.input(src, out.dtype(), k * inner, "src");
  } else {
    k = check_index_update(c, src, outer, n, inner, index, out);
  }
  if (k > 0)
    run(cpu::index_copy, LOOM_CUDA_IMPL(cuda::index_copy), contiguous(src), outer, n, inner,
        contiguous(index), out);
}

void Backend::move_rows(const Tensor& from, const Tensor& to, int64_t n, int64_t inner,
                        Tensor& out) {
  // On the CPU a kernel of its own, which moves rows as bytes (any dtype); on a GPU index_select
  // and then index_copy, through a copy of every source row (float32 or int64).
  const bool on_cpu = device_ == Device::CPU;
  const Contract c{device_, "move_rows", /*takes_bfloat16=*/on_cpu};
  c.extents(1, n, inner);
  const int64_t k = index_length(c, from);
  LOOM_CHECK(index_length(c, to) == k, "move_rows: {} rows to move from but {} to move to", k,
             to.numel());
  if (on_cpu) {
    c.on_device(out, "out");
    const bool matrix = padded_rows(out, n, inner);
    LOOM_CHECK(matrix || (out.is_contiguous() && out.numel() == n * inner),
               "move_rows: out (shape {}, strides {}) is not {} rows of {} elements",
               shape_str(out.shape()), shape_str(out.strides()), n, inner);
    Tensor rows = matrix ? out : out.view({n, inner});
    if (k > 0) run(cpu::move_rows, nullptr, contiguous(from), contiguous(to), n, inner, rows);
    return;
  }
  c.output(out, out.dtype(), n * inner, "out");
  if (k == 0) return;
  Tensor aside = Tensor::empty({k, inner}, out.dtype(), device_);  // every source, then written
  index_select(out, 1, n, inner, from, aside);
  index_copy(aside, 1, n, inner, to, out);
}

void Backend::gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& index,
                     Tensor& out) {
  const Contract c{device_, "gather"};
  c.extents(outer, n, inner);
  const int64_t k = index_depth(c, index, outer, inner);
  c.on_device(x, "input");
  c.numel(x, outer * n * inner, "input");
  c.output(out, x.dtype(), outer * k * inner, "out");
  if (index.numel() > 0)
    run(cpu::gather, LOOM_CUDA_IMPL(cuda::gather), contiguous(x), outer, n, inner,
        contiguous(index), out);
}

// scatter_add's and scatter's checks: src [outer, k, inner] of out's dtype, out [outer, n, inner].
static void check_scatter(const Contract& c, const Tensor& src, int64_t outer, int64_t n,
                          int64_t inner, const Tensor& index, const Tensor& out) {
  c.extents(outer, n, inner);
  const int64_t k = index_depth(c, index, outer, inner);
  c.output(out, out.dtype(), outer * n * inner, "out");
  c.input(src, out.dtype(), outer * k * inner, "src");
}

void Backend::scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                          const Tensor& index, Tensor& out) {
  check_scatter(Contract{device_, "scatter_add"}, src, outer, n, inner, index, out);
  if (index.numel() > 0)
    run(cpu::scatter_add, LOOM_CUDA_IMPL(cuda::scatter_add), contiguous(src), outer, n, inner,
        contiguous(index), out);
}

void Backend::scatter(const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                      const Tensor& index, Tensor& out) {
  check_scatter(Contract{device_, "scatter"}, src, outer, n, inner, index, out);
  if (index.numel() > 0)
    run(cpu::scatter, LOOM_CUDA_IMPL(cuda::scatter), contiguous(src), outer, n, inner,
        contiguous(index), out);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

// Throws loom::Error naming op and the first index outside [0, n); returns the index's values.
const int64_t* checked_index(const Tensor& idx, int64_t n, const char* op) {
  const int64_t* index = idx.data_ptr<int64_t>();
  const int64_t count = idx.numel();
  bool bad = false;
  const bool parallel = count > 4 * cpu::kGrainCheap;
  cpu::parallel_region(parallel, [&] {
#pragma omp for reduction(|| : bad) schedule(static) nowait
    for (int64_t j = 0; j < count; ++j) bad = bad || index[j] < 0 || index[j] >= n;
  });
  if (!bad) return index;
  for (int64_t j = 0; j < count; ++j)
    LOOM_CHECK(index[j] >= 0 && index[j] < n,
               "{}: index {} (at position {}) is out of range for a dimension of size {}; valid "
               "indices are [0, {})",
               op, index[j], j, n, n);
  return index;
}

// k of gather's and scatter_add's index [outer, k, inner].
int64_t depth(const Tensor& idx, int64_t outer, int64_t inner) {
  return outer * inner > 0 ? idx.numel() / (outer * inner) : 0;
}

// A tensor seen as rows of `inner` elements of raw bytes: the kernels that only move whole rows
// (index_select, index_copy) take every dtype with the same loop, one memcpy per row. Rows lie
// `inner` elements apart, or a matrix's row stride apart (index_select's padded rows).
struct Rows {
  unsigned char* data;
  size_t bytes;  // of one row
  int64_t step;  // bytes from one row to the next
  unsigned char* operator[](int64_t r) const { return data + r * step; }
};
Rows rows_of(const Tensor& t, int64_t inner) {
  const int64_t size = element_size(t.dtype());
  const bool matrix = t.dim() == 2 && t.size(1) == inner && t.size(0) > 1;
  return {static_cast<unsigned char*>(t.raw_data()), static_cast<size_t>(inner * size),
          (matrix ? t.stride(0) : inner) * size};
}

// Whether no value of index[0, k) repeats (a sorted copy: the cost follows k, not the size of
// the dim indexed).
bool distinct(const int64_t* index, int64_t k) {
  std::vector<int64_t> sorted(static_cast<size_t>(k));
  std::copy_n(index, k, sorted.begin());
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

// Runs loop(in, out) on typed pointers to the data of in and out: float32 or int64, the dtypes
// of the kernels that add or pick single elements.
template <class Loop>
void typed(const Tensor& in, Tensor& out, const Loop& loop) {
  if (out.dtype() == DType::Float32)
    loop(in.data_ptr<float>(), out.data_ptr<float>());
  else
    loop(in.data_ptr<int64_t>(), out.data_ptr<int64_t>());
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

}  // namespace

void cpu::index_select(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                       Tensor& out) {
  const int64_t k = idx.numel();
  const int64_t* index = checked_index(idx, n, "index_select");
  if (outer * k * inner == 0) return;
  const Rows src = rows_of(x, inner), dst = rows_of(out, inner);
  cpu::parallel_for(0, outer * k, std::max<int64_t>(1, cpu::kGrainCheap / inner),
                    [=](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r) {  // row r = (o, j) of out
                        const int64_t o = r / k, j = r % k;
                        std::memcpy(dst[r], src[o * n + index[j]], dst.bytes);
                      }
                    });
}

void cpu::index_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                    Tensor& out) {
  const int64_t k = idx.numel();
  const int64_t* index = checked_index(idx, n, "index_add");
  if (outer * k * inner == 0) return;
  typed(src, out, [&](const auto* s, auto* d) {
    for_each_owned_block(outer, inner, outer * k * inner, [=](int64_t o, int64_t i0, int64_t i1) {
      for (int64_t j = 0; j < k; ++j) {
        const auto* from = s + (o * k + j) * inner;
        auto* to = d + (o * n + index[j]) * inner;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) to[i] += from[i];
      }
    });
  });
}

void cpu::index_copy(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                     Tensor& out) {
  const int64_t k = idx.numel();
  const int64_t* index = checked_index(idx, n, "index_copy");
  if (outer * k * inner == 0) return;
  const Rows from = rows_of(src, inner), to = rows_of(out, inner);
  if (outer == 1 && distinct(index, k)) {  // each row of one matrix written once: in parallel
    cpu::parallel_for(0, k, std::max<int64_t>(1, cpu::kGrainCheap / inner),
                      [=](int64_t b, int64_t e) {
                        for (int64_t j = b; j < e; ++j)
                          std::memcpy(to[index[j]], from[j], to.bytes);
                      });
    return;
  }
  cpu::parallel_for(0, outer, std::max<int64_t>(1, cpu::kGrainCheap / (k * inner)),
                    [=](int64_t b, int64_t e) {
                      for (int64_t o = b; o < e; ++o)
                        for (int64_t j = 0; j < k; ++j)  // in order: the last of repeats wins
                          std::memcpy(to[o * n + index[j]], from[o * k + j], to.bytes);
                    });
}

void cpu::move_rows(const Tensor& from_idx, const Tensor& to_idx, int64_t n, int64_t inner,
                    Tensor& out) {
  const int64_t k = from_idx.numel();
  const int64_t* from = checked_index(from_idx, n, "move_rows");
  const int64_t* to = checked_index(to_idx, n, "move_rows");
  const Rows rows = rows_of(out, inner);
  const int64_t grain = std::max<int64_t>(1, cpu::kGrainCheap / std::max<int64_t>(inner, 1));
  // Moves j in `moves` through a copy of their sources taken before any of them writes.
  const auto through_aside = [&](const std::vector<int64_t>& moves, bool in_order) {
    const auto count = static_cast<int64_t>(moves.size());
    std::unique_ptr<unsigned char[]> aside(new unsigned char[count * rows.bytes]);
    unsigned char* kept = aside.get();
    const int64_t* move = moves.data();
    cpu::parallel_for(0, count, grain, [=](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m)
        std::memcpy(kept + m * rows.bytes, rows[from[move[m]]], rows.bytes);
    });
    const auto write = [=](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m)
        std::memcpy(rows[to[move[m]]], kept + m * rows.bytes, rows.bytes);
    };
    if (in_order)
      write(0, count);  // the last of repeated destinations wins
    else
      cpu::parallel_for(0, count, grain, write);
  };
  std::vector<int64_t> moves;
  if (!distinct(to, k)) {  // a row written twice: every move in order, from copies
    for (int64_t j = 0; j < k; ++j) moves.push_back(j);
    return through_aside(moves, /*in_order=*/true);
  }
  // Each row written once. A move may write its row once no move still to come reads it, and
  // then copies its source where it lies: waves of such moves, each over the threads. (A beam
  // search's reorder is chains, a beam continuing the beam before it whose row continues
  // another: a few waves.) What is left after the last wave, cycles or what a long chain would
  // take more than kMostWaves waves to finish (each wave passes over every move left), is moved
  // through copies: none of its sources has been written yet.
  std::vector<int32_t> readers(static_cast<size_t>(n), 0);  // moves still to come reading a row
  for (int64_t j = 0; j < k; ++j)
    if (from[j] != to[j]) {  // (a row onto itself is no move at all)
      moves.push_back(j);
      ++readers[static_cast<size_t>(from[j])];
    }
  constexpr int kMostWaves = 8;
  std::vector<int64_t> wave, rest;
  for (int waves = 0; waves < kMostWaves && !moves.empty(); ++waves) {
    wave.clear();
    rest.clear();
    for (int64_t j : moves) (readers[static_cast<size_t>(to[j])] == 0 ? wave : rest).push_back(j);
    if (wave.empty()) break;  // cycles only
    const int64_t* ready = wave.data();
    cpu::parallel_for(0, static_cast<int64_t>(wave.size()), grain, [=](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m)
        std::memcpy(rows[to[ready[m]]], rows[from[ready[m]]], rows.bytes);
    });
    for (int64_t j : wave) --readers[static_cast<size_t>(from[j])];
    moves.swap(rest);
  }
  if (!moves.empty()) through_aside(moves, /*in_order=*/false);
}

void cpu::gather(const Tensor& x, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                 Tensor& out) {
  const int64_t k = depth(idx, outer, inner);
  const int64_t* index = checked_index(idx, n, "gather");
  if (outer * k * inner == 0) return;
  typed(x, out, [&](const auto* xs, auto* dst) {
    cpu::parallel_for(0, outer * k, std::max<int64_t>(1, cpu::kGrainCheap / inner),
                      [=](int64_t b, int64_t e) {
                        for (int64_t r = b; r < e; ++r) {  // row r = (o, j) of out and index
                          const int64_t* at = index + r * inner;
                          const auto* slice = xs + r / k * n * inner;
                          auto* to = dst + r * inner;
                          for (int64_t i = 0; i < inner; ++i) to[i] = slice[at[i] * inner + i];
                        }
                      });
  });
}

// scatter_add (accumulate) and scatter (assign) after their checks: each thread owns whole
// output columns and visits j in order, so a repeated index adds up, or its last write wins.
namespace {
template <bool kAccumulate>
void scatter_into(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                  Tensor& out, const char* op) {
  const int64_t k = depth(idx, outer, inner);
  const int64_t* index = checked_index(idx, n, op);
  if (outer * k * inner == 0) return;
  typed(src, out, [&](const auto* s, auto* d) {
    for_each_owned_block(outer, inner, outer * k * inner, [=](int64_t o, int64_t i0, int64_t i1) {
      auto* slice = d + o * n * inner;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = (o * k + j) * inner;
        for (int64_t i = i0; i < i1; ++i) {
          if constexpr (kAccumulate)
            slice[index[r + i] * inner + i] += s[r + i];
          else
            slice[index[r + i] * inner + i] = s[r + i];
        }
      }
    });
  });
}
}  // namespace

void cpu::scatter_add(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                      Tensor& out) {
  scatter_into<true>(src, outer, n, inner, idx, out, "scatter_add");
}

void cpu::scatter(const Tensor& src, int64_t outer, int64_t n, int64_t inner, const Tensor& idx,
                  Tensor& out) {
  scatter_into<false>(src, outer, n, inner, idx, out, "scatter");
}

}  // namespace loom
