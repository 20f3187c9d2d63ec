// DETR on CUDA against the same DETR on the CPU: outputs with a padding mask (ResNet and small
// backbones), the set loss with its matching (the matcher copies one cost matrix to the host),
// every parameter gradient, and a few AdamW steps. Without a GPU the cases return at once
// (test_cuda.cpp's first case reports that once).
#include <string>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

models::DETRConfig tiny_detr(const std::string& backbone) {
  models::DETRConfig c;
  c.num_classes = 4, c.backbone = backbone, c.hidden = 16, c.n_head = 2;
  c.n_encoder_layers = 2, c.n_decoder_layers = 2, c.d_ff = 32, c.num_queries = 5;
  c.dropout = 0.0f;
  c.in_channels = backbone == "small" ? 1 : 3;
  c.small_channels = {4, 8, 8};
  c.resnet_layers = {1, 1, 1, 1}, c.resnet_width = 2;
  return c;
}

std::vector<models::DETRTarget> targets_on(const std::vector<models::DETRTarget>& targets,
                                           Device device) {
  std::vector<models::DETRTarget> out;
  for (const auto& t : targets) out.push_back({t.labels.to(device), t.boxes.to(device)});
  return out;
}

// The set loss summed over the decoder layers (aux losses), as DETR trains.
Tensor set_loss(const models::DETROutput& out, const std::vector<models::DETRTarget>& targets,
                int64_t classes) {
  Tensor loss = models::detr_loss(out.logits, out.boxes, targets, {classes});
  for (size_t i = 0; i < out.aux_logits.size(); ++i)
    loss = loss + models::detr_loss(out.aux_logits[i], out.aux_boxes[i], targets, {classes});
  return loss;
}

}  // namespace

TEST_CASE(
    "DETR on CUDA: outputs, matching, set loss, every gradient and AdamW steps match the CPU") {
  LOOM_REQUIRE_GPU();
  for (const std::string backbone : {"small", "resnet50"}) {
    CAPTURE(backbone);
    const models::DETRConfig config = tiny_detr(backbone);
    manual_seed(3);
    const int64_t H = backbone == "small" ? 32 : 64, W = backbone == "small" ? 24 : 48;
    const Tensor images = randn({2, config.in_channels, H, W});
    const Tensor columns = arange_f(0, static_cast<float>(W)).reshape({1, 1, W}).expand({2, H, W});
    const Tensor mask = ge(columns, full({1}, W * 0.6f)).to(DType::Int64);  // right 40% padded
    const std::vector<models::DETRTarget> targets = {
        {tensor_i64({1, 3}, {2}), tensor({0.3f, 0.4f, 0.2f, 0.3f, 0.6f, 0.5f, 0.3f, 0.2f}, {2, 4})},
        {tensor_i64({0}, {1}), tensor({0.5f, 0.5f, 0.4f, 0.4f}, {1, 4})}};
    manual_seed(7);
    models::DETR cpu(config);
    manual_seed(7);
    models::DETR gpu(config);
    gpu.to(Device::CUDA);

    const auto out_cpu = cpu.forward(images, mask);
    const auto out_gpu = gpu.forward(images.to(Device::CUDA), mask.to(Device::CUDA));
    REQUIRE(out_gpu.logits.device() == Device::CUDA);
    check_close(out_gpu.logits, out_cpu.logits, 2e-4f, 2e-5f, "logits");
    check_close(out_gpu.boxes, out_cpu.boxes, 2e-4f, 2e-5f, "boxes");
    REQUIRE(out_gpu.aux_boxes.size() == out_cpu.aux_boxes.size());
    for (size_t i = 0; i < out_cpu.aux_boxes.size(); ++i)
      check_close(out_gpu.aux_boxes[i], out_cpu.aux_boxes[i], 2e-4f, 2e-5f, "aux boxes");
    const auto terms_cpu = models::detr_loss_terms(out_cpu.logits, out_cpu.boxes, targets, {4});
    const auto terms_gpu = models::detr_loss_terms(out_gpu.logits, out_gpu.boxes,
                                                   targets_on(targets, Device::CUDA), {4});
    for (size_t b = 0; b < targets.size(); ++b) {
      CHECK(terms_gpu.matches[b].queries == terms_cpu.matches[b].queries);
      CHECK(terms_gpu.matches[b].targets == terms_cpu.matches[b].targets);
    }
    set_loss(out_cpu, targets, 4).backward();
    set_loss(out_gpu, targets_on(targets, Device::CUDA), 4).backward();
    const auto p_cpu = cpu.named_parameters(), p_gpu = gpu.named_parameters();
    REQUIRE(p_cpu.size() == p_gpu.size());
    for (size_t i = 0; i < p_cpu.size(); ++i) {
      REQUIRE_MESSAGE(p_gpu[i].second.grad().defined(), p_gpu[i].first << " got no gradient");
      check_close(p_gpu[i].second.grad(), p_cpu[i].second.grad(), 1e-3f, 1e-5f,
                  "grad " + p_cpu[i].first);
    }

    // Three AdamW steps on both devices from the same weights.
    optim::AdamW opt_cpu(cpu.parameters(), 1e-3f), opt_gpu(gpu.parameters(), 1e-3f);
    opt_cpu.zero_grad(), opt_gpu.zero_grad();
    float loss_cpu = 0, loss_gpu = 0;
    for (int step = 0; step < 3; ++step) {
      Tensor l1 = set_loss(cpu.forward(images, mask), targets, 4);
      Tensor l2 = set_loss(gpu.forward(images.to(Device::CUDA), mask.to(Device::CUDA)),
                           targets_on(targets, Device::CUDA), 4);
      l1.backward(), l2.backward();
      opt_cpu.step(), opt_gpu.step();
      opt_cpu.zero_grad(), opt_gpu.zero_grad();
      loss_cpu = l1.item(), loss_gpu = l2.item();
    }
    CHECK(loss_gpu == doctest::Approx(loss_cpu).epsilon(1e-3));
  }
}
