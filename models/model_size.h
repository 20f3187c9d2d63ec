// The one bound on a model's size, applied by every config's validate() before anything is
// allocated. A size comes from a flag or from checkpoint metadata, so it may be a typo or
// hostile ("n_layer": "100000000"); refused here, it is a loom::Error that names the config's
// fields (and, through from_metadata, the file), where building the model would have failed
// after gigabytes with std::bad_alloc or "out of memory".
#pragma once

#include <cstdint>
#include <string>

namespace loom::models {

// Parameters, and the buffers as large that a config implies (a position table, attention
// masks): GPT-2 XL, the largest preset, has 1.56 billion parameters; this is 16 GB of float32.
inline constexpr double kMaxParameters = 4e9;
// Layers (blocks of every stack of the model together): GPT-2 XL has 48. Each is a few modules
// and tensors, so a billion layers of width 1 would exhaust memory with few parameters.
inline constexpr double kMaxLayers = 10000;

// Each config counts its parameters once, as count_parameters(config) in its .cpp, in double:
// a hostile config's count cannot overflow there, and every count within the budget below is
// exact (an integer below 2^53). validate() checks that count; num_parameters() returns it through
// parameter_count.
//
// Throws loom::Error "<config>: <parameters> parameters in <layers> layers is over loom's
// budget ... (<description>)" when either is over its bound. A NaN count is refused too.
void check_model_size(const std::string& config, double parameters, double layers,
                      const std::string& description);

// A count_parameters() result as num_parameters() returns it; one beyond int64_t (a config
// validate() refuses) is a loom::Error.
int64_t parameter_count(double parameters);

}  // namespace loom::models
