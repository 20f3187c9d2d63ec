// Weight initialisation, as torch.nn.init. Each function fills `tensor` in place (its storage is
// shared with every handle), draws from loom's global generator (repeatable after
// manual_seed), runs without recording autograd, and returns the tensor.
//
// The default initialisation of each layer follows PyTorch's reset_parameters():
//   Linear, Conv2d: weight kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
//                   bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
//   Embedding:      N(0, 1)
//   LayerNorm, BatchNorm2d: weight ones, bias zeros
//   MultiheadAttention: in_proj_weight xavier_uniform_, in_proj_bias and out_proj.bias zeros
#pragma once

#include <utility>

#include "core/tensor.h"

namespace loom::nn::init {

enum class FanMode { FanIn, FanOut };

// (fan_in, fan_out) of a weight: [out, in, k...] -> (in * prod(k), out * prod(k)).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor uniform_(Tensor tensor, double a = 0.0, double b = 1.0);  // U(a, b)
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0);
// N(mean, std) truncated to [a, b] (absolute bounds, as PyTorch), by the inverse-CDF method.
Tensor trunc_normal_(Tensor tensor, double mean = 0.0, double std = 1.0, double a = -2.0,
                     double b = 2.0);
Tensor constant_(Tensor tensor, double value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);
// Glorot & Bengio 2010: U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
// Glorot & Bengio 2010: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);
// He et al. 2015 for leaky_relu with negative slope a: U(-bound, bound),
// bound = sqrt(3) * sqrt(2 / (1 + a^2)) / sqrt(fan).
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn);

}  // namespace loom::nn::init
