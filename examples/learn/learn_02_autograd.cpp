// Chapter 02 (docs/learn/02-autograd.md): reverse-mode autodiff.
// Builds loss = sum(tanh(a * b + b)^2), prints the graph the ops recorded (autograd/node.h),
// runs backward (autograd/engine.cpp) and checks every gradient against central finite
// differences, as tests/autograd/test_gradcheck.cpp does for every op.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {

std::map<const TensorImpl*, std::string> leaf_names;

// One line per node, its inputs indented below it: a node reached twice is printed twice.
void print_graph(const autograd::Node& node, int depth) {
  std::printf("%*s%s  (output %s)\n", 2 * depth, "", node.name.c_str(),
              shape_str(node.output_shape).c_str());
  for (const autograd::Edge& edge : node.inputs) {
    if (edge.node)
      print_graph(*edge.node, depth + 1);
    else if (edge.leaf)
      std::printf("%*sleaf %s\n", 2 * depth + 2, "", leaf_names[edge.leaf.get()].c_str());
    else
      std::printf("%*s(no gradient needed)\n", 2 * depth + 2, "");
  }
}

Tensor f(const Tensor& a, const Tensor& b) {
  const Tensor z = tanh(a * b + b);  // [2, 3] * [3] broadcasts b over the rows
  return sum(z * z);
}

// d f / d x[i] ~ (f(x + eps e_i) - f(x - eps e_i)) / (2 eps), one element at a time.
std::vector<float> finite_differences(Tensor& x, const std::function<float()>& eval) {
  NoGradGuard no_grad;
  std::vector<float> base = x.to_vector(), numeric(base.size());
  const float eps = 1e-2f;
  for (size_t i = 0; i < base.size(); ++i) {
    auto at = [&](float delta) {
      std::vector<float> v = base;
      v[i] += delta;
      x.copy_(tensor(v, x.shape()));
      return eval();
    };
    numeric[i] = (at(eps) - at(-eps)) / (2 * eps);
  }
  x.copy_(tensor(base, x.shape()));
  return numeric;
}

}  // namespace

int main(int argc, char** argv) try {
  learn::parse_args(argc, argv,
                    "Chapter 02 (docs/learn/02-autograd.md): a recorded graph, its backward and "
                    "finite differences.");
  manual_seed(0);
  Tensor a = randn({2, 3}).requires_grad_();
  Tensor b = randn({3}).requires_grad_();
  leaf_names = {{a.impl(), "a [2,3]"}, {b.impl(), "b [3]"}};

  const Tensor loss = f(a, b);
  std::printf("loss = sum(tanh(a * b + b)^2) = %.6f\n\nthe recorded graph, from the loss down:\n",
              loss.item());
  print_graph(*loss.grad_fn(), 0);

  loss.backward();  // the engine walks the graph above in reverse topological order
  float worst = 0.0f;
  for (auto [name, x] : {std::pair<const char*, Tensor>{"a", a}, {"b", b}}) {
    const std::vector<float> analytic = x.grad().to_vector();
    const std::vector<float> numeric =
        finite_differences(x, [&] { return f(a.detach(), b.detach()).item(); });
    std::printf("\nd loss / d %s   backward   finite differences\n", name);
    for (size_t i = 0; i < analytic.size(); ++i) {
      std::printf("  [%zu]        %9.5f   %9.5f\n", i, analytic[i], numeric[i]);
      worst = std::max(worst, std::fabs(analytic[i] - numeric[i]));
    }
  }
  std::printf("\nlargest difference: %.2e (float32, eps = 1e-2)\n", worst);
  return worst < 2e-3f ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
