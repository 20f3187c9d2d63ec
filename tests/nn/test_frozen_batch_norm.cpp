// FrozenBatchNorm2d: the affine map of BatchNorm2d in evaluation, in training too; buffers only
// (nothing trained); PyTorch's names, num_batches_tracked skipped on load; errors name the layer.
#include <map>

#include "nn/batch_norm.h"
#include "io/checkpoint.h"
#include "nn/frozen_batch_norm.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("FrozenBatchNorm2d equals BatchNorm2d in evaluation, and stays frozen in training") {
  manual_seed(2);
  nn::BatchNorm2d bn(3);
  nn::FrozenBatchNorm2d frozen(3);
  {
    NoGradGuard no_grad;
    for (Tensor t : {bn.weight, bn.bias, bn.running_mean}) t.copy_(randn({3}));
    bn.running_var.copy_(rand({3}) + 0.5f);
    frozen.weight.copy_(bn.weight);
    frozen.bias.copy_(bn.bias);
    frozen.running_mean.copy_(bn.running_mean);
    frozen.running_var.copy_(bn.running_var);
  }
  bn.eval();
  const Tensor x = randn({2, 3, 4, 5});
  check_close(frozen.forward(x), bn.forward(x), 1e-5f, 1e-6f, "eval");
  frozen.train();  // training mode changes nothing: no batch statistics, no running update
  const std::vector<float> mean_before = frozen.running_mean.to_vector();
  check_close(frozen.forward(x), bn.forward(x), 1e-5f, 1e-6f, "train");
  CHECK(frozen.running_mean.to_vector() == mean_before);
  CHECK(frozen.parameters().empty());
  CHECK(frozen.buffers().size() == 4);
}

TEST_CASE("FrozenBatchNorm2d loads a BatchNorm2d state_dict (num_batches_tracked is skipped)") {
  nn::BatchNorm2d bn(2);
  nn::FrozenBatchNorm2d frozen(2);
  std::map<std::string, Tensor> state;
  for (const auto& [name, t] : bn.state_dict()) state[name] = t;
  state["running_var"] = tensor({4.0f, 9.0f}, {2});
  CHECK(state.count("num_batches_tracked") == 1);
  nn::load_state_dict(frozen, state, "bn");
  CHECK(frozen.running_var.to_vector() == std::vector<float>{4.0f, 9.0f});
  // y = (x - 0) / sqrt(var + eps) * 1 + 0
  const Tensor y = frozen.forward(ones({1, 2, 1, 1}));
  CHECK(y.to_vector()[0] == doctest::Approx(1.0 / std::sqrt(4.0 + 1e-5)));
  CHECK(y.to_vector()[1] == doctest::Approx(1.0 / std::sqrt(9.0 + 1e-5)));
}

TEST_CASE("FrozenBatchNorm2d rejects inputs that are not [N, C, H, W] with its C") {
  nn::FrozenBatchNorm2d frozen(3);
  expect_error(
      [&] {
        frozen.forward(zeros({2, 4, 5, 5}));
      },
      {"FrozenBatchNorm2d(3)", "[N, 3, H, W]", "[2,4,5,5]"});
  expect_error([&] { frozen.forward(zeros({3, 5})); }, {"FrozenBatchNorm2d", "[3,5]"});
  expect_error([] { nn::FrozenBatchNorm2d(0); }, {"FrozenBatchNorm2d", "num_features 0"});
}
