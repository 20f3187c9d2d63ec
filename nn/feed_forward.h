// The position-wise feed-forward network of a transformer block (Vaswani et al. 2017, eq. 2):
//   FFN(x) = act(x W_1 + b_1) W_2 + b_2
// written once, for every model. The references name its two layers each their own way, and
// checkpoints load name-for-name, so the names are options:
//   PyTorch's TransformerEncoderLayer / DecoderLayer: linear1, linear2 (the defaults) — at the
//     layer's top level there, so those layers call the functional form feed_forward() on
//     their own Linear members instead of holding a FeedForward;
//   Hugging Face GPT-2: mlp.c_fc, mlp.c_proj;   timm's ViT and Swin: mlp.fc1, mlp.fc2.
// Dropout sits where each reference puts it: on the hidden activations (PyTorch's layers,
// timm's drop1) and on the output (GPT-2's mlp.dropout, timm's drop2).
#pragma once

#include <memory>
#include <string>

#include "nn/activation.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace loom::nn {

struct FeedForwardOptions {
  Activation activation = Activation::ReLU;
  float dropout = 0.0f;                  // on the hidden activations act(x W_1 + b_1)
  float output_dropout = 0.0f;           // on the output
  std::string linear1_name = "linear1";  // the names the two Linear layers are registered under
  std::string linear2_name = "linear2";
};

// The FFN of eq. 2 on two given layers: linear2(dropout(act(linear1(x)))).
//   x [..., d_model] -> hidden [..., d_ff] -> [..., d_model]
Tensor feed_forward(const Tensor& x, const Linear& linear1, const Linear& linear2,
                    Activation activation, const Dropout& dropout);

class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t dim_feedforward, const FeedForwardOptions& options);
  // PyTorch's layout: linear1, linear2, dropout on the hidden activations only.
  FeedForward(int64_t d_model, int64_t dim_feedforward, float dropout = 0.0f,
              Activation activation = Activation::ReLU);

  // x [..., d_model] -> [..., d_model]
  Tensor forward(const Tensor& x) const;

  Activation activation;
  std::shared_ptr<Linear> linear1;  // d_model -> dim_feedforward, named options.linear1_name
  std::shared_ptr<Dropout> dropout;
  std::shared_ptr<Linear> linear2;  // dim_feedforward -> d_model, named options.linear2_name
  std::shared_ptr<Dropout> output_dropout;
};

}  // namespace loom::nn
