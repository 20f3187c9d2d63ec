// Transforms of image tensors, as torchvision.transforms on tensors: callables that take a
// float image [C, H, W] (or a batch [N, C, H, W], each image with its own random draws) and
// return a new tensor, composed with Compose and attached to a dataset with TransformDataset.
//
//   namespace T = data::transforms;
//   auto train = std::make_shared<data::TransformDataset>(
//       std::make_shared<data::FashionMNIST>(dir, "train", /*normalize=*/false),
//       T::Compose({T::RandomCrop(28, /*padding=*/2), T::RandomHorizontalFlip(),
//                   T::Normalize({0.2860f}, {0.3530f})}));
//
// Randomness: RandomCrop and RandomHorizontalFlip draw from transforms::current_rng(), a
// generator of the calling thread. The DataLoader seeds it from (seed, epoch, position of the
// example in the epoch) before it reads each example, so the draws repeat under the loader's
// seed and do not depend on how many workers it has. Outside a loader, the generator of a
// thread starts from seed 0; RngScope (or the operator()(x, rng) forms) chooses the draws.
//
// The transforms compute on the host with plain loops (the DataLoader's workers run them, and
// must not run autograd ops or OpenMP kernels beside the training step); a CUDA tensor is
// copied to the host and the result back to its device. They record no autograd history.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/splitmix.h"

namespace loom::data {

namespace transforms {

// A transform: an image (or a batch of images) in, the transformed tensor out.
using Transform = std::function<Tensor(const Tensor&)>;

// The random numbers of the random transforms: SplitMix64, the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : gen_(seed) {}
  double uniform();                          // in [0, 1), 53 random bits
  int64_t randint(int64_t low, int64_t high);  // in [low, high), high > low

 private:
  SplitMix64 gen_;
};

// The calling thread's generator (what the random transforms' operator()(x) draws from).
Rng& current_rng();

// While alive, current_rng() of this thread is Rng(seed); the previous generator (and its
// position) comes back when the scope ends. The DataLoader opens one around each example.
class RngScope {
 public:
  explicit RngScope(uint64_t seed);
  ~RngScope();
  RngScope(const RngScope&) = delete;
  RngScope& operator=(const RngScope&) = delete;

 private:
  Rng saved_;
};

// Applies transforms one after another (torchvision.transforms.Compose).
class Compose {
 public:
  explicit Compose(std::vector<Transform> transforms);
  Tensor operator()(const Tensor& x) const;

 private:
  std::vector<Transform> transforms_;
};

// Integer pixels to float32 (torchvision's ToTensor / ConvertImageDtype(torch.float)):
// int64 values divided by `max_value`, by default 255, so bytes 0..255 become [0, 1] (as
// torchvision's division, bit for bit); a float32 tensor is returned unchanged. Any shape.
class ToFloat {
 public:
  explicit ToFloat(float max_value = 255.0f);
  Tensor operator()(const Tensor& x) const;

 private:
  float max_value_;
};

// (x - mean[c]) / std[c] for every channel c (torchvision.transforms.Normalize). mean and std
// hold one value per channel, or one value for all of them; every std must be nonzero.
class Normalize {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  Tensor operator()(const Tensor& x) const;

 private:
  std::vector<float> mean_, std_;
};

// torchvision.transforms.RandomCrop(size, padding, fill): pads `padding` pixels of `fill` on
// every side, then cuts size = {h, w} (or size x size) at an offset drawn uniformly from every
// position that fits (top in 0..H + 2p - h, left in 0..W + 2p - w, top drawn first). The crop
// must fit in the padded image.
class RandomCrop {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0, float fill = 0.0f);
  explicit RandomCrop(Shape size, int64_t padding = 0, float fill = 0.0f);
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Rng& rng) const;

 private:
  int64_t height_, width_, padding_;
  float fill_;
};

// torchvision.transforms.RandomHorizontalFlip(p): reverses the columns with probability p.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, Rng& rng) const;

 private:
  double p_;
};

// torchvision.transforms.Resize on tensors (bilinear, no antialiasing; the same numbers as
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False)). Resize({h, w})
// gives h x w; Resize(size) scales the shorter side to `size` and keeps the aspect ratio
// (the longer side becomes int(size * long / short), as torchvision).
class Resize {
 public:
  explicit Resize(int64_t size);
  explicit Resize(Shape size);
  Tensor operator()(const Tensor& x) const;

 private:
  Shape size_;  // {size} or {h, w}
};

}  // namespace transforms

// A dataset whose examples pass through a transform: field `field` of each example of
// `dataset` (by default 0, the image) is replaced by transform(field). Its get() runs on the
// DataLoader's workers, where the transform's random draws are seeded per example.
// (LibTorch spells this dataset.map(transform).)
class TransformDataset : public Dataset {
 public:
  TransformDataset(std::shared_ptr<const Dataset> dataset, transforms::Transform transform,
                   int64_t field = 0);
  int64_t size() const override { return dataset_->size(); }
  Example get(int64_t index) const override;
  std::vector<std::string> field_names() const override { return dataset_->field_names(); }

 private:
  std::shared_ptr<const Dataset> dataset_;
  transforms::Transform transform_;
  int64_t field_;
};

}  // namespace loom::data
