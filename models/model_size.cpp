#include "models/model_size.h"

#include "core/error.h"

namespace loom::models {

void check_model_size(const std::string& config, double parameters, double layers,
                      const std::string& description) {
  // A NaN count compares false, so it is refused too.
  LOOM_CHECK(parameters <= kMaxParameters && layers <= kMaxLayers,
             "{}: {:.3g} parameters in {:.3g} layers is over loom's budget of {:.3g} parameters "
             "and {:.3g} layers ({})",
             config, parameters, layers, kMaxParameters, kMaxLayers, description);
}

int64_t parameter_count(double parameters) {
  // 2^63 is the first double int64_t cannot hold; a count below it (a whole number) converts
  // exactly.
  LOOM_CHECK(parameters >= 0 && parameters < 0x1p63,
             "num_parameters: {:.3g} parameters do not fit int64_t (validate() refuses this "
             "config)",
             parameters);
  return static_cast<int64_t>(parameters);
}

}  // namespace loom::models
