// Multi-object Fashion-MNIST scenes for DETR (Carion et al. 2020) at toy scale: the "detr-fmnist"
// scenes of bench/reference/train.py, drawn bit for bit as PyTorch draws them.
//
//   canvas 64 x 64, one channel, zeros       n items, n uniform in {1, 2, 3, 4}
//   item: image k uniform over the split, pixels uint8 / 255 (no other normalisation)
//         scale s uniform in [0.6, 1.4), side = floor(28 s + 0.5)  (17..39 px)
//         resized to side x side as F.interpolate(bilinear, align_corners=False, antialias=False)
//         box = tight extent of the resized pixels > 0.1 (pixel-edge coordinates x0 y0 x1 y1)
//         up to 50 positions (px, then py, uniform in [0, 64 - side]): the first whose box has
//         IoU <= 0.3 with every box already placed is taken and the item max-pasted there;
//         an item with no such position is dropped
//   target per item, in placement order: label = its class; box = normalised (cx, cy, w, h)
//
// Random numbers: numpy's default_rng (SeedSequence -> PCG64, Generator.integers with Lemire's
// bounded draws on buffered 32-bit halves, Generator.uniform = low + (high - low) * (u64 >> 11)
// * 2^-53) is reproduced exactly by NumpyPCG64, and the resize matches PyTorch 1.13's CPU kernel
// bit for bit (float32 weights from a double source index, the four products summed in double),
// so loom's scenes equal bench/reference/train.py's, pixels included (tests/data/
// test_fashion_mnist_scenes.cpp checks all 1000 evaluation scenes against fixtures written by
// tests/golden/gen_metrics.py with bench/reference/train.py's own make_scene).
//
// Two ways to draw:
//   - per scene (the constructor): scene i draws from default_rng([3, seed_lo, seed_hi, i_lo,
//     i_hi]) (the 32-bit halves of seed and i), so a scene is a pure function of (seed, index):
//     any order, any subset, exact resume;
//   - sequential (pytorch_eval / pytorch_train): one stream default_rng([stream, seed]) drawn
//     scene after scene, as bench/reference/train.py does: evaluation = default_rng([0, 0]) on t10k
//     (whatever --seed), training = default_rng([1, seed]) on train. The constructor runs the
//     stream once through `count` scenes and keeps the generator state at the start of each, so
//     scene(i) is again computed on demand, in any order.
// Scenes are computed from the split's raw bytes (FashionMNIST::pixels()), whatever its normalize
// flag. The split must outlive the scenes (a pointer to it is kept).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/fashion_mnist.h"

namespace loom::data {

// numpy.random.default_rng(entropy) for the draws the scenes use, bit for bit (numpy 1.17+).
// `entropy` is the uint32 array numpy's SeedSequence assembles from the seed: each Python int of
// a seed list gives its 32-bit words, low first (0 gives one word 0): numpy_int_words.
class NumpyPCG64 {
 public:
  explicit NumpyPCG64(const std::vector<uint32_t>& entropy);
  uint64_t next_uint64();
  uint32_t next_uint32();  // the low half of a 64-bit draw, then its high half
  double next_double();    // (next_uint64() >> 11) * 2^-53
  // Generator.integers(low, high): uniform in [low, high); needs 1 <= high - low <= 2^32 - 1.
  int64_t integers(int64_t low, int64_t high);
  // Generator.uniform(low, high): low + (high - low) * next_double().
  double uniform(double low, double high);

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};
std::vector<uint32_t> numpy_int_words(uint64_t value);

struct SceneConfig {
  int64_t canvas = 64;                   // side of the square canvas
  int64_t min_items = 1, max_items = 4;  // n uniform in [min_items, max_items]
  double min_scale = 0.6, max_scale = 1.4;
  int64_t max_attempts = 50;             // positions tried per item
  double max_iou = 0.3;                  // a position is rejected above this IoU
  float visible_threshold = 0.1f;        // pixels above it make the box
};

struct Scene {
  Tensor image;   // float [1, canvas, canvas], values in [0, 1]
  Tensor labels;  // int64 [n], placement order
  Tensor boxes;   // float [n, 4], normalised (cx, cy, w, h)
  std::vector<std::array<int64_t, 4>> pixel_boxes;  // (x0, y0, x1, y1), pixel edges
  std::vector<int64_t> sources;                     // each item's index in the split
};

// A batch for detr_loss: images [B, 1, canvas, canvas] and one target per image.
struct SceneTarget {
  Tensor labels;  // int64 [n]
  Tensor boxes;   // float [n, 4] normalised (cx, cy, w, h)
};
struct SceneBatch {
  Tensor images;
  std::vector<SceneTarget> targets;
};

class FashionMnistScenes {
 public:
  // `count` scenes, scene i drawn from its own stream default_rng([3, seed halves, i halves]).
  FashionMnistScenes(const FashionMNIST& split, int64_t count, uint64_t seed,
                     const SceneConfig& config = SceneConfig{});
  // bench/reference/train.py's evaluation scenes: default_rng([0, 0]) on the t10k split, in order.
  static FashionMnistScenes pytorch_eval(const FashionMNIST& t10k, int64_t count = 1000);
  // bench/reference/train.py's training stream for --seed: default_rng([1, seed]) on train,
  // in order.
  static FashionMnistScenes pytorch_train(const FashionMNIST& train, int64_t count, uint64_t seed);

  int64_t size() const { return count_; }
  const SceneConfig& config() const { return config_; }
  Scene scene(int64_t index) const;
  SceneBatch batch(const std::vector<int64_t>& indices) const;

 private:
  FashionMnistScenes(const FashionMNIST& split, int64_t count, const SceneConfig& config);
  NumpyPCG64 generator(int64_t index) const;

  const FashionMNIST* split_;
  int64_t count_;
  uint64_t seed_ = 0;
  SceneConfig config_;
  std::vector<NumpyPCG64> starts_;  // sequential streams: the state at the start of each scene
};

// Draws one scene from `rng` (the draws of bench/reference/train.py's make_scene, in its order).
Scene draw_scene(const FashionMNIST& split, NumpyPCG64& rng, const SceneConfig& config = {});

// PyTorch 1.13's F.interpolate(size=(side, side), mode="bilinear", align_corners=False,
// antialias=False) of one square float image src [n, n] (row-major) -> [side, side], bit for bit.
std::vector<float> resize_bilinear(const float* src, int64_t n, int64_t side);

// What a detector predicted for one scene, drawn over it by write_scene_png: boxes float [q, 4]
// normalised (cx, cy, w, h), labels int64 [q], scores float [q]; predictions scoring below
// min_score are not drawn. Default-constructed: nothing drawn.
struct SceneDetections {
  Tensor boxes, labels, scores;
  float min_score = 0.0f;
};
// The scene scaled `scale` times (nearest), ground truth boxes in green with their class names,
// predictions in orange with class name and score, written as PNG (atomically).
void write_scene_png(const std::string& path, const Scene& scene,
                     const SceneDetections& detections = SceneDetections{}, int64_t scale = 4);

}  // namespace loom::data
