// The optimizers run wherever the parameters live: on CUDA, SGD, Adam(W), clip_grad_norm and a
// save/load resume follow the same PyTorch trajectories as on the CPU. Skipped without a GPU.
#include <unistd.h>

#include <filesystem>

#include "optim_fixture.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("optimizers on CUDA follow PyTorch's trajectories" *
          doctest::skip(!loom::cuda_available())) {
  SUBCASE("SGD nesterov") {
    Mlp mlp(Device::CUDA);
    optim::SGD opt(mlp.params(), 0.05f, 0.9f, 0.0f, 0.0f, true);
    check_trajectory("sgd_nesterov", mlp, opt);
  }
  SUBCASE("SGD with clipping") {
    Mlp mlp(Device::CUDA);
    optim::SGD opt(mlp.params(), 0.1f, 0.9f);
    check_trajectory("sgd_clip", mlp, opt, nullptr, 0.3f);
  }
  SUBCASE("Adam with weight decay") {
    Mlp mlp(Device::CUDA);
    optim::Adam opt(mlp.params(), 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f);
    check_trajectory("adam", mlp, opt);
  }
  SUBCASE("AdamW with groups") {
    Mlp mlp(Device::CUDA);
    optim::AdamW opt({{mlp.weights(), 0.01f, 0.1f}, {mlp.biases(), 0.02f, 0.0f}});
    check_trajectory("adamw_groups", mlp, opt);
  }
}

TEST_CASE("a CUDA optimizer saved halfway resumes like an uninterrupted run" *
          doctest::skip(!loom::cuda_available())) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("loom_test_optim_cuda_" + std::to_string(::getpid())))
                               .string();
  Mlp full(Device::CUDA), first(Device::CUDA), resumed(Device::CUDA);
  optim::AdamW full_opt(full.params(), 0.01f), first_opt(first.params(), 0.01f);
  for (int64_t k = 0; k < kGoldenSteps; ++k) train_step(full, full_opt, k);
  for (int64_t k = 0; k < 5; ++k) train_step(first, first_opt, k);
  first_opt.save(path);
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < first.params().size(); ++i) resumed.params()[i].copy_(first.params()[i]);
  }
  optim::AdamW resumed_opt(resumed.params(), 0.01f);
  resumed_opt.load(path);
  std::filesystem::remove(path);
  for (int64_t k = 5; k < kGoldenSteps; ++k) train_step(resumed, resumed_opt, k);
  for (size_t i = 0; i < full.params().size(); ++i)
    check_close(resumed.params()[i], full.params()[i], 1e-6f, 1e-7f, Mlp::names()[i]);
}
