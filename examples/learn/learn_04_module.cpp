// Chapter 04 (docs/learn/04-modules.md): Module, Linear, LayerNorm, Dropout.
// Builds a small Sequential, prints it as PyTorch would, lists its parameters by their
// hierarchical names, then shows what LayerNorm and Dropout do to a batch.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

int main(int argc, char** argv) try {
  learn::parse_args(argc, argv,
                    "Chapter 04 (docs/learn/04-modules.md): Module, Linear, LayerNorm, Dropout.");
  manual_seed(0);
  auto linear = std::make_shared<nn::Linear>(4, 6);
  auto norm = std::make_shared<nn::LayerNorm>(6);
  auto model = std::make_shared<nn::Sequential>(linear, std::make_shared<nn::ReLU>(), norm,
                                                std::make_shared<nn::Dropout>(0.5f));
  std::cout << *model << "\n\n";
  for (const auto& [name, p] : model->named_parameters())
    std::printf("%-10s %-6s requires_grad=%d\n", name.c_str(), shape_str(p.shape()).c_str(),
                p.requires_grad());
  std::printf("num_parameters = %lld  (Linear 4*6 + 6, LayerNorm 6 + 6)\n\n",
              static_cast<long long>(model->num_parameters()));

  // LayerNorm: every row of its output has mean 0 and (biased) variance 1 before the gain and
  // bias, which start at 1 and 0.
  const Tensor x = randn({3, 4}) * 5.0f + 2.0f;
  const Tensor h = norm->forward(relu(linear->forward(x)));  // the first three steps
  const Tensor row_mean = h.mean(1), row_var = h.var(1, /*unbiased=*/false);
  std::cout << "after Linear, ReLU, LayerNorm: row means " << row_mean << "\n"
            << "                               row variances " << row_var << "\n\n";

  // Dropout in training zeroes about half and doubles the rest; in evaluation it is the identity.
  const Tensor out_train = model->forward(x);
  model->eval();
  const Tensor out_eval = model->forward(x);
  std::cout << "training:   " << out_train.select(0, 0) << "\n"
            << "evaluation: " << out_eval.select(0, 0) << "\n";
  const float kept = sum(ne(out_train, zeros({}))).item();
  std::printf("kept in training: %.0f of %lld values, each scaled by 1 / (1 - p) = %.1f\n", kept,
              static_cast<long long>(out_train.numel()), 1.0f / (1.0f - 0.5f));
  return std::fabs(row_mean.abs().max().item()) < 1e-5f ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
