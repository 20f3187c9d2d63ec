// The one bound on a model's size, applied by every config's validate() before anything is
// allocated. A size comes from a flag or from checkpoint metadata, so it may be a typo or
// hostile ("n_layer": "100000000"); refused here, it is a loom::Error that names the config's
// fields (and, through from_metadata, the file), where building the model would have failed
// after gigabytes with std::bad_alloc or "out of memory".
#pragma once

#include <string>

namespace loom::models {

// Parameters, and the buffers as large that a config implies (a position table, attention
// masks): GPT-2 XL, the largest preset, has 1.56 billion parameters; this is 16 GB of float32.
inline constexpr double kMaxParameters = 4e9;
// Layers (blocks of every stack of the model together): GPT-2 XL has 48. Each is a few modules
// and tensors, so a billion layers of width 1 would exhaust memory with few parameters.
inline constexpr double kMaxLayers = 10000;

// Each config counts its parameters once, as count_parameters<T>(config) in its .cpp: in
// int64_t for num_parameters(), in double for validate()'s check below (a hostile config's
// count would overflow int64).
//
// Throws loom::Error "<config>: <parameters> parameters in <layers> layers is over loom's
// budget ... (<description>)" when either is over its bound. Both are counted in double, so
// that a hostile size cannot overflow the count into a small number.
void check_model_size(const std::string& config, double parameters, double layers,
                      const std::string& description);

}  // namespace loom::models
