// A ViT on CUDA against the same ViT on the CPU: logits, attention probabilities, every
// parameter gradient, and a few AdamW steps. Without a GPU the case returns at once
// (test_cuda.cpp's first case reports that once).
#include <string>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

models::ViTConfig tiny_vit() {
  models::ViTConfig c;
  c.image_size = 8, c.patch_size = 4, c.in_channels = 2, c.num_classes = 5;
  c.d_model = 16, c.n_layer = 2, c.n_head = 2, c.d_ff = 32;
  return c;
}

}  // namespace

TEST_CASE("a ViT on CUDA: logits, attention maps, every gradient and AdamW steps match the CPU") {
  LOOM_REQUIRE_GPU();
  const models::ViTConfig config = tiny_vit();
  manual_seed(3);
  const Tensor images = randn({3, 2, 8, 8});
  const Tensor labels = tensor_i64({0, 4, 2}, {3});
  manual_seed(7);
  models::ViT cpu(config);
  manual_seed(7);
  models::ViT gpu(config);
  gpu.to(Device::CUDA);
  for (auto& [name, p] : gpu.named_parameters()) CHECK_MESSAGE(p.device() == Device::CUDA, name);

  // One forward and backward: logits, every block's attention probabilities, every gradient.
  std::vector<Tensor> attn_cpu, attn_gpu;
  const Tensor logits_cpu = cpu.forward(images, &attn_cpu);
  const Tensor logits_gpu = gpu.forward(images.to(Device::CUDA), &attn_gpu);
  REQUIRE(logits_gpu.device() == Device::CUDA);
  check_close(logits_gpu, logits_cpu, 2e-4f, 2e-5f, "logits");
  REQUIRE(attn_gpu.size() == attn_cpu.size());
  for (size_t i = 0; i < attn_cpu.size(); ++i)
    check_close(attn_gpu[i], attn_cpu[i], 2e-4f, 2e-5f, "attention of block " + std::to_string(i));
  cross_entropy(logits_cpu, labels).backward();
  cross_entropy(logits_gpu, labels.to(Device::CUDA)).backward();
  const auto p_cpu = cpu.named_parameters(), p_gpu = gpu.named_parameters();
  REQUIRE(p_cpu.size() == p_gpu.size());
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    REQUIRE_MESSAGE(p_gpu[i].second.grad().defined(), p_gpu[i].first << " got no gradient");
    check_close(p_gpu[i].second.grad(), p_cpu[i].second.grad(), 1e-3f, 1e-5f,
                "grad " + p_cpu[i].first);
  }

  // Three AdamW steps on both devices from the same weights.
  optim::AdamW opt_cpu(cpu.parameters(), 1e-2f), opt_gpu(gpu.parameters(), 1e-2f);
  opt_cpu.zero_grad(), opt_gpu.zero_grad();
  float loss_cpu = 0, loss_gpu = 0;
  for (int step = 0; step < 3; ++step) {
    Tensor l1 = cross_entropy(cpu.forward(images), labels);
    Tensor l2 = cross_entropy(gpu.forward(images.to(Device::CUDA)), labels.to(Device::CUDA));
    l1.backward(), l2.backward();
    opt_cpu.step(), opt_gpu.step();
    opt_cpu.zero_grad(), opt_gpu.zero_grad();
    loss_cpu = l1.item(), loss_gpu = l2.item();
  }
  CHECK(loss_gpu == doctest::Approx(loss_cpu).epsilon(1e-4));
  const int64_t D = config.d_model;
  for (size_t i = 0; i < p_cpu.size(); ++i) {
    const std::string& name = p_cpu[i].first;
    Tensor want = p_cpu[i].second, got = p_gpu[i].second;
    if (name.ends_with("attn.qkv.bias")) {
      // The key bias [D, 2D) adds the same q.b_k to every score of a query, which softmax
      // cancels: its true gradient is 0, and Adam turns the rounding noise left in its place
      // into steps of either sign. Only the query and value biases are compared.
      want = cat({want.narrow(0, 0, D), want.narrow(0, 2 * D, D)}, 0);
      got = cat({got.narrow(0, 0, D), got.narrow(0, 2 * D, D)}, 0);
    }
    check_close(got, want, 1e-3f, 1e-5f, "after 3 AdamW steps: " + name);
  }
}
