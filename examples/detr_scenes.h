// The scenes of train_detr (data/fashion_mnist_scenes.h): what the model is trained on, a
// stream of random training scenes or (--overfit-one) one fixed scene in every batch, and the
// held-out scenes it is evaluated on, those of bench/reference/train.py's detr-fmnist task.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "loom.h"

namespace loom::detr_example {

// Scenes a batch (or --dump) may hold: 128 times the default batch, 64 MB of 64x64 images; a
// scene is drawn into memory, so --batch 1000000000 is refused rather than allocated.
inline constexpr int64_t kMaxScenes = 4096;

// The training scenes: a stream of random scenes, or (`overfit_one`) one fixed scene,
// default_rng([2, seed]) with 4 items drawn, in every batch.
// One difference from the reference: training scene i (the run's i-th, over every rank) comes
// from its own stream default_rng([3, seed, i]) rather than from one sequential stream, so that
// a resumed run draws the same scenes without replaying the stream; the scenes are distributed
// identically.
struct TrainingScenes {
  std::optional<data::FashionMnistScenes> stream;
  std::optional<data::Scene> one;

  TrainingScenes(const data::FashionMNIST& train, uint64_t seed, bool overfit_one) {
    if (!overfit_one) {
      stream.emplace(train, std::numeric_limits<int64_t>::max(), seed);
      return;
    }
    std::vector<uint32_t> entropy{2};
    for (uint32_t w : data::numpy_int_words(seed)) entropy.push_back(w);
    data::NumpyPCG64 rng(entropy);
    data::SceneConfig four;
    four.min_items = four.max_items = 4;  // n forced to 4: integers(4, 5) draws nothing
    one = data::draw_scene(train, rng, four);
  }
  // Scene i: the stream's, or the one scene.
  data::Scene scene(int64_t i) const { return one ? *one : stream->scene(i); }
  // Scenes first .. first + count - 1.
  data::SceneBatch batch(int64_t first, int64_t count) const {
    if (one) return {stack({one->image}, 0), {{one->labels, one->boxes}}};
    std::vector<int64_t> indices;
    for (int64_t j = 0; j < count; ++j) indices.push_back(first + j);
    return stream->batch(indices);
  }
};

// "labels 3 7 and boxes (x0 y0 x1 y1 px) [4 9 31 40] [22 18 60 51]": what a scene holds.
inline std::string describe(const data::Scene& scene) {
  std::string text = fmt::format("labels {} and boxes (x0 y0 x1 y1 px)",
                                 fmt::join(scene.labels.to_vector_i64(), " "));
  for (const auto& b : scene.pixel_boxes)
    text += fmt::format(" [{} {} {} {}]", b[0], b[1], b[2], b[3]);
  return text;
}

// The scenes evaluated: the first `count` of the fixed held-out t10k scenes (default_rng([0,
// 0]), whatever --seed), or (--overfit-one) the one scene trained on. The test images are
// checked first either way, before the first step, not at the first evaluation: items of
// another size would be scaled otherwise than the ones the model learns from.
inline std::vector<data::Scene> evaluation_scenes(const TrainingScenes& training,
                                                  const data::FashionMNIST& train,
                                                  const data::FashionMNIST& test, int64_t count) {
  test.check_image_size(train.rows(), train.cols(), "train_detr", "of the training images");
  if (training.one) return {*training.one};
  const auto held_out = data::FashionMnistScenes::pytorch_eval(test, count);
  std::vector<data::Scene> scenes;
  for (int64_t i = 0; i < count; ++i) scenes.push_back(held_out.scene(i));
  return scenes;
}

}  // namespace loom::detr_example
