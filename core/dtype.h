// Element types and devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

// float32 holds values; int64 holds indices, token ids, labels and integer arithmetic; bfloat16
// (core/bfloat16.h) holds values in half the memory, for mixed-precision training: storage and
// conversion on every device, arithmetic by upcasting to float32 (see autograd/ops.h,
// "bfloat16"); bool (one byte, 0 or 1, like torch.bool) holds the results of comparisons and
// logical ops, and masks. Ops on mixed dtypes promote as PyTorch does (promote_types below,
// autograd/ops_dtype.h).
enum class DType { Float32, Int64, BFloat16, Bool };

enum class Device { CPU, CUDA };

inline size_t element_size(DType t) {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::BFloat16:
      return 2;
    case DType::Bool:
      return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Int64:
      return "int64";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Bool:
      return "bool";
  }
  return "unknown dtype";
}

// float32 and bfloat16: the dtypes that hold real values and can carry gradients.
inline bool is_floating_point(DType t) { return t == DType::Float32 || t == DType::BFloat16; }

// torch.promote_types: the dtype both operands of a binary op are computed in. The categories
// rank bool < integer (int64) < floating; within floating, bfloat16 with float32 gives float32
// (the wider one). So int64 + float32 -> float32, bool + int64 -> int64, bfloat16 + int64 ->
// bfloat16, and a dtype with itself gives itself.
inline DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (a == DType::Int64) return b;  // b is floating
  if (b == DType::Int64) return a;
  return DType::Float32;            // bfloat16 with float32
}

inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

}  // namespace loom
