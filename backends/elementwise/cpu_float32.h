// The CPU's path for bfloat16 operands of the elementwise kernels (unary, its derivative,
// bias_unary and binary arithmetic): the float32 loop on exact float32 copies, its result
// rounded once into a bfloat16 output.
#pragma once

#include <initializer_list>

#include "backends/backend.h"

namespace loom::cpu {

// True when every defined operand is float32: the float32 loop runs on them as they are.
inline bool all_float32(std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t->defined() && t->dtype() != DType::Float32) return false;
  return true;
}

// t itself when it is float32 (or undefined), else an exact float32 copy of it.
inline Tensor float32_copy(const Tensor& t) {
  if (!t.defined() || t.dtype() == DType::Float32) return t;
  Tensor f = Tensor::empty(t.shape(), DType::Float32, Device::CPU);
  cpu_backend().copy(t, f);
  return f;
}

// Runs kernel(out32) on a float32 output: `out` itself, or a float32 buffer whose values are
// then rounded once into the bfloat16 `out`.
template <class Kernel>
void into(Tensor& out, const Kernel& kernel) {
  if (out.dtype() == DType::Float32) return kernel(out);
  Tensor result = Tensor::empty(out.shape(), DType::Float32, Device::CPU);
  kernel(result);
  cpu_backend().copy(result, out);
}

}  // namespace loom::cpu
