// Elementwise binary ops (float32 arithmetic; comparisons on float32 or int64 giving float32
// 1/0), where, and axpy. Inputs arrive already broadcast to out's shape, so a broadcast input
// shows up as a zero stride; the run kernel has fast paths for "both contiguous" and "one side
// is a single value" (x + 1, x * scale, masks against a scalar).
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/loops.h"

namespace loom {

namespace {

using cpu::Ptrs;
using cpu::Steps;

struct AddF {
  float operator()(float a, float b) const { return a + b; }
};
struct SubF {
  float operator()(float a, float b) const { return a - b; }
};
struct MulF {
  float operator()(float a, float b) const { return a * b; }
};
struct DivF {
  float operator()(float a, float b) const { return a / b; }
};
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
struct EqF {
  template <class T>
  float operator()(T a, T b) const {
    return a == b ? 1.0f : 0.0f;
  }
};
struct NeF {
  template <class T>
  float operator()(T a, T b) const {
    return a != b ? 1.0f : 0.0f;
  }
};
struct LtF {
  template <class T>
  float operator()(T a, T b) const {
    return a < b ? 1.0f : 0.0f;
  }
};
struct LeF {
  template <class T>
  float operator()(T a, T b) const {
    return a <= b ? 1.0f : 0.0f;
  }
};
struct GtF {
  template <class T>
  float operator()(T a, T b) const {
    return a > b ? 1.0f : 0.0f;
  }
};
struct GeF {
  template <class T>
  float operator()(T a, T b) const {
    return a >= b ? 1.0f : 0.0f;
  }
};

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

bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge;
}

template <class T>
void compare(BinaryOp op, const cpu::StridedIter<3>& it) {
  using cpu::kGrainCheap;
  switch (op) {
    case BinaryOp::Eq:
      return binary_loop<T>(it, kGrainCheap, EqF{});
    case BinaryOp::Ne:
      return binary_loop<T>(it, kGrainCheap, NeF{});
    case BinaryOp::Lt:
      return binary_loop<T>(it, kGrainCheap, LtF{});
    case BinaryOp::Le:
      return binary_loop<T>(it, kGrainCheap, LeF{});
    case BinaryOp::Gt:
      return binary_loop<T>(it, kGrainCheap, GtF{});
    case BinaryOp::Ge:
      return binary_loop<T>(it, kGrainCheap, GeF{});
    default:
      LOOM_FAIL("binary: op {} is not a comparison", static_cast<int>(op));
  }
}

void arithmetic(BinaryOp op, const cpu::StridedIter<3>& it) {
  using cpu::kGrainCheap;
  switch (op) {
    case BinaryOp::Add:
      return binary_loop<float>(it, kGrainCheap, AddF{});
    case BinaryOp::Sub:
      return binary_loop<float>(it, kGrainCheap, SubF{});
    case BinaryOp::Mul:
      return binary_loop<float>(it, kGrainCheap, MulF{});
    case BinaryOp::Div:
      return binary_loop<float>(it, kGrainCheap, DivF{});
    case BinaryOp::Pow:
      return binary_loop<float>(it, cpu::kGrainHeavy, PowF{});
    case BinaryOp::Maximum:
      return binary_loop<float>(it, kGrainCheap, MaximumF{});
    case BinaryOp::Minimum:
      return binary_loop<float>(it, kGrainCheap, MinimumF{});
    default:
      LOOM_FAIL("binary: op {} is not arithmetic", static_cast<int>(op));
  }
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

void CpuBackend::binary_impl(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  if (!is_comparison(op) && (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 ||
                             out.dtype() != DType::Float32))  // bfloat16: see into()
    return into(out, [&](Tensor& o) { binary_impl(op, float32_copy(a), float32_copy(b), o); });
  const cpu::StridedIter<3> it({&out, &a, &b}, "binary");
  if (is_comparison(op)) {
    if (a.dtype() == DType::Float32)
      compare<float>(op, it);
    else
      compare<int64_t>(op, it);
    return;
  }
  arithmetic(op, it);
}

void CpuBackend::where_impl(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  const cpu::StridedIter<4> it({&out, &cond, &a, &b}, "where");
  const bool cond_f = cond.dtype() == DType::Float32, val_f = out.dtype() == DType::Float32;
  if (cond_f && val_f) where_loop<float, float>(it);
  if (cond_f && !val_f) where_loop<float, int64_t>(it);
  if (!cond_f && val_f) where_loop<int64_t, float>(it);
  if (!cond_f && !val_f) where_loop<int64_t, int64_t>(it);
}

void CpuBackend::axpy_impl(float alpha, const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  float* d = dst.data_ptr<float>();
  const float* s = src.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainCheap, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) d[i] += alpha * s[i];
  });
}

}  // namespace loom
