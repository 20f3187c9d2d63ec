// Elementwise binary ops (float32 arithmetic; comparisons on float32 or int64 giving float32
// 1/0), where, and axpy. Inputs arrive already broadcast to out's shape, so a broadcast input
// shows up as a zero stride; the run kernel has fast paths for "both contiguous" and "one side
// is a single value" (x + 1, x * scale, masks against a scalar).
#include <cmath>
#include <functional>

#include "backends/cpu/loops.h"
#include "backends/elementwise/cpu_float32.h"
#include "backends/elementwise/elementwise.h"

namespace loom {

namespace {

using cpu::Ptrs;
using cpu::Steps;

struct PowF {
  float operator()(float a, float b) const { return std::pow(a, b); }
};
// torch.maximum/minimum propagate NaN from either side.
struct MaximumF {
  float operator()(float a, float b) const { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
};
struct MinimumF {
  float operator()(float a, float b) const { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
};
// A comparison (Cmp: std::less<>, ...) of two float32 or two int64 values, as a float32 1/0.
template <class Cmp>
struct CompareF {
  template <class T>
  float operator()(T a, T b) const {
    return Cmp{}(a, b) ? 1.0f : 0.0f;
  }
};
template <class F>
constexpr bool is_compare = false;
template <class Cmp>
constexpr bool is_compare<CompareF<Cmp>> = true;

// out[i] = f(a[i], b[i]) with out float32 and inputs of type T.
template <class T, class F>
void binary_loop(const cpu::StridedIter<3>& iter, int64_t grain, F f) {
  iter.for_each(grain, [f](const Ptrs<3>& p, const Steps<3>& s, int64_t n) LOOM_FLATTEN {
    float* out = reinterpret_cast<float*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t kT = sizeof(T);
    if (s[0] == 4 && s[1] == kT && s[2] == kT) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
    } else if (s[0] == 4 && s[1] == kT && s[2] == 0) {
      const T bv = *b;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], bv);
    } else if (s[0] == 4 && s[1] == 0 && s[2] == kT) {
      const T av = *a;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = f(av, b[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<float*>(p[0] + i * s[0]) =
            f(*reinterpret_cast<const T*>(p[1] + i * s[1]),
              *reinterpret_cast<const T*>(p[2] + i * s[2]));
    }
  });
}

// Calls loop(f, grain) with op's function object f and the grain at which its loop goes
// parallel: the one switch over BinaryOp.
template <class Loop>
void visit(BinaryOp op, const Loop& loop) {
  using cpu::kGrainCheap;
  // clang-format off
  switch (op) {
    case BinaryOp::Add: return loop(std::plus<>{}, kGrainCheap);
    case BinaryOp::Sub: return loop(std::minus<>{}, kGrainCheap);
    case BinaryOp::Mul: return loop(std::multiplies<>{}, kGrainCheap);
    case BinaryOp::Div: return loop(std::divides<>{}, kGrainCheap);
    case BinaryOp::Pow: return loop(PowF{}, cpu::kGrainHeavy);
    case BinaryOp::Maximum: return loop(MaximumF{}, kGrainCheap);
    case BinaryOp::Minimum: return loop(MinimumF{}, kGrainCheap);
    case BinaryOp::Eq: return loop(CompareF<std::equal_to<>>{}, kGrainCheap);
    case BinaryOp::Ne: return loop(CompareF<std::not_equal_to<>>{}, kGrainCheap);
    case BinaryOp::Lt: return loop(CompareF<std::less<>>{}, kGrainCheap);
    case BinaryOp::Le: return loop(CompareF<std::less_equal<>>{}, kGrainCheap);
    case BinaryOp::Gt: return loop(CompareF<std::greater<>>{}, kGrainCheap);
    case BinaryOp::Ge: return loop(CompareF<std::greater_equal<>>{}, kGrainCheap);
  }
  // clang-format on
  LOOM_FAIL("binary: unknown op {}", static_cast<int>(op));
}

// out[i] = cond[i] != 0 ? a[i] : b[i], with C the condition's and T the values' type.
template <class C, class T>
void where_loop(const cpu::StridedIter<4>& iter) {
  iter.for_each(cpu::kGrainCheap, [](const Ptrs<4>& p, const Steps<4>& s, int64_t n) {
    T* out = reinterpret_cast<T*>(p[0]);
    const C* cond = reinterpret_cast<const C*>(p[1]);
    const T* a = reinterpret_cast<const T*>(p[2]);
    const T* b = reinterpret_cast<const T*>(p[3]);
    constexpr int64_t kT = sizeof(T), kC = sizeof(C);
    if (s[0] == kT && s[1] == kC && s[2] == kT && s[3] == kT) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = cond[i] != C(0) ? a[i] : b[i];
    } else if (s[0] == kT && s[1] == kC && s[2] == 0 && s[3] == kT) {  // masked_fill
      const T av = *a;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = cond[i] != C(0) ? av : b[i];
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * s[0]) =
            *reinterpret_cast<const C*>(p[1] + i * s[1]) != C(0)
                ? *reinterpret_cast<const T*>(p[2] + i * s[2])
                : *reinterpret_cast<const T*>(p[3] + i * s[3]);
    }
  });
}

}  // namespace

void cpu::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  if (op < BinaryOp::Eq && !all_float32({&a, &b, &out}))  // arithmetic on bfloat16: see into()
    return into(out, [&](Tensor& o) { binary(op, float32_copy(a), float32_copy(b), o); });
  const cpu::StridedIter<3> it({&out, &a, &b}, "binary");
  visit(op, [&](auto f, int64_t grain) {
    if constexpr (is_compare<decltype(f)>)  // of float32 or int64 values
      if (a.dtype() == DType::Int64) return binary_loop<int64_t>(it, grain, f);
    binary_loop<float>(it, grain, f);
  });
}

void cpu::where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const cpu::StridedIter<4> it({&out, &cond, &a, &b}, "where");
  const bool cond_f = cond.dtype() == DType::Float32, val_f = out.dtype() == DType::Float32;
  if (cond_f && val_f) where_loop<float, float>(it);
  if (cond_f && !val_f) where_loop<float, int64_t>(it);
  if (!cond_f && val_f) where_loop<int64_t, float>(it);
  if (!cond_f && !val_f) where_loop<int64_t, int64_t>(it);
}

void cpu::axpy(float alpha, const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  float* d = dst.data_ptr<float>();
  const float* s = src.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainCheap, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) d[i] += alpha * s[i];
  });
}

}  // namespace loom
