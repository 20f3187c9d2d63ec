// Fits y = 3x - 1 with one weight and one bias: tensors, autograd and a gradient step.
#include <cstdio>

#include "loom.h"
using namespace loom;

int main() {
  manual_seed(0);
  Tensor x = randn({64, 1});
  Tensor y = x * 3.0f - 1.0f;                       // the line to recover
  Tensor w = zeros({1, 1}).requires_grad_();
  Tensor b = zeros({1}).requires_grad_();
  for (int step = 0; step < 200; ++step) {
    Tensor loss = mean(pow(matmul(x, w) + b - y, 2.0f));
    loss.backward();
    NoGradGuard no_grad;                            // update the weights outside the graph
    w.add_(w.grad(), -0.1f), b.add_(b.grad(), -0.1f);
    w.grad().zero_(), b.grad().zero_();
  }
  std::printf("w = %.3f, b = %.3f\n", w.item(), b.item());
  return (w.item() > 2.99f && w.item() < 3.01f && b.item() > -1.01f) ? 0 : 1;
}
