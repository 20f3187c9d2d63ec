// The multi-tensor optimizer kernels on CUDA against one launch per tensor and against the CPU:
// Backend::adam_step_multi over many tensors of odd sizes (more than one launch's pointer table,
// a tensor of several chunks, empty ones), optim::AdamW with decay / no-decay groups over a
// GPT-like parameter list, and clip_grad_norm's sum_of_squares_multi and scale_multi. Without a
// GPU the cases return at once (test_cuda.cpp's first case reports that once);
// tests/cuda/emulator/run_emulated.sh runs them on the CPU emulator.
#include <cmath>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// 200 tensors, more than twice the 92 of one launch's table (backends/optimizer/adam.cu,
// kAdamMultiTensors): odd sizes, empty ones, and one of three 65536-element chunks (the last of
// 5 elements: four at a time, then one alone).
std::vector<Shape> many_shapes() {
  std::vector<Shape> shapes = {{1}, {3}, {1025}, {0}, {2 * 65536 + 5}, {7, 9}, {4097}};
  for (int64_t i = 0; shapes.size() < 200; ++i) shapes.push_back({1 + (i * 37) % 300});
  return shapes;
}

}  // namespace

TEST_CASE("adam_step_multi on CUDA is adam_step per tensor bit for bit, and matches the CPU") {
  LOOM_REQUIRE_GPU();
  const std::vector<Shape> shapes = many_shapes();
  struct Config {
    bool decoupled;
    float weight_decay;
  };
  for (Config config : {Config{false, 0.1f}, Config{true, 0.1f}, Config{true, 0.0f}}) {
    CAPTURE(config.decoupled);
    CAPTURE(config.weight_decay);
    // [0]: multi on CUDA, [1]: per tensor on CUDA, [2]: multi on the CPU.
    const Device devices[3] = {Device::CUDA, Device::CUDA, Device::CPU};
    std::vector<Tensor> p[3], m[3], v[3];
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < shapes.size(); ++i) {
        // Tensor 2 ([1025]) is a view one element into its storage: not 16-byte aligned, so
        // the kernel updates it element by element instead of four at a time.
        p[k].push_back(i == 2 ? philox_tensor({1026}, 10 + i).to(devices[k]).narrow(0, 1, 1025)
                              : philox_tensor(shapes[i], 10 + i).to(devices[k]));
        m[k].push_back(zeros(shapes[i], devices[k]));
        v[k].push_back(zeros(shapes[i], devices[k]));
      }
    }
    for (int step = 1; step <= 2; ++step) {
      AdamArgs a;
      a.lr = 0.01f;
      a.weight_decay = config.weight_decay;
      a.decoupled = config.decoupled;
      a.bias1 = 1.0f - std::pow(a.beta1, static_cast<float>(step));
      a.bias2 = 1.0f - std::pow(a.beta2, static_cast<float>(step));
      std::vector<Tensor> grads[3];
      for (int k = 0; k < 3; ++k)
        for (size_t i = 0; i < shapes.size(); ++i)
          grads[k].push_back(philox_tensor(shapes[i], 1000 * step + i).to(devices[k]));
      backend(Device::CUDA).adam_step_multi(a, p[0], grads[0], m[0], v[0]);
      for (size_t i = 0; i < shapes.size(); ++i)
        backend(Device::CUDA).adam_step(a, p[1][i], grads[1][i], m[1][i], v[1][i]);
      cpu_backend().adam_step_multi(a, p[2], grads[2], m[2], v[2]);
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
      const std::string what = "tensor " + std::to_string(i) + " " + shape_str(shapes[i]);
      check_close(p[0][i], p[1][i], 0.0f, 0.0f, what + " param, multi vs per tensor");
      check_close(m[0][i], m[1][i], 0.0f, 0.0f, what + " exp_avg, multi vs per tensor");
      check_close(v[0][i], v[1][i], 0.0f, 0.0f, what + " exp_avg_sq, multi vs per tensor");
      check_close(p[0][i], p[2][i], 1e-5f, 1e-6f, what + " param, CUDA vs CPU");
      check_close(m[0][i], m[2][i], 1e-5f, 1e-6f, what + " exp_avg, CUDA vs CPU");
      check_close(v[0][i], v[2][i], 1e-5f, 1e-6f, what + " exp_avg_sq, CUDA vs CPU");
    }
  }
}

TEST_CASE("adam_step_multi on CUDA rejects a tensor of another device, naming its index") {
  LOOM_REQUIRE_GPU();
  AdamArgs a;
  std::vector<Tensor> p = {zeros({2}, Device::CUDA), zeros({3}, Device::CUDA)};
  std::vector<Tensor> g = {zeros({2}, Device::CUDA), zeros({3})};  // grad 1 on the CPU
  std::vector<Tensor> m = {zeros({2}, Device::CUDA), zeros({3}, Device::CUDA)};
  std::vector<Tensor> v = {zeros({2}, Device::CUDA), zeros({3}, Device::CUDA)};
  expect_error([&] { backend(Device::CUDA).adam_step_multi(a, p, g, m, v); },
               {"adam_step_multi", "grad is on cpu", "tensor 1 of 2"});
}

TEST_CASE("AdamW with decay / no-decay groups over 150 parameters on CUDA matches the CPU") {
  LOOM_REQUIRE_GPU();
  // GPT-2's mix: matrices (decayed) and vectors (not), in the order of a model's parameters.
  std::vector<Tensor> cpu_params, gpu_params;
  for (int64_t i = 0; i < 150; ++i) {
    const Shape shape = i % 3 == 0 ? Shape{1 + i % 7, 3 + i % 5} : Shape{1 + (i * 13) % 97};
    cpu_params.push_back(philox_tensor(shape, 500 + i).requires_grad_(true));
    gpu_params.push_back(philox_tensor(shape, 500 + i).to(Device::CUDA).requires_grad_(true));
  }
  optim::AdamW cpu_opt(optim::weight_decay_groups(cpu_params, 0.01f, 0.1f));
  optim::AdamW gpu_opt(optim::weight_decay_groups(gpu_params, 0.01f, 0.1f));
  REQUIRE(gpu_opt.param_groups().size() == 2);
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      if (step == 1 && i % 10 == 4) continue;  // a few skip the first step (no gradient)
      const Tensor g = philox_tensor(cpu_params[i].shape(), 7000 * step + i);
      cpu_params[i].set_grad(g);
      gpu_params[i].set_grad(g.to(Device::CUDA));
    }
    cpu_opt.step();
    gpu_opt.step();
  }
  for (size_t i = 0; i < cpu_params.size(); ++i)
    check_close(gpu_params[i], cpu_params[i], 1e-5f, 1e-6f, "parameter " + std::to_string(i));
}

TEST_CASE("sum_of_squares_multi, scale_multi, zero_multi on CUDA match the CPU, 450 tensors") {
  LOOM_REQUIRE_GPU();
  // More than twice the 200 tensors of one launch's table (kMultiTensors).
  std::vector<Shape> shapes = many_shapes();
  for (int64_t i = 0; shapes.size() < 450; ++i) shapes.push_back({1 + (i * 53) % 500});
  std::vector<Tensor> cpu_xs, gpu_xs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    cpu_xs.push_back(philox_tensor(shapes[i], 3000 + i));
    gpu_xs.push_back(cpu_xs.back().to(Device::CUDA));
  }
  gpu_xs[5] = gpu_xs[5].t();  // a strided input: summed through a contiguous copy
  cpu_xs[5] = cpu_xs[5].t();
  Tensor cpu_out = Tensor::empty({}, DType::Float32, Device::CPU);
  Tensor gpu_out = Tensor::empty({}, DType::Float32, Device::CUDA);
  cpu_backend().sum_of_squares_multi(cpu_xs, cpu_out);
  backend(Device::CUDA).sum_of_squares_multi(gpu_xs, gpu_out);
  CHECK(cpu_out.item() > 100.0f);
  CHECK(gpu_out.item() == doctest::Approx(cpu_out.item()).epsilon(1e-6));

  gpu_xs[5] = gpu_xs[5].t().contiguous();  // scale_multi writes contiguous tensors only
  std::vector<Tensor> want;
  for (const Tensor& x : gpu_xs) want.push_back(x.clone().mul_(0.3f));
  backend(Device::CUDA).scale_multi(gpu_xs, 0.3f);
  for (size_t i = 0; i < gpu_xs.size(); ++i)
    check_close(gpu_xs[i], want[i], 0.0f, 0.0f, "scaled tensor " + std::to_string(i));

  backend(Device::CUDA).zero_multi(gpu_xs);  // Optimizer::zero_grad(false)'s kernel
  for (size_t i = 0; i < gpu_xs.size(); ++i)
    check_close(gpu_xs[i], zeros(gpu_xs[i].shape()), 0.0f, 0.0f,
                "zeroed tensor " + std::to_string(i));
}

TEST_CASE("clip_grad_norm on CUDA gradients matches the CPU") {
  LOOM_REQUIRE_GPU();
  std::vector<Tensor> cpu_params, gpu_params;
  for (int64_t i = 0; i < 150; ++i) {
    const Shape shape = i % 3 == 0 ? Shape{1 + i % 7, 3 + i % 5} : Shape{1 + (i * 13) % 97};
    const Tensor g = philox_tensor(shape, 900 + i);
    cpu_params.push_back(zeros(shape).requires_grad_(true));
    gpu_params.push_back(zeros(shape, Device::CUDA).requires_grad_(true));
    if (i == 10) continue;  // one without a gradient
    cpu_params.back().set_grad(g);
    gpu_params.back().set_grad(g.to(Device::CUDA));
  }
  const float cpu_norm = optim::clip_grad_norm(cpu_params, 1.0f);
  const float gpu_norm = optim::clip_grad_norm(gpu_params, 1.0f);
  CHECK(cpu_norm > 1.0f);
  CHECK(gpu_norm == doctest::Approx(cpu_norm).epsilon(1e-6));
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    if (i == 10) {
      CHECK_FALSE(gpu_params[i].grad().defined());
      continue;
    }
    check_close(gpu_params[i].grad(), cpu_params[i].grad(), 1e-6f, 0.0f,
                "gradient " + std::to_string(i));
  }
}
