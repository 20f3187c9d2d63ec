// Next-token sampling on the GPU (Backend::sample), so that generation never copies a row of
// logits to the host: greedy argmax, temperature, top-k and top-p (nucleus) sampling.
//
// Method: one block per row, and no sort. The CPU reference (sample.cpp) sorts
// the row by (logit descending, id ascending) and walks that order; every quantity it needs is
// a question "how many / how much probability lies at or above a logit value t", and those
// counts and masses only grow as t falls, so each cut is found by bisection over t:
//   * logits become 32-bit keys with the same order (order_key), and the largest key t with
//     F(t) >= goal is built bit by bit from the top, 32 block-wide reductions, where F(t) is
//     the count (top-k) or the probability mass (top-p, inverse CDF) of the tokens with key >= t;
//   * ties at the cut logit are resolved as the sort does, by id: the j-th tied id is found by
//     a bisection over ids (about log2(n) block-wide counts);
//   * probabilities exp((logit - max) / T) are computed once, in double as on the CPU, into a
//     scratch row; the reductions sum them in a fixed order (deterministic), though not in the
//     CPU's order, so a uniform within rounding of a boundary may pick a neighbouring token.
// Cost: greedy is one pass over the row (split over many blocks for a long row, below);
// sampling ~32 passes for the inverse CDF, plus ~32 for
// top-k and ~32 for top-p, plus ~16 per tie search, each a read of the row from L2.
// Every loop bound and branch below depends only on block-wide results, so all warps reach
// every __syncthreads and shuffle the same number of times.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backends/cuda/device.h"
#include "backends/cuda/device_utils.cuh"
#include "backends/sample/sample.h"
#include "core/rng.h"

namespace loom::cuda {
namespace {

// A logit as an unsigned key with the same order (-0 read as +0, as they compare equal).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The inverse of order_key.
__device__ __forceinline__ float key_value(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

struct MaxU64Op {
  __device__ __forceinline__ unsigned long long operator()(unsigned long long a,
                                                           unsigned long long b) const {
    return a > b ? a : b;
  }
};

// Block-wide questions about one row: counts and probability masses of the ids that satisfy a
// predicate pred(id, key), every thread visiting ids threadIdx.x, + blockDim.x, ...
struct Row {
  const float* x;
  const double* p;  // exp((x - max) / T), temperature > 0 only
  int64_t n;
  int* int_shared;
  double* double_shared;

  template <typename Pred>
  __device__ int count(Pred pred) const {
    int c = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c += pred(i, order_key(x[i])) ? 1 : 0;
    return block_sum(c, int_shared);
  }
  template <typename Pred>
  __device__ double mass(Pred pred) const {
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      if (pred(i, order_key(x[i]))) s += p[i];
    return block_sum(s, double_shared);
  }
  // The largest key t with enough(t) (enough must hold for t = 0 and only fall as t grows).
  template <typename Enough>
  __device__ uint32_t largest_key(Enough enough) const {
    uint32_t t = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t candidate = t | (1u << bit);
      if (enough(candidate)) t = candidate;
    }
    return t;
  }
  // The j-th id (j >= 1, counting from the smallest) that satisfies pred: the smallest id m
  // with at least j satisfying ids in [0, m].
  template <typename Pred>
  __device__ int64_t nth_id(Pred pred, int j) const {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      const int c = count([&](int64_t i, uint32_t key) { return i <= mid && pred(i, key); });
      if (c >= j)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }
};

// Thread 0's value, handed to the whole block.
template <typename T>
__device__ T broadcast(T value, T* slot) {
  __syncthreads();  // earlier readers of *slot are done
  if (threadIdx.x == 0) *slot = value;
  __syncthreads();
  return *slot;
}

// The CPU's walk over `ties` tokens of probability p each that follow a mass `above` (in the
// sorted order): how many it takes until the running sum passes the goal (`strict`: goal <
// sum, the inverse CDF; else goal <= sum, top-p), at least 1 and at most ties; also the sum.
__device__ int walk_ties(double above, double p, int ties, double goal, bool strict, double* sum) {
  double s = above;
  int taken = 0;
  do {
    s += p;
    ++taken;
  } while (taken < ties && (strict ? !(goal < s) : s < goal));
  *sum = s;
  return taken;
}

// Thread mapping: one block per row (grid = rows), threads strided along the row; up to
// kMaxThreads threads (row_threads), which the launch bounds let the register budget fit.
constexpr int kMaxThreads = 1024;

__global__ void __launch_bounds__(kMaxThreads)
    sample_kernel(const float* logits, int64_t n, float temperature, int64_t top_k, float top_p,
                  uint64_t seed, uint64_t offset, const int64_t* offset_by, double* probs,
                  int64_t* out) {
  __shared__ int int_shared[kWarp];
  __shared__ double double_shared[kWarp];
  __shared__ unsigned long long u64_shared[kWarp];
  __shared__ int int_slot;
  __shared__ double double_slot;
  const int64_t row = blockIdx.x;
  const float* x = logits + row * n;
  double* p = probs != nullptr ? probs + row * n : nullptr;
  const Row r{x, p, n, int_shared, double_shared};

  // The largest key and the first id holding it, packed so that one max finds both; the
  // smallest key (as the largest complement); NaNs.
  unsigned long long best = 0, lowest = 0;
  int nans = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    nans += v != v ? 1 : 0;
    const uint32_t key = order_key(v);
    const unsigned long long packed =
        (static_cast<unsigned long long>(key) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
    best = best > packed ? best : packed;
    lowest = lowest > 0xFFFFFFFFu - key ? lowest : 0xFFFFFFFFu - key;
  }
  best = block_reduce(best, 0ull, u64_shared, MaxU64Op{});
  lowest = block_reduce(lowest, 0ull, u64_shared, MaxU64Op{});
  nans = block_sum(nans, int_shared);
  const int64_t first_max = 0xFFFFFFFFu - static_cast<uint32_t>(best & 0xFFFFFFFFu);
  if (nans > 0 || temperature == 0.0f) {
    if (threadIdx.x == 0) out[row] = nans > 0 ? -1 : first_max;
    return;
  }

  // softmax numerators, in double as the CPU computes them.
  const double max_logit = key_value(static_cast<uint32_t>(best >> 32));
  const double t = temperature;
  auto prob_of = [&](uint32_t key) {
    return exp((static_cast<double>(key_value(key)) - max_logit) / t);
  };
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    p[i] = exp((static_cast<double>(x[i]) - max_logit) / t);
  // (each thread reads back only the p[i] it wrote: the loops below visit the same ids)

  // top-k: the k-th largest key, the largest t with at least k keys >= t; ties at it stay.
  // Without top-k, the smallest key: every token is kept.
  uint32_t low = 0xFFFFFFFFu - static_cast<uint32_t>(lowest);
  if (top_k > 0 && top_k < n)
    low = r.largest_key([&](uint32_t c) {
      return r.count([&](int64_t, uint32_t key) { return key >= c; }) >= top_k;
    });
  const double total = r.mass([&](int64_t, uint32_t key) { return key >= low; });

  // top-p: the kept set is every key > cut, and the tokens at key == cut with id <= last_tie.
  uint32_t cut = low;
  int64_t last_tie = n - 1;
  double kept_total = total;
  if (top_p < 1.0f) {
    const double goal = top_p * total;
    // The logit of the last token the CPU's walk takes: the largest t whose mass at or
    // above it (within the top-k) reaches the goal.
    cut = r.largest_key([&](uint32_t c) {
      return r.mass([&](int64_t, uint32_t key) { return key >= c && key >= low; }) >= goal;
    });
    const double above = r.mass([&](int64_t, uint32_t key) { return key > cut; });
    const int ties = r.count([&](int64_t, uint32_t key) { return key == cut; });
    double sum = 0.0;
    const int taken = broadcast(
        threadIdx.x == 0 ? walk_ties(above, prob_of(cut), ties, goal, false, &sum) : 0, &int_slot);
    kept_total = broadcast(sum, &double_slot);
    if (taken < ties) last_tie = r.nth_id([&](int64_t, uint32_t key) { return key == cut; }, taken);
  }
  auto kept = [=](int64_t i, uint32_t key) { return key > cut || (key == cut && i <= last_tie); };

  // Inverse CDF at the row's uniform: the token whose cumulative mass (in the sorted order)
  // first exceeds goal. Its key is the largest t whose kept mass at or above t exceeds goal.
  // offset_by: a counter in device memory (a recorded graph's draws), added where it is read.
  if (offset_by != nullptr) offset += static_cast<uint64_t>(*offset_by);
  const double goal = static_cast<double>(philox_uniform(offset + row, seed)) * kept_total;
  int64_t token = 0;
  if (r.mass(kept) > goal) {
    const uint32_t at = r.largest_key([&](uint32_t c) {
      return r.mass([&](int64_t i, uint32_t key) { return key >= c && kept(i, key); }) > goal;
    });
    const double above = r.mass([&](int64_t i, uint32_t key) { return key > at && kept(i, key); });
    auto tied = [&](int64_t i, uint32_t key) { return key == at && kept(i, key); };
    const int ties = r.count(tied);
    double sum = 0.0;
    const int taken = broadcast(
        threadIdx.x == 0 ? walk_ties(above, prob_of(at), ties, goal, true, &sum) : 0, &int_slot);
    token = r.nth_id(tied, taken);
  } else {  // rounding at the very top of the range: the last kept token in the sorted order
    auto last = [&](int64_t i, uint32_t key) { return key == cut && i <= last_tie; };
    token = r.nth_id(last, r.count(last));
  }
  if (threadIdx.x == 0) out[row] = token;
}

// ---------------------------------------------------------------------------- long greedy rows
// Greedy decoding over a long row (GPT-2's 50,257 logits) in sample_kernel is one block making
// ~50 dependent sweeps: 22 us on an H200, more than a layer of GPT-2. So a row of at least
// kSplitArgmax logits is cut into slices of kArgmaxSlice: one block per (row, slice) reduces
// its slice to sample_kernel's packed (key, first id) maximum and a NaN count, and one warp per
// row then reduces the slices' (the same maximum: a max of maxima).
constexpr int64_t kSplitArgmax = 8192;
constexpr int64_t kArgmaxSlice = 1024;
constexpr int kArgmaxThreads = 256;

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_slice_kernel(const float* logits, int64_t n, int64_t slices,
                        unsigned long long* part_best, int* part_nans) {
  __shared__ unsigned long long u64_shared[kWarp];
  __shared__ int int_shared[kWarp];
  const int64_t row = blockIdx.x / slices, slice = blockIdx.x % slices;
  const float* x = logits + row * n;
  const int64_t end = min(n, (slice + 1) * kArgmaxSlice);
  unsigned long long best = 0;
  int nans = 0;
  for (int64_t i = slice * kArgmaxSlice + threadIdx.x; i < end; i += blockDim.x) {
    const float v = x[i];
    nans += v != v ? 1 : 0;
    const unsigned long long packed = (static_cast<unsigned long long>(order_key(v)) << 32) |
                                      (0xFFFFFFFFu - static_cast<uint32_t>(i));
    best = best > packed ? best : packed;
  }
  best = block_reduce(best, 0ull, u64_shared, MaxU64Op{});
  nans = block_sum(nans, int_shared);
  if (threadIdx.x == 0) part_best[blockIdx.x] = best, part_nans[blockIdx.x] = nans;
}

__global__ void argmax_merge_kernel(const unsigned long long* part_best, const int* part_nans,
                                    int64_t slices, int64_t* out) {
  const int64_t row = blockIdx.x;
  unsigned long long best = 0;
  int nans = 0;
  for (int64_t s = threadIdx.x; s < slices; s += kWarp) {
    best = best > part_best[row * slices + s] ? best : part_best[row * slices + s];
    nans += part_nans[row * slices + s];
  }
  best = warp_reduce(best, MaxU64Op{});
  nans = warp_reduce(nans, SumOp{});
  const int64_t first_max = 0xFFFFFFFFu - static_cast<uint32_t>(best & 0xFFFFFFFFu);
  if (threadIdx.x == 0) out[row] = nans > 0 ? -1 : first_max;
}

}  // namespace

// Backend::sample: logits contiguous [rows, n] -> int64 out [rows]. probs: scratch of rows * n
// doubles when temperature > 0 (may be null for greedy decoding); `scratch` gives greedy
// decoding over long rows its partial maxima. offset_by: null, or one int64 in device memory
// added to offset by the kernel.
void launch_sample(const float* logits, int64_t rows, int64_t n, float temperature, int64_t top_k,
                   float top_p, uint64_t seed, uint64_t offset, const int64_t* offset_by,
                   double* probs, int64_t* out, Scratch& scratch, cudaStream_t stream) {
  const int64_t slices = ceil_div(n, kArgmaxSlice);
  if (temperature == 0.0f && n >= kSplitArgmax && rows * slices < (int64_t{1} << 31)) {
    auto* best = static_cast<unsigned long long*>(scratch.get(sizeof(long long) * rows * slices));
    auto* nans = static_cast<int*>(scratch.get(sizeof(int) * rows * slices));
    argmax_slice_kernel<<<static_cast<unsigned>(rows * slices), kArgmaxThreads, 0, stream>>>(
        logits, n, slices, best, nans);
    LOOM_CUDA_CHECK_LAUNCH();
    argmax_merge_kernel<<<static_cast<unsigned>(rows), kWarp, 0, stream>>>(best, nans, slices, out);
    LOOM_CUDA_CHECK_LAUNCH();
    return;
  }
  sample_kernel<<<static_cast<unsigned>(rows), row_threads(n, kMaxThreads), 0, stream>>>(
      logits, n, temperature, top_k, top_p, seed, offset, offset_by, probs, out);
  LOOM_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------- the kernel
void sample(const Tensor& logits, float temperature, int64_t top_k, float top_p, uint64_t seed,
            uint64_t offset, const Tensor& offset_by, Tensor& out) {
  const int64_t rows = out.numel(), n = logits.numel() / rows;
  Scratch scratch;
  double* probs = temperature > 0.0f
                      ? static_cast<double*>(scratch.get(sizeof(double) * rows * n))
                      : nullptr;
  launch_sample(logits.data_ptr<float>(), rows, n, temperature, top_k, top_p, seed, offset,
                ptr<int64_t>(offset_by), probs, out.data_ptr<int64_t>(), scratch, stream());
}

}  // namespace loom::cuda
