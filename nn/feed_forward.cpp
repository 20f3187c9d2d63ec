// Position-wise feed-forward network.
#include "nn/feed_forward.h"

namespace loom::nn {

FeedForward::FeedForward(int64_t d_model, int64_t dim_feedforward, float p, Activation activation_)
    : activation(activation_) {
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(p));
  linear2 = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model));
}

Tensor FeedForward::forward(const Tensor& x) const {
  // x [..., d_model] -> hidden [..., dim_feedforward] -> [..., d_model]
  return linear2->forward(dropout->forward(activate(linear1->forward(x), activation)));
}

}  // namespace loom::nn
