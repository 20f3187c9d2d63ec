// The checks of backend.h's contract, shared by every kernel family (backends/<family>/*.cpp):
// a family's public Backend methods check their arguments with these, once for every device,
// before they run the device's implementation. Defined in backend.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/dtype.h"
#include "core/tensor.h"

namespace loom {

// The checks of one call; `op` names the call in every message, `name` the argument at fault.
// bfloat16 tensors reach only the kernels that take them (`bfloat16` set; gemm through
// GemmArgs' types): the other kernels would read their 2-byte elements as float32 or int64, so
// they refuse them.
struct Contract {
  Device device;
  const char* op;
  bool bfloat16;

  Contract(Device d, const char* name, bool takes_bfloat16 = false)
      : device(d), op(name), bfloat16(takes_bfloat16) {}

  void on_device(const Tensor& t, const char* name) const;
  void dtype(const Tensor& t, DType dtype, const char* name) const;
  // A float32 or bfloat16 tensor (the elementwise kernels that compute in float32 on either).
  void floating(const Tensor& t, const char* name) const;
  void numel(const Tensor& t, int64_t numel, const char* name) const;
  // An input of `dtype` with `count` elements, in any layout (the caller makes it contiguous).
  void input(const Tensor& t, DType type, int64_t count, const char* name) const;
  // An output of a row-wise kernel: of `dtype`, contiguous, with `count` elements.
  void output(const Tensor& t, DType type, int64_t count, const char* name) const;
  void same_shape(const Tensor& t, const Tensor& out, const char* name) const;
  void extents(int64_t outer, int64_t n, int64_t inner) const;
  // An op over a float32 [outer, n, inner] block whose inputs and out all hold its elements
  // (softmax, the scans and their backwards): the extents, each input, then out. Returns the
  // element count.
  int64_t float32_block(int64_t outer, int64_t n, int64_t inner,
                        std::initializer_list<std::pair<const Tensor&, const char*>> inputs,
                        const Tensor& out) const;
  // x seen as `rows` equal rows (one per mean or target value); returns the row length.
  int64_t row_length(const Tensor& x, int64_t rows, const char* name) const;
};

}  // namespace loom
