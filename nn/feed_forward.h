// The position-wise feed-forward network of a transformer block (Vaswani et al. 2017, eq. 2):
//   FFN(x) = act(x W_1 + b_1) W_2 + b_2
// with dropout on the hidden activations, as in PyTorch's TransformerEncoderLayer
// (parameter names linear1, linear2 as there).
#pragma once

#include <memory>

#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::nn {

class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t dim_feedforward, float dropout = 0.0f,
              Activation activation = Activation::ReLU);

  // x [..., d_model] -> [..., d_model]
  Tensor forward(const Tensor& x) const;

  Activation activation;
  std::shared_ptr<Linear> linear1;  // d_model -> dim_feedforward
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;  // dim_feedforward -> d_model
};

}  // namespace loom::nn
