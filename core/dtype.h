// Element types and devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

// float32 holds values; int64 holds indices, token ids and labels; bfloat16 (core/bfloat16.h)
// holds values in half the memory, for mixed-precision training: storage and conversion on
// every device, arithmetic by upcasting to float32 (see autograd/ops.h, "bfloat16").
enum class DType { Float32, Int64, BFloat16 };

enum class Device { CPU, CUDA };

inline size_t element_size(DType t) {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::BFloat16:
      return 2;
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
  }
  return "unknown dtype";
}

// float32 and bfloat16: the dtypes that hold real values and can carry gradients.
inline bool is_floating_point(DType t) { return t == DType::Float32 || t == DType::BFloat16; }

inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

}  // namespace loom
