// Sinusoidal and learned positional encodings.
#include "nn/positional_encoding.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/init.h"

namespace loom::nn {

namespace {

// x [B, T, d] plus rows [start, start + T) of table [max_len, d].
Tensor add_positions(const Tensor& x, const Tensor& table, int64_t start, const std::string& who) {
  const int64_t max_len = table.size(0), d = table.size(1);
  LOOM_CHECK(x.defined() && x.dim() == 3 && x.size(2) == d, "{}: expected input [B, T, {}], got {}",
             who, d, x.defined() ? shape_str(x.shape()) : "undefined");
  LOOM_CHECK(start >= 0 && start + x.size(1) <= max_len, "{}: positions [{}, {}) exceed max_len {}",
             who, start, start + x.size(1), max_len);
  return x + table.narrow(0, start, x.size(1));  // [B, T, d] + [T, d]
}

}  // namespace

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t d, int64_t len)
    : d_model(d), max_len(len) {
  LOOM_CHECK(d > 0 && d % 2 == 0 && len > 0,
             "SinusoidalPositionalEncoding: d_model {} must be positive and even, max_len {} "
             "positive",
             d, len);
  // Vaswani et al. 2017, section 3.5; 10000^(-2i/d) computed as exp(-2i ln(10000) / d).
  const Tensor position = arange_f(0.0f, static_cast<float>(len)).reshape({len, 1});  // [L, 1]
  const Tensor inv_freq =
      exp(arange_f(0.0f, static_cast<float>(d), 2.0f) *
          static_cast<float>(-std::log(10000.0) / static_cast<double>(d)));  // [d/2]
  const Tensor angle = position * inv_freq;                                  // [L, d/2]
  // Interleave: column 2i holds sin, column 2i+1 holds cos.
  const Tensor table = stack({sin(angle), cos(angle)}, -1).reshape({len, d});  // [L, d]
  pe = register_buffer("pe", table, /*persistent=*/false);
}

Tensor SinusoidalPositionalEncoding::forward(const Tensor& x, int64_t start) const {
  // x [B, T, d_model] -> [B, T, d_model]
  return add_positions(x, pe, start, "SinusoidalPositionalEncoding");
}

std::string SinusoidalPositionalEncoding::extra_repr() const {
  return fmt::format("d_model={}, max_len={}", d_model, max_len);
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t len, int64_t d)
    : max_len(len), d_model(d) {
  LOOM_CHECK(len > 0 && d > 0,
             "LearnedPositionalEmbedding: max_len {} and d_model {} must be positive", len, d);
  weight = register_parameter("weight", Tensor::empty({len, d}));
  init::normal_(weight, 0.0, 0.02);
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x, int64_t start) const {
  // x [B, T, d_model] -> [B, T, d_model]
  return add_positions(x, weight, start, "LearnedPositionalEmbedding");
}

std::string LearnedPositionalEmbedding::extra_repr() const {
  return fmt::format("{}, {}", max_len, d_model);
}

}  // namespace loom::nn
