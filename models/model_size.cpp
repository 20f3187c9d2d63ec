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

}  // namespace loom::models
