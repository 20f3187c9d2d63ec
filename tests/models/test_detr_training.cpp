// DETR trains: the first sanity check DETR users recommend ("overfit one image"): a tiny DETR
// drives the set loss (matching + CE + L1 + GIoU, with aux losses) near zero on one synthetic
// scene, and then predicts its boxes and classes.
#include <algorithm>
#include <cmath>

#include "models/detr.h"
#include "models/detr_loss.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// One 1x32x32 scene: a bright filled square and a hollow rectangle on a dark background.
std::pair<Tensor, models::DETRTarget> one_scene() {
  std::vector<float> pixels(32 * 32, 0.05f);
  for (int y = 4; y < 14; ++y)
    for (int x = 6; x < 16; ++x) pixels[y * 32 + x] = 1.0f;  // box (6, 4)-(16, 14)
  for (int y = 16; y < 30; ++y)
    for (int x = 12; x < 30; ++x)
      if (y == 16 || y == 29 || x == 12 || x == 29) pixels[y * 32 + x] = 0.8f;  // (12,16)-(30,30)
  const Tensor boxes = tensor({11 / 32.f, 9 / 32.f, 10 / 32.f, 10 / 32.f,       // (cx, cy, w, h)
                               21 / 32.f, 23 / 32.f, 18 / 32.f, 14 / 32.f},
                              {2, 4});
  return {tensor(pixels, {1, 1, 32, 32}), {tensor_i64({2, 0}, {2}), boxes}};
}

}  // namespace

TEST_CASE("DETR overfits one scene: the set loss goes near zero and the boxes are found") {
  // A model this small runs fastest on one thread (OpenMP's fork/join costs more than the
  // work); the caller's thread count is restored at the end.
  struct OneThread {
    int saved = get_num_threads();
    OneThread() { set_num_threads(1); }
    ~OneThread() { set_num_threads(saved); }
  } one_thread;
  manual_seed(0);
  models::DETRConfig config;
  config.num_classes = 3;
  config.backbone = "small";
  config.in_channels = 1;
  config.small_channels = {16, 32, 32};  // 32x32 -> 4x4 features
  config.hidden = 32;
  config.n_head = 2;
  config.n_encoder_layers = 1;
  config.n_decoder_layers = 2;
  config.d_ff = 64;
  config.num_queries = 4;
  config.dropout = 0.0f;
  models::DETR model(config);
  const auto [image, target] = one_scene();
  const models::DETRLossConfig loss_config{config.num_classes};
  optim::AdamW opt(model.parameters(), 2e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f);
  // The loss at a constant learning rate ends in a band (about 0.07 to 0.19 here), so the last
  // 20 steps are averaged: one step's loss would pass or fail by the luck of its batch order.
  float first = 0.0f, last = 0.0f, recent = 0.0f;
  for (int step = 0; step < 400; ++step) {
    const auto out = model.forward(image);
    Tensor loss = models::detr_loss(out.logits, out.boxes, {target}, loss_config);
    for (size_t i = 0; i < out.aux_logits.size(); ++i)
      loss = loss + models::detr_loss(out.aux_logits[i], out.aux_boxes[i], {target}, loss_config);
    loss.backward();
    optim::clip_grad_norm(model.parameters(), 0.1f);
    opt.step();
    opt.zero_grad();
    (step == 0 ? first : last) = loss.item();
    if (step >= 380) recent += last / 20.0f;
  }
  MESSAGE("overfit-one: loss " << first << " -> " << last << " (mean of the last 20 steps "
                               << recent << ")");
  CHECK(first > 5.0f);
  CHECK(recent < 0.02f * first);
  // The matched queries predict the right classes and boxes within a pixel or two.
  model.eval();
  NoGradGuard no_grad;
  const auto out = model.forward(image);
  const auto terms = models::detr_loss_terms(out.logits, out.boxes, {target}, loss_config);
  const auto& m = terms.matches[0];
  const Tensor predicted = argmax(out.logits.select(0, 0), -1);  // (Q,)
  const std::vector<int64_t> classes = predicted.to_vector_i64();
  const std::vector<float> boxes = out.boxes.select(0, 0).to_vector(),
                           truth = target.boxes.to_vector();
  const std::vector<int64_t> labels = target.labels.to_vector_i64();
  for (size_t i = 0; i < m.queries.size(); ++i) {
    CHECK(classes[m.queries[i]] == labels[m.targets[i]]);
    for (int k = 0; k < 4; ++k)
      CHECK(std::fabs(boxes[m.queries[i] * 4 + k] - truth[m.targets[i] * 4 + k]) < 2.0f / 32);
  }
  // The unmatched queries say "no object".
  int no_object = 0;
  for (int64_t c : classes) no_object += c == config.num_classes;
  CHECK(no_object == config.num_queries - 2);
}
