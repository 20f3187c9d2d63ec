// Position-wise feed-forward network.
#include "nn/feed_forward.h"

namespace loom::nn {

Tensor feed_forward(const Tensor& x, const Linear& linear1, const Linear& linear2,
                    Activation activation, const Dropout& dropout) {
  // Vaswani et al. 2017, eq. 2: x [..., d_model] -> hidden [..., d_ff] -> [..., d_model]
  // act(x W_1 + b_1) as one op (linear_activation): in inference one GEMM that adds b_1 and
  // applies act as it writes; in training the GEMM keeps x W_1, which the activation's
  // backward reads, and act(x W_1 + b_1) is computed with b_1 added inside the activation's
  // kernel (on the CPU by the GEMM itself, as it finishes each band of rows).
  const Tensor hidden = linear1.forward_activation(x, activation);
  return linear2.forward(dropout.forward(hidden));
}

FeedForward::FeedForward(int64_t d_model, int64_t dim_feedforward,
                         const FeedForwardOptions& options)
    : activation(options.activation) {
  linear1 =
      register_module(options.linear1_name, std::make_shared<Linear>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(options.dropout));
  linear2 =
      register_module(options.linear2_name, std::make_shared<Linear>(dim_feedforward, d_model));
  output_dropout =
      register_module("output_dropout", std::make_shared<Dropout>(options.output_dropout));
}

FeedForward::FeedForward(int64_t d_model, int64_t dim_feedforward, float p, Activation activation_)
    : FeedForward(d_model, dim_feedforward, {.activation = activation_, .dropout = p}) {}

Tensor FeedForward::forward(const Tensor& x) const {
  // x [..., d_model] -> [..., d_model]
  return output_dropout->forward(feed_forward(x, *linear1, *linear2, activation, *dropout));
}

}  // namespace loom::nn
