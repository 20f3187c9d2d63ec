// The CUDA parity check shared by the CUDA suites: the same computation on the CPU (the
// reference) and on CUDA must give the same value and, for a fixed random upstream gradient w,
// the same gradients of sum(out * w) (a generic w rather than all ones, so every output element
// weighs differently). Two forms: compare_op for a function of tensors, whose float inputs are
// the leaves; compare_modules for a module run on both devices with the same weights, whose
// inputs and parameters are the leaves.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace loom::testing {

namespace parity_detail {

// The leaves of one device's run, named for the messages.
using Leaves = std::vector<std::pair<std::string, Tensor>>;

// Copies of the inputs on `device`; the float32 ones require grad (the others are indices and
// masks) and become leaves "input <k>".
inline std::vector<Tensor> leaves_of(const std::vector<Tensor>& inputs, Device device,
                                     Leaves& leaves) {
  std::vector<Tensor> copies;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k].to(device).detach();
    if (device == Device::CPU) x = x.clone();  // to(CPU) of a CPU tensor is the tensor itself
    if (x.dtype() == DType::Float32) {
      x.requires_grad_(true);
      leaves.emplace_back("input " + std::to_string(k), x);
    }
    copies.push_back(x);
  }
  return copies;
}

// want (CPU) and got (CUDA) must agree in device, dtype and value; then both are
// backpropagated from the same w and every leaf the CPU gave a gradient must have the same one
// on CUDA.
inline void compare_runs(const std::string& what, const Tensor& want, const Tensor& got,
                         const Leaves& cpu, const Leaves& gpu, float rtol, float atol) {
  REQUIRE(got.device() == Device::CUDA);
  REQUIRE(got.dtype() == want.dtype());
  check_close(got, want, rtol, atol, what + ": value");
  if (!want.requires_grad()) return;
  const Tensor w = philox_tensor(want.shape(), 99);  // uniform in [-1, 1), global RNG untouched
  sum(want * w).backward();
  sum(got * w.to(Device::CUDA)).backward();
  REQUIRE(gpu.size() == cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const auto& [name, leaf] = cpu[i];
    if (!leaf.grad().defined()) continue;
    const Tensor grad = gpu[i].second.grad();
    REQUIRE_MESSAGE(grad.defined(), what << ": " << name << " got no gradient");
    CHECK(grad.device() == Device::CUDA);
    check_close(grad, leaf.grad(), rtol, atol, what + ": gradient of " + name);
  }
}

}  // namespace parity_detail

// f applied to copies of `inputs` on each device: values and gradients must agree.
using ParityFn = std::function<Tensor(const std::vector<Tensor>&)>;

inline void compare_op(const std::string& what, const ParityFn& f,
                       const std::vector<Tensor>& inputs, float rtol = 1e-4f,
                       float atol = 1e-5f) {
  INFO(what);
  parity_detail::Leaves cpu, gpu;
  const std::vector<Tensor> on_cpu = parity_detail::leaves_of(inputs, Device::CPU, cpu);
  const std::vector<Tensor> on_gpu = parity_detail::leaves_of(inputs, Device::CUDA, gpu);
  const Tensor want = f(on_cpu), got = f(on_gpu);
  parity_detail::compare_runs(what, want, got, cpu, gpu, rtol, atol);
}

// A module on the CPU and a second instance of it (gpu, any weights) that is given the CPU
// one's state_dict and moved to CUDA: forward(module, inputs) must give the same value and the
// same gradients of the inputs and of every parameter.
template <class Module, class Forward>
void compare_modules(const std::string& what, Module& cpu_module, Module& gpu_module,
                     const std::vector<Tensor>& inputs, Forward forward, float rtol = 1e-4f,
                     float atol = 1e-5f) {
  INFO(what);
  gpu_module.load_state_dict(cpu_module.state_dict());
  gpu_module.to(Device::CUDA);
  parity_detail::Leaves cpu, gpu;
  const std::vector<Tensor> on_cpu = parity_detail::leaves_of(inputs, Device::CPU, cpu);
  const std::vector<Tensor> on_gpu = parity_detail::leaves_of(inputs, Device::CUDA, gpu);
  for (const auto& [name, p] : cpu_module.named_parameters()) cpu.emplace_back(name, p);
  for (const auto& [name, p] : gpu_module.named_parameters()) gpu.emplace_back(name, p);
  const Tensor want = forward(cpu_module, on_cpu), got = forward(gpu_module, on_gpu);
  parity_detail::compare_runs(what, want, got, cpu, gpu, rtol, atol);
}

}  // namespace loom::testing
