// Backend::adam_step_multi, the multi-tensor Adam(W) step that optim::Adam/AdamW take for a
// whole parameter group: bit-identical to one adam_step per tensor (odd sizes, empty tensors,
// strided gradients, weight decay on and off), the lists checked with the index at fault, and
// the optimizer's grouping by step count (parameters that skipped steps) giving the numbers of
// separate optimizers. The CUDA kernel is compared with this one in tests/cuda/test_cuda_optim.cpp.
#include <cmath>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

AdamArgs args_at(int step, float weight_decay, bool decoupled) {
  AdamArgs a;
  a.lr = 0.01f;
  a.weight_decay = weight_decay;
  a.decoupled = decoupled;
  a.bias1 = 1.0f - std::pow(a.beta1, static_cast<float>(step));
  a.bias2 = 1.0f - std::pow(a.beta2, static_cast<float>(step));
  return a;
}

// Bit for bit, NaN included.
void check_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  check_close(a, b, 0.0f, 0.0f, what);
}

}  // namespace

TEST_CASE("adam_step_multi on the CPU is one adam_step per tensor, bit for bit") {
  // 61,000-odd elements in all: on two or three threads the list's chunks start inside tensors.
  const std::vector<Shape> shapes = {{1},    {3},     {1025},  {0},
                                     {7, 5}, {40961}, {2, 0},  {33, 31}, {17, 997}};
  const int saved = get_num_threads();
  set_num_threads(3);
  for (bool decoupled : {false, true}) {
    for (float wd : {0.0f, 0.1f}) {
      CAPTURE(decoupled);
      CAPTURE(wd);
      std::vector<Tensor> p1, p2, m1, m2, v1, v2;
      for (size_t i = 0; i < shapes.size(); ++i) {
        p1.push_back(philox_tensor(shapes[i], 10 + i));
        p2.push_back(p1.back().clone());
        for (auto* list : {&m1, &m2, &v1, &v2}) list->push_back(zeros(shapes[i]));
      }
      for (int step = 1; step <= 3; ++step) {
        const AdamArgs a = args_at(step, wd, decoupled);
        std::vector<Tensor> grads;
        for (size_t i = 0; i < shapes.size(); ++i) {
          // A strided gradient for the 2-D ones (the transpose of a contiguous tensor).
          Shape s = shapes[i];
          grads.push_back(s.size() == 2 ? philox_tensor({s[1], s[0]}, 100 * step + i).t()
                                        : philox_tensor(s, 100 * step + i));
        }
        cpu_backend().adam_step_multi(a, p1, grads, m1, v1);
        for (size_t i = 0; i < shapes.size(); ++i)
          cpu_backend().adam_step(a, p2[i], grads[i], m2[i], v2[i]);
      }
      for (size_t i = 0; i < shapes.size(); ++i) {
        const std::string what = "tensor " + std::to_string(i);
        check_identical(p1[i], p2[i], what + " param");
        check_identical(m1[i], m2[i], what + " exp_avg");
        check_identical(v1[i], v2[i], what + " exp_avg_sq");
      }
      // The update moved the parameters (the comparison is not of two untouched copies).
      CHECK(p1[2].to_vector() != philox_tensor({1025}, 12).to_vector());
    }
  }
  set_num_threads(saved);
}

TEST_CASE("adam_step_multi rejects mismatched lists, naming the index and the shapes") {
  const AdamArgs a = args_at(1, 0.0f, true);
  std::vector<Tensor> p = {zeros({2}), zeros({3, 4})}, m = {zeros({2}), zeros({3, 4})},
                      v = {zeros({2}), zeros({3, 4})};
  std::vector<Tensor> g = {zeros({2}), zeros({4, 3})};
  expect_error([&] { cpu_backend().adam_step_multi(a, p, g, m, v); },
               {"adam_step_multi", "grad has shape [4,3]", "[3,4]", "tensor 1 of 2"});
  std::vector<Tensor> short_g = {zeros({2})};
  expect_error([&] { cpu_backend().adam_step_multi(a, p, short_g, m, v); },
               {"adam_step_multi", "2 params, 1 grads"});
  std::vector<Tensor> bad_m = {zeros({5}), zeros({3, 4})};
  g = {zeros({2}), zeros({3, 4})};
  expect_error([&] { cpu_backend().adam_step_multi(a, p, g, bad_m, v); },
               {"adam_step_multi", "exp_avg has shape [5]", "expected 2 elements",
                "tensor 0 of 2"});
  std::vector<Tensor> int_p = {zeros({2}), Tensor::empty({3, 4}, DType::Int64, Device::CPU)};
  expect_error([&] { cpu_backend().adam_step_multi(a, int_p, g, m, v); },
               {"adam_step_multi", "param has dtype int64", "tensor 1 of 2"});
  std::vector<Tensor> undefined_g = {zeros({2}), Tensor()};
  expect_error([&] { cpu_backend().adam_step_multi(a, p, undefined_g, m, v); },
               {"adam_step_multi", "grad is an undefined tensor", "tensor 1 of 2"});
  AdamArgs no_bias = a;
  no_bias.bias1 = 0.0f;
  expect_error([&] { cpu_backend().adam_step_multi(no_bias, p, g, m, v); },
               {"adam_step_multi", "bias corrections"});
  // Nothing was updated by the failed calls: every check comes before the first update.
  CHECK(p[0].to_vector() == std::vector<float>(2, 0.0f));
  CHECK(m[0].to_vector() == std::vector<float>(2, 0.0f));
}

TEST_CASE("AdamW over a group whose parameters skipped different steps matches one optimizer "
          "per parameter") {
  // a gets a gradient at every step, b from step 2 on, c only at step 3: in the shared group the
  // three are at different step counts (different bias corrections) at step 3.
  const std::vector<Shape> shapes = {{5, 3}, {4}, {1}};
  std::vector<Tensor> together, alone;
  for (size_t i = 0; i < shapes.size(); ++i) {
    together.push_back(philox_tensor(shapes[i], 40 + i).requires_grad_(true));
    alone.push_back(philox_tensor(shapes[i], 40 + i).requires_grad_(true));
  }
  optim::AdamW shared({{together, 0.02f, 0.1f}});
  std::vector<std::unique_ptr<optim::AdamW>> separate;
  for (const Tensor& p : alone)
    separate.push_back(
        std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{{{p}, 0.02f, 0.1f}}));
  for (int step = 1; step <= 4; ++step) {
    shared.zero_grad();
    for (size_t i = 0; i < shapes.size(); ++i) {
      const bool has_grad = (i == 0) || (i == 1 && step >= 2) || (i == 2 && step >= 3);
      if (!has_grad) continue;
      const Tensor g = philox_tensor(shapes[i], 200 * step + i);
      together[i].set_grad(g.clone());
      alone[i].set_grad(g.clone());
      separate[i]->step();
    }
    shared.step();
  }
  for (size_t i = 0; i < shapes.size(); ++i)
    check_identical(together[i], alone[i], "parameter " + std::to_string(i));
}
