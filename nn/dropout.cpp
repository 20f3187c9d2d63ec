// Dropout layer.
#include "nn/dropout.h"

#include "nn/functional.h"

namespace loom::nn {

Dropout::Dropout(float p_) : p(p_) {
  LOOM_CHECK(p_ >= 0.0f && p_ <= 1.0f, "Dropout: probability {} outside [0, 1]", p_);
}

Tensor Dropout::forward(const Tensor& x) const { return functional::dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}, inplace=False", py_repr(p)); }

}  // namespace loom::nn
