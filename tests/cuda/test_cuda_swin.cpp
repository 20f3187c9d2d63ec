// The Swin Transformer on CUDA against the same model on the CPU: the tiny config of
// tests/golden/gen_swin.py (a shifted stage with its mask buffer, a one-window stage and
// PatchMerging), built twice from one seed, one copy moved with Module::to(Device::CUDA).
// Logits, the input gradient and every parameter's gradient must agree; the window helpers
// and DropPath in evaluation are compared on their own too. Without a GPU every case returns
// at once (test_cuda.cpp's first case reports that once).
#include <memory>
#include <string>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;
namespace F = loom::nn::functional;

namespace {

models::SwinConfig tiny_swin_config() {
  models::SwinConfig c;
  c.image_size = 16;
  c.patch_size = 2;
  c.in_channels = 2;
  c.num_classes = 3;
  c.embed_dim = 8;
  c.depths = {2, 2};
  c.num_heads = {2, 4};
  c.window_size = 4;
  c.drop_path = 0.0f;
  return c;
}

}  // namespace

TEST_CASE("Swin's window helpers match the CPU on CUDA") {
  LOOM_REQUIRE_GPU();
  manual_seed(1);
  const Tensor x = randn({2, 8, 8, 3});
  const Tensor windows = models::window_partition(x.to(Device::CUDA), 4);
  REQUIRE(windows.device() == Device::CUDA);
  check_close(windows, models::window_partition(x, 4), 0.0f, 0.0f, "partition");
  check_close(models::window_reverse(windows, 4, 8, 8), x, 0.0f, 0.0f, "reverse");
  check_close(models::shifted_window_mask(8, 8, 4, 2, Device::CUDA),
              models::shifted_window_mask(8, 8, 4, 2), 0.0f, 0.0f, "mask");
  CHECK(models::relative_position_index(3, Device::CUDA).to_vector() ==
        models::relative_position_index(3).to_vector());
  nn::DropPath drop(0.3f);
  drop.eval();
  check_close(drop.forward(x.to(Device::CUDA)), x, 0.0f, 0.0f, "DropPath eval");
}

TEST_CASE("Swin's logits and every gradient match the CPU on CUDA") {
  LOOM_REQUIRE_GPU();
  manual_seed(7);
  models::Swin cpu(tiny_swin_config());
  manual_seed(7);
  models::Swin gpu(tiny_swin_config());
  gpu.to(Device::CUDA);
  for (const auto& [name, b] : gpu.named_buffers()) CHECK_MESSAGE(b.device() == Device::CUDA, name);
  manual_seed(3);
  const Tensor images = randn({3, 2, 16, 16});
  const Tensor targets = tensor_i64({0, 2, 1}, {3});

  Tensor x_cpu = images.detach().requires_grad_(true);
  Tensor x_gpu = images.to(Device::CUDA).detach().requires_grad_(true);
  const Tensor logits_cpu = cpu.forward(x_cpu);
  const Tensor logits_gpu = gpu.forward(x_gpu);
  REQUIRE(logits_gpu.device() == Device::CUDA);
  check_close(logits_gpu, logits_cpu, 1e-4f, 1e-5f, "logits");
  F::cross_entropy(logits_cpu, targets).backward();
  F::cross_entropy(logits_gpu, targets.to(Device::CUDA)).backward();
  check_close(x_gpu.grad(), x_cpu.grad(), 1e-3f, 1e-5f, "d/d images");
  const auto want = cpu.named_parameters(), got = gpu.named_parameters();
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE_MESSAGE(got[i].second.grad().defined(), got[i].first);
    check_close(got[i].second.grad(), want[i].second.grad(), 1e-3f, 1e-5f, "d/d " + want[i].first);
  }
}
