// BatchNorm2d (Ioffe & Szegedy 2015): per-channel normalisation of [N, C, H, W] with batch
// statistics in training and running statistics in evaluation. Names and updates as PyTorch:
// weight, bias, running_mean, running_var (updated with `momentum` and the unbiased batch
// variance) and num_batches_tracked (int64).
#pragma once

#include "nn/module.h"

namespace loom::nn {

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, float eps = 1e-5f, float momentum = 0.1f,
                       bool affine = true, bool track_running_stats = true);

  // x [N, C, H, W] -> same shape
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t num_features;
  float eps, momentum;
  Tensor weight, bias;               // [C], ones and zeros; undefined without affine
  Tensor running_mean, running_var;  // [C], zeros and ones; undefined without tracking
  Tensor num_batches_tracked;        // int64 scalar; undefined without tracking
};

}  // namespace loom::nn
