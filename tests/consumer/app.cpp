// One Linear layer, a backward pass and a checked gradient: enough to prove the link works.
#include <cstdio>

#include "loom.h"
using namespace loom;

int main() {
  nn::Linear layer(3, 2);
  Tensor y = layer.forward(ones({4, 3}));
  sum(y).backward();
  // d sum(x W^T + b) / dW = sum over the batch of x = 4 for every weight
  for (float g : layer.weight.grad().to_vector())
    if (g != 4.0f) return 1;
  std::printf("consumer ok: output %s\n", shape_str(y.shape()).c_str());
  return 0;
}
