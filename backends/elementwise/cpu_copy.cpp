// The strided copy with dtype conversion behind contiguous()/copy_()/to(dtype) (float32, int64,
// bfloat16 and bool, each to each), fill and arange, on the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/loops.h"
#include "backends/elementwise/elementwise.h"
#include "core/bfloat16.h"
#include "core/error.h"

namespace loom {

namespace {

// float -> int64 truncates toward zero like PyTorch's .to(torch.int64). NaN and values out of
// range have no defined conversion in C++; they give INT64_MIN, which is what x86 (and so
// PyTorch on CPU) produces.
inline int64_t float_to_int64(float x) {
  constexpr float kLimit = 9.2233720368547758e18f;  // 2^63
  const bool ok = x > -kLimit && x < kLimit;
  return ok ? static_cast<int64_t>(ok ? x : 0.0f) : std::numeric_limits<int64_t>::min();
}

// bfloat16 converts through float32, as PyTorch's does: to it by rounding to nearest even
// (core/bfloat16.h), from it exactly; an int64 goes to float32 first (rounding), then to bfloat16.
// A copy between equal dtypes moves bits (a bfloat16 NaN keeps its payload). To bool, as
// PyTorch's .to(torch.bool): nonzero (NaN included) is true; from bool: 1 and 0.
template <class To, class From>
inline To convert(From x) {
  if constexpr (std::is_same_v<To, From>)
    return x;
  else if constexpr (std::is_same_v<To, bool>)
    return static_cast<float>(x) != 0.0f;  // exact for bfloat16 and int64: only 0 gives 0.0f
  else if constexpr (std::is_same_v<To, int64_t> && std::is_same_v<From, float>)
    return float_to_int64(x);
  else if constexpr (std::is_same_v<To, int64_t> && std::is_same_v<From, BFloat16>)
    return float_to_int64(static_cast<float>(x));
  else if constexpr (std::is_same_v<To, BFloat16>)
    return BFloat16(static_cast<float>(x));
  else
    return static_cast<To>(x);
}

// Calls fn(T{}) with T the element type of `dtype`.
template <class Fn>
void visit_dtype(DType dtype, const Fn& fn) {
  switch (dtype) {
    case DType::Float32:
      return fn(float{});
    case DType::Int64:
      return fn(int64_t{});
    case DType::BFloat16:
      return fn(BFloat16{});
    case DType::Bool:
      return fn(bool{});
  }
  LOOM_FAIL("copy: unknown dtype {}", static_cast<int>(dtype));
}

// dst[i] = convert(src[i]) over one run (ptrs/steps as in cpu::StridedIter).
template <class To, class From>
void copy_run(const cpu::Ptrs<2>& p, const cpu::Steps<2>& s, int64_t n) {
  To* dst = reinterpret_cast<To*>(p[0]);
  const From* src = reinterpret_cast<const From*>(p[1]);
  if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
    if constexpr (std::is_same_v<To, From>) {
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(To));
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<To>(src[i]);
    }
  } else if (s[0] == sizeof(To) && s[1] == 0) {  // broadcast source
    const To v = convert<To>(*src);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<To*>(p[0] + i * s[0]) =
          convert<To>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
  }
}

// A copy that is contiguous along one dim of the destination (a) but along another dim of the
// source (b) -- a transpose, e.g. x.t().contiguous() -- would touch a new cache line for every
// element on one side. Copying kTile x kTile tiles keeps both sides' lines in L1 (the classic
// blocked transpose). Returns false when the layout is not of that kind.
constexpr int64_t kTile = 32;

template <class T>
bool blocked_transpose(const cpu::StridedIter<2>& it) {
  const Shape& shape = it.shape();
  const std::vector<int64_t>& ds = it.byte_strides(0);
  const std::vector<int64_t>& ss = it.byte_strides(1);
  constexpr int64_t es = sizeof(T);
  const size_t nd = shape.size();
  size_t a = nd, b = nd;
  for (size_t d = 0; d < nd; ++d) {
    if (ds[d] == es && ss[d] != es) a = d;
    if (ss[d] == es && ds[d] != es) b = d;
  }
  if (a == nd || b == nd || shape[a] < kTile || shape[b] < kTile) return false;
  std::vector<size_t> rest;  // every other dim, iterated outside the tiles
  int64_t outer = 1;
  for (size_t d = 0; d < nd; ++d)
    if (d != a && d != b) rest.push_back(d), outer *= shape[d];
  const int64_t tiles_b = (shape[b] + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, cpu::kGrainCheap / (kTile * shape[a]));
  cpu::parallel_for(0, outer * tiles_b, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      char* dst = it.data(0);
      const char* src = it.data(1);
      int64_t rem = task / tiles_b;
      for (size_t r = rest.size(); r-- > 0;) {
        const int64_t idx = rem % shape[rest[r]];
        rem /= shape[rest[r]];
        dst += idx * ds[rest[r]];
        src += idx * ss[rest[r]];
      }
      const int64_t i0 = (task % tiles_b) * kTile, i1 = std::min(shape[b], i0 + kTile);
      for (int64_t j0 = 0; j0 < shape[a]; j0 += kTile) {
        const int64_t j1 = std::min(shape[a], j0 + kTile);
        for (int64_t i = i0; i < i1; ++i) {
          T* d = reinterpret_cast<T*>(dst + i * ds[b]);
          const char* s = src + i * es;
          for (int64_t j = j0; j < j1; ++j) d[j] = *reinterpret_cast<const T*>(s + j * ss[a]);
        }
      }
    }
  });
  return true;
}

template <class T>
void fill_typed(Tensor& dst, T value) {
  const cpu::StridedIter<1> iter({&dst}, "fill");
  iter.for_each(cpu::kGrainCheap,
                [value](const cpu::Ptrs<1>& p, const cpu::Steps<1>& s, int64_t n) {
                  T* out = reinterpret_cast<T*>(p[0]);
                  if (s[0] == sizeof(T)) {
#pragma omp simd
                    for (int64_t i = 0; i < n; ++i) out[i] = value;
                  } else {
                    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = value;
                  }
                });
}

}  // namespace

void cpu::copy(const Tensor& src, Tensor& dst) {
  const cpu::StridedIter<2> iter({&dst, &src}, "copy");
  visit_dtype(dst.dtype(), [&]([[maybe_unused]] auto to) {
    visit_dtype(src.dtype(), [&]([[maybe_unused]] auto from) {
      using To = decltype(to);
      using From = decltype(from);
      if constexpr (std::is_same_v<To, From>)
        if (blocked_transpose<To>(iter)) return;
      iter.for_each(cpu::kGrainCheap, copy_run<To, From>);
    });
  });
}

void cpu::arange(Tensor& dst, double start, double step) {
  const int64_t n = dst.numel();
  if (dst.dtype() == DType::Float32) {
    float* p = dst.data_ptr<float>();
    const float s = static_cast<float>(start), d = static_cast<float>(step);
    // One rounding (a fused multiply-add), so that the CUDA kernel's values are the same.
    for (int64_t i = 0; i < n; ++i) p[i] = std::fma(d, static_cast<float>(i), s);
  } else {
    int64_t* p = dst.data_ptr<int64_t>();
    const auto s = static_cast<int64_t>(start), d = static_cast<int64_t>(step);
    for (int64_t i = 0; i < n; ++i) p[i] = s + d * i;
  }
}

void cpu::fill(Tensor& dst, double value) {
  if (dst.dtype() == DType::Float32)
    fill_typed<float>(dst, static_cast<float>(value));
  else if (dst.dtype() == DType::BFloat16)
    fill_typed<BFloat16>(dst, BFloat16(static_cast<float>(value)));
  else if (dst.dtype() == DType::Bool)
    fill_typed<bool>(dst, value != 0.0);
  else
    fill_typed<int64_t>(dst, static_cast<int64_t>(value));
}

}  // namespace loom
