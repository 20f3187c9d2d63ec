// Element types and devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

// float32 holds values; int64 holds indices, token ids and labels.
enum class DType { Float32, Int64 };

enum class Device { CPU, CUDA };

inline size_t element_size(DType t) { return t == DType::Float32 ? 4 : 8; }
inline const char* dtype_name(DType t) { return t == DType::Float32 ? "float32" : "int64"; }
inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

}  // namespace loom
