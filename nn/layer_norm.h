// LayerNorm (Ba et al. 2016) over the last dim, with a learned gain and bias; and Residual, the
// residual stream of a transformer whose sums a LayerNorm forms in its own kernel.
#pragma once

#include <memory>
#include <utility>

#include "nn/module.h"

namespace loom::nn {

// A residual stream x (He et al. 2016) whose newest addition is formed by whoever reads it
// next: `x = x + branch` only notes the two terms, and a LayerNorm that reads x adds them in its
// own kernel as it normalises (add_layer_norm: one pass over the stream instead of two, the
// same values and gradients). So a pre-norm transformer block reads as its paper, with the
// fused kernel chosen underneath:
//   x = x + attn(ln_1(x));
//   x = x + mlp(ln_2(x));
// Copies share the sum, which is formed once; tensor() gives it to any other reader.
class Residual {
 public:
  Residual(Tensor x);  // NOLINT(google-explicit-constructor): a stream starts as a tensor
  // x + branch, both [..., T, C]. A branch [..., Tq, C] with Tq < T continues the stream's last
  // Tq positions only: the rows a layer computed when only those are wanted (GPT's last block
  // when generating). Throws naming both shapes otherwise.
  friend Residual operator+(const Residual& x, const Tensor& branch);
  // The stream's value (its pending sum formed now, once).
  const Tensor& tensor() const;

 private:
  friend class LayerNorm;
  struct Sum {
    Tensor x, branch;  // the pending terms; branch undefined once formed
    Tensor value;      // x + branch once formed
  };
  std::shared_ptr<Sum> sum_;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, float eps = 1e-5f, bool elementwise_affine = true);

  // x [..., normalized_shape] -> same shape
  Tensor forward(const Tensor& x) const;
  // The same for a residual stream: a pending sum is formed in this LayerNorm's kernel (one
  // pass), and kept in x for its other readers (the next residual add).
  Tensor forward(const Residual& x) const;
  // {h, forward(h)} with h = x + residual, from one kernel (functional::add_layer_norm): for a
  // pre-norm block, `auto [h, normed] = ln_2->add_and_forward(x, branch)`.
  std::pair<Tensor, Tensor> add_and_forward(const Tensor& x, const Tensor& residual) const;
  std::string extra_repr() const override;

  int64_t normalized_shape;
  float eps;
  Tensor weight;  // [normalized_shape], ones; undefined without elementwise_affine
  Tensor bias;    // [normalized_shape], zeros; undefined without elementwise_affine
};

}  // namespace loom::nn
