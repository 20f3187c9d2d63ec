// SGD (nesterov, dampening, weight decay), RMSprop and Adagrad update CUDA parameters as they
// update CPU ones: their updates are compositions of tensor ops, which run on the parameters'
// device. Each configuration of tests/golden/gen_optim_api.py takes 5 steps on both devices;
// the CUDA parameters match the CPU ones and PyTorch's, and a resume through the state dict
// moves the state onto the device. Without a GPU the cases return at once;
// tests/cuda/emulator/run_emulated.sh runs them on the CPU emulator.
#include "optim/optim_api_fixture.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("SGD, RMSprop and Adagrad on CUDA match the CPU and PyTorch step by step") {
  LOOM_REQUIRE_GPU();
  for (const std::string& name : api_optimizer_cases()) {
    CAPTURE(name);
    Quadratic cpu(Device::CPU), gpu(Device::CUDA);
    auto cpu_opt = make_api_optimizer(name, cpu.params);
    auto gpu_opt = make_api_optimizer(name, gpu.params);
    for (int64_t k = 1; k <= kApiSteps; ++k) {
      cpu.step(*cpu_opt);
      gpu.step(*gpu_opt);
      for (size_t i = 0; i < cpu.params.size(); ++i)
        check_close(gpu.params[i].to(Device::CPU), cpu.params[i], 1e-5f, 1e-6f,
                    name + " parameter " + std::to_string(i) + " after step " + std::to_string(k));
      gpu.check(name, k, 1e-4f, 1e-6f);
    }
  }
}

TEST_CASE("a CUDA RMSprop and Adagrad resume from a CPU state dict like an uninterrupted run") {
  LOOM_REQUIRE_GPU();
  for (const std::string name : {"rmsprop_centered", "adagrad_decay"}) {
    CAPTURE(name);
    Quadratic cpu(Device::CPU);
    auto cpu_opt = make_api_optimizer(name, cpu.params);
    for (int k = 0; k < 3; ++k) cpu.step(*cpu_opt);
    Quadratic gpu(Device::CUDA);
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      NoGradGuard no_grad;
      gpu.params[i].copy_(cpu.params[i]);
    }
    auto gpu_opt = make_api_optimizer(name, gpu.params);
    gpu_opt->load_state_dict(cpu_opt->state_dict());  // buffers copied onto the device
    gpu.step(*gpu_opt);
    gpu.step(*gpu_opt);
    gpu.check(name, 5, 1e-4f, 1e-6f);
  }
}
