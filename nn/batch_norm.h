// Batch normalisation (Ioffe & Szegedy 2015): per-channel normalisation with batch statistics
// in training and running statistics in evaluation.
//   BatchNorm1d  x [N, C] or [N, C, L]
//   BatchNorm2d  x [N, C, H, W]
// Names and updates as PyTorch: weight, bias, running_mean, running_var (updated with
// `momentum` and the unbiased batch variance) and num_batches_tracked (int64).
#pragma once

#include <vector>

#include "nn/module.h"

namespace loom::nn {

// What BatchNorm1d and BatchNorm2d share (PyTorch's _BatchNorm): everything but the input
// ranks they accept.
class BatchNorm : public Module {
 public:
  // x [N, C, ...] (a rank of accepted_ranks) -> same shape
  Tensor forward(const Tensor& x) const;
  std::string extra_repr() const override;

  int64_t num_features;
  float eps, momentum;
  Tensor weight, bias;               // [C], ones and zeros; undefined without affine
  Tensor running_mean, running_var;  // [C], zeros and ones; undefined without tracking
  Tensor num_batches_tracked;        // int64 scalar; undefined without tracking

 protected:
  BatchNorm(int64_t num_features, float eps, float momentum, bool affine,
            bool track_running_stats, const char* layer, std::vector<int64_t> accepted_ranks,
            const char* layout);

 private:
  std::vector<int64_t> accepted_ranks_;
  const char* layout_;  // the accepted input shapes, for error messages: "[N, C, H, W]"
};

class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, float eps = 1e-5f, float momentum = 0.1f,
                       bool affine = true, bool track_running_stats = true);
};

class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, float eps = 1e-5f, float momentum = 0.1f,
                       bool affine = true, bool track_running_stats = true);
};

}  // namespace loom::nn
