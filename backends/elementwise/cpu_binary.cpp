// Elementwise binary ops (arithmetic on float32/bfloat16 or int64; comparisons on float32,
// int64 or bool giving bool or float32 1/0; bitwise ops on int64 or bool), where, and axpy.
// Inputs arrive already broadcast to out's shape, so a broadcast input shows up as a zero
// stride; the run kernel has fast paths for "both contiguous" and "one side is a single value"
// (x + 1, x * scale, masks against a scalar).
#include <cmath>
#include <functional>

#include "backends/cpu/loops.h"
#include "backends/elementwise/binary_math.h"
#include "backends/elementwise/cpu_float32.h"
#include "backends/elementwise/elementwise.h"

namespace loom {

namespace {

using cpu::Ptrs;
using cpu::Steps;

// The op's function objects; Kind says which operand dtypes each takes (elementwise.h).
enum class Kind { Floating, Arithmetic, Compare, Bitwise };  // Arithmetic: float32 and int64

template <class F, Kind K>
struct Op {
  static constexpr Kind kind = K;
  F f;
  template <class T>
  auto operator()(T a, T b) const {
    return f(a, b);
  }
};
struct PowF {
  float operator()(float a, float b) const { return std::pow(a, b); }
};
// The functions of binary_math.h as function objects, for float32 and int64 alike (C++20: the
// type of a lambda without captures names it, and Op default-constructs it).
using MaximumF = decltype([](auto a, auto b) { return binary::maximum(a, b); });
using MinimumF = decltype([](auto a, auto b) { return binary::minimum(a, b); });
using FloorDivF = decltype([](auto a, auto b) { return binary::floor_div(a, b); });
using TruncDivF = decltype([](auto a, auto b) { return binary::trunc_div(a, b); });

// out[i] = f(a[i], b[i]) with inputs of type T and out of type O.
template <class T, class O, class F>
void binary_loop(const cpu::StridedIter<3>& iter, int64_t grain, F f) {
  iter.for_each(grain, [f](const Ptrs<3>& p, const Steps<3>& s, int64_t n) LOOM_FLATTEN {
    O* out = reinterpret_cast<O*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t kT = sizeof(T), kO = sizeof(O);
    if (s[0] == kO && s[1] == kT && s[2] == kT) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<O>(f(a[i], b[i]));
    } else if (s[0] == kO && s[1] == kT && s[2] == 0) {
      const T bv = *b;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<O>(f(a[i], bv));
    } else if (s[0] == kO && s[1] == 0 && s[2] == kT) {
      const T av = *a;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<O>(f(av, b[i]));
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<O*>(p[0] + i * s[0]) =
            static_cast<O>(f(*reinterpret_cast<const T*>(p[1] + i * s[1]),
                             *reinterpret_cast<const T*>(p[2] + i * s[2])));
    }
  });
}

// Calls loop(op, grain) with op's function object and the grain at which its loop goes
// parallel: the one switch over BinaryOp.
template <class Loop>
void visit(BinaryOp op, const Loop& loop) {
  using cpu::kGrainCheap;
  using K = Kind;
  // clang-format off
  switch (op) {
    case BinaryOp::Add: return loop(Op<std::plus<>, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::Sub: return loop(Op<std::minus<>, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::Mul: return loop(Op<std::multiplies<>, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::Div: return loop(Op<std::divides<>, K::Floating>{}, kGrainCheap);
    case BinaryOp::Pow: return loop(Op<PowF, K::Floating>{}, cpu::kGrainHeavy);
    case BinaryOp::Maximum: return loop(Op<MaximumF, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::Minimum: return loop(Op<MinimumF, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::FloorDiv: return loop(Op<FloorDivF, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::TruncDiv: return loop(Op<TruncDivF, K::Arithmetic>{}, kGrainCheap);
    case BinaryOp::Eq: return loop(Op<std::equal_to<>, K::Compare>{}, kGrainCheap);
    case BinaryOp::Ne: return loop(Op<std::not_equal_to<>, K::Compare>{}, kGrainCheap);
    case BinaryOp::Lt: return loop(Op<std::less<>, K::Compare>{}, kGrainCheap);
    case BinaryOp::Le: return loop(Op<std::less_equal<>, K::Compare>{}, kGrainCheap);
    case BinaryOp::Gt: return loop(Op<std::greater<>, K::Compare>{}, kGrainCheap);
    case BinaryOp::Ge: return loop(Op<std::greater_equal<>, K::Compare>{}, kGrainCheap);
    case BinaryOp::BitAnd: return loop(Op<std::bit_and<>, K::Bitwise>{}, kGrainCheap);
    case BinaryOp::BitOr: return loop(Op<std::bit_or<>, K::Bitwise>{}, kGrainCheap);
    case BinaryOp::BitXor: return loop(Op<std::bit_xor<>, K::Bitwise>{}, kGrainCheap);
  }
  // clang-format on
  LOOM_FAIL("binary: unknown op {}", static_cast<int>(op));
}

// A comparison of T values into a bool or float32 out.
template <class T, class F>
void compare_loop(const cpu::StridedIter<3>& it, int64_t grain, F f, DType out) {
  if (out == DType::Bool) return binary_loop<T, bool>(it, grain, f);
  binary_loop<T, float>(it, grain, f);
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

// The condition float32, int64 or bool; the values float32, int64 or bool (one dtype).
template <class C>
void where_values(const cpu::StridedIter<4>& it, DType values) {
  if (values == DType::Float32) return where_loop<C, float>(it);
  if (values == DType::Int64) return where_loop<C, int64_t>(it);
  where_loop<C, bool>(it);
}

}  // namespace

void cpu::binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  const bool floating = is_arithmetic(op) && a.dtype() != DType::Int64;
  if (floating && !all_float32({&a, &b, &out}))  // arithmetic on bfloat16: see into()
    return into(out, [&](Tensor& o) { binary(op, float32_copy(a), float32_copy(b), o); });
  const cpu::StridedIter<3> it({&out, &a, &b}, "binary");
  const DType type = a.dtype();
  visit(op, [&](auto f, int64_t grain) {
    constexpr Kind kind = decltype(f)::kind;
    if constexpr (kind == Kind::Compare) {
      if (type == DType::Float32) return compare_loop<float>(it, grain, f, out.dtype());
      if (type == DType::Int64) return compare_loop<int64_t>(it, grain, f, out.dtype());
      return compare_loop<bool>(it, grain, f, out.dtype());
    } else if constexpr (kind == Kind::Bitwise) {
      if (type == DType::Int64) return binary_loop<int64_t, int64_t>(it, grain, f);
      return binary_loop<bool, bool>(it, grain, f);
    } else {
      if constexpr (kind == Kind::Arithmetic)
        if (type == DType::Int64) return binary_loop<int64_t, int64_t>(it, grain, f);
      binary_loop<float, float>(it, grain, f);
    }
  });
}

void cpu::where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const cpu::StridedIter<4> it({&out, &cond, &a, &b}, "where");
  if (cond.dtype() == DType::Float32) return where_values<float>(it, out.dtype());
  if (cond.dtype() == DType::Int64) return where_values<int64_t>(it, out.dtype());
  where_values<bool>(it, out.dtype());
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
