// Fused neural-network ops: layer_norm, softmax cross-entropy and dropout. Fusing them keeps
// one pass over memory (and numerical stability) where the composite would take several.
#include "autograd/internal.h"
#include "core/rng.h"

namespace loom {

namespace {

// The backward of layer_norm as recorded ops, for a backward that builds a graph (create_graph):
// with xhat = (x - mean) rstd and dxhat = g w (Ba et al. 2016),
//   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dw = sum_rows g xhat,
//   db = sum_rows g,
// the means over the last dim. The statistics are recomputed from x in ops, so they are
// differentiated too.
std::vector<Tensor> layer_norm_grad_graph(const Tensor& g, const Tensor& x, const Tensor& w,
                                          float eps, bool need_w, bool need_b) {
  const Tensor xc = x - mean(x, -1, true);
  const Tensor rstd = rsqrt(mean(xc * xc, -1, true) + eps);
  const Tensor xhat = xc * rstd;
  const Tensor dxhat = w.defined() ? g * w : g;
  const Tensor dx = (dxhat - mean(dxhat, -1, true) - xhat * mean(dxhat * xhat, -1, true)) * rstd;
  const Shape w_shape{x.size(-1)};
  return {dx, need_w ? sum_to(g * xhat, w_shape) : Tensor(),
          need_b ? sum_to(g, w_shape) : Tensor()};
}

// The autograd node of y = layer_norm(input): the kernel's input values xc (contiguous, the
// same as input's), the affine weight w and the saved row statistics; input and weight as
// saved tensors (their place in the graph) for a backward that builds a graph.
Tensor record_layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Tensor& xc, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                         const Tensor& y, float eps) {
  const bool need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Tensor xs = detail::saved(input), ws = detail::saved(weight);
  return autograd::record("layer_norm", {input, weight, bias}, y,
                          [xc, w, mean, rstd, need_w, need_b, xs, ws, eps](const Tensor& g) {
    if (autograd::building_graph({g, xs, ws}))  // create_graph: the backward in ops
      return layer_norm_grad_graph(g, xs, ws, eps, need_w, need_b);
    Tensor dx = Tensor::empty(xc.shape(), DType::Float32, xc.device());
    Tensor dw = need_w ? Tensor::empty(w.shape(), DType::Float32, xc.device()) : Tensor();
    Tensor db = need_b ? Tensor::empty(w.shape(), DType::Float32, xc.device()) : Tensor();
    backend(xc.device()).layer_norm_backward(g.contiguous(), xc, w, mean, rstd, dx, dw, db);
    return std::vector<Tensor>{dx, dw, db};
  }, {xc, w});
}

}  // namespace

// Ba et al. 2016: y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim.
// A bfloat16 input (see ops.h) is normalised in float32 (with float32 or bfloat16 weight and
// bias) and the result rounded to bfloat16; the statistics are float32 throughout. The kernel
// checks the dtypes, devices and shapes of x, weight and bias (backends/layer_norm).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  if (detail::is_bf16(x) || detail::is_bf16(weight) || detail::is_bf16(bias)) {
    Tensor y = layer_norm(detail::upcast(x), detail::upcast(weight), detail::upcast(bias), eps);
    return detail::is_bf16(x) && !autocast::is_enabled() ? y.to(DType::BFloat16) : y;
  }
  detail::check_defined(x, "layer_norm");
  LOOM_CHECK(x.dim() >= 1, "layer_norm: input must have at least 1 dim, got shape {}",
             shape_str(x.shape()));
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(x.shape(), DType::Float32, x.device());
  Tensor mean = Tensor::empty({rows}, DType::Float32, x.device());
  Tensor rstd = Tensor::empty({rows}, DType::Float32, x.device());
  Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  backend(x.device()).layer_norm(xc, w, b, eps, y, mean, rstd);
  return record_layer_norm(x, weight, bias, xc, w, mean, rstd, y, eps);
}

// h = x + residual and layer_norm(h) from one kernel, which writes h and normalises it in the
// same pass over the rows. The graph is the unfused one: an addition node for h (so h's other
// uses, the next residual add, get their gradient as usual) and a layer_norm node reading h.
// Inputs the kernel does not take (bfloat16, shapes that broadcast) run as the two ops.
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual,
                                         const Tensor& weight, const Tensor& bias, float eps) {
  detail::check_defined(x, "add_layer_norm");
  detail::check_defined(residual, "add_layer_norm");
  // The kernel adds a bfloat16 branch in float32 as it reads it: put it second.
  if (detail::is_bf16(x) && residual.dtype() == DType::Float32)
    return add_layer_norm(residual, x, weight, bias, eps);
  const bool fused = x.dtype() == DType::Float32 &&
                     (residual.dtype() == DType::Float32 || detail::is_bf16(residual)) &&
                     x.shape() == residual.shape() && x.device() == residual.device() &&
                     x.dim() >= 1 && (!weight.defined() || weight.dtype() == DType::Float32) &&
                     (!bias.defined() || bias.dtype() == DType::Float32);
  if (!fused) {
    Tensor h = x + residual;
    return {h, layer_norm(h, weight, bias, eps)};
  }
  const int64_t cols = x.size(-1), rows = x.numel() / std::max<int64_t>(cols, 1);
  Tensor h = Tensor::empty(x.shape(), DType::Float32, x.device());
  Tensor y = Tensor::empty(x.shape(), DType::Float32, x.device());
  Tensor mean = Tensor::empty({rows}, DType::Float32, x.device());
  Tensor rstd = Tensor::empty({rows}, DType::Float32, x.device());
  Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  backend(x.device())
      .add_layer_norm(x.detach(), residual.detach(), w, b, eps, h, y, mean, rstd);
  h = autograd::record("add", {x, residual}, h,
                       [](const Tensor& g) { return std::vector<Tensor>{g, g}; });
  return {h, record_layer_norm(h, weight, bias, h.detach(), w, mean, rstd, y, eps)};
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     float label_smoothing) {
  detail::check_defined(logits, "cross_entropy");
  LOOM_CHECK(is_floating_point(logits.dtype()),
             "cross_entropy: logits must be float32 or bfloat16, got {} of shape {}",
             dtype_name(logits.dtype()), shape_str(logits.shape()));
  detail::check_defined(target, "cross_entropy");  // its dtype and device: the kernel checks
  LOOM_CHECK(logits.dim() >= 1 && target.dim() == logits.dim() - 1 &&
                 Shape(logits.shape().begin(), logits.shape().end() - 1) == target.shape(),
             "cross_entropy: logits of shape {} and target of shape {} do not match (expected "
             "logits [..., C] and target [...])",
             shape_str(logits.shape()), shape_str(target.shape()));
  LOOM_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
             "cross_entropy: label_smoothing {} outside [0, 1]", label_smoothing);
  const int64_t classes = logits.size(-1), rows = target.numel();
  // Rows of unit stride are read in place, padded ones too (an LM head's output on the GPU, see
  // Backend::cross_entropy): reshape keeps them a view; other layouts are copied once, here.
  // bfloat16 logits (an LM head under autocast) are read as they are: the log-sum-exp, the loss
  // and its mean are float32, and the gradient is rounded to bfloat16 once.
  Tensor x = logits.detach().reshape({rows, classes});
  if (x.stride(1) != 1 && classes > 1) x = x.contiguous();
  Tensor t = target.reshape({rows}).contiguous();
  Tensor losses = Tensor::empty({rows}, DType::Float32, x.device());
  Tensor lse = Tensor::empty({rows}, DType::Float32, x.device());
  backend(x.device()).cross_entropy(x, t, ignore_index, label_smoothing, losses, lse);
  // The mean runs over the targets that are not ignored (PyTorch's reduction='mean'). The
  // count stays on the device, so neither pass waits for the GPU; with every target ignored,
  // 1 / 0 = inf and the loss is 0 * inf = NaN, as PyTorch's.
  Tensor ignored = Tensor::empty({}, DType::Int64, x.device());
  backend(x.device()).fill(ignored, static_cast<double>(ignore_index));
  const Tensor inv = 1.0f / sum(ne(t, ignored));  // float32 scalar: 1 / the non-ignored count
  Tensor loss = sum(losses) * inv;
  const Shape shape = logits.shape();
  const Tensor ls = detail::saved(logits);
  loss = autograd::record("cross_entropy", {logits}, loss.detach(),
                          [x, t, lse, ignore_index, label_smoothing, inv, shape, ls,
                           ignored](const Tensor& g) {
    if (autograd::building_graph({g, ls})) {  // create_graph: the kernel's formula in ops
      // dlogits = g / count * (softmax(logits) - q) on the rows not ignored, q the target's
      // one-hot smoothed: (1 - label_smoothing) one_hot + label_smoothing / C
      const int64_t classes = x.size(1);
      const Tensor one = ones({}, x.device()), zero = zeros({}, x.device());
      const Tensor hot = where(eq(arange(classes, x.device()).unsqueeze(0), t.unsqueeze(1)),
                               one, zero);  // [N, C]
      const Tensor q =
          hot * (1.0f - label_smoothing) + label_smoothing / static_cast<float>(classes);
      const Tensor kept = where(ne(t, ignored), one, zero).unsqueeze(1);  // [N, 1]
      const Tensor p = softmax(ls.reshape({-1, classes}), -1);
      return std::vector<Tensor>{((p - q) * kept * (g * inv)).reshape(shape)};
    }
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    // dlogits = g / count * (softmax - smoothed one-hot), the factor read on the device.
    backend(x.device()).cross_entropy_backward(x, t, lse, ignore_index, label_smoothing, 1.0f,
                                               dx, (g * inv).reshape({1}));
    return std::vector<Tensor>{dx.reshape(shape)};
  }, {x, t});
  // The loss of bfloat16 logits is float32 under autocast (PyTorch's float32 list), else
  // rounded to the logits' dtype as any op on bfloat16.
  return detail::float32_op_result(logits, loss);
}

// Inverted dropout (Srivastava et al. 2014): zero each element with probability p and scale
// the survivors by 1/(1-p), so evaluation needs no rescaling.
Tensor dropout(const Tensor& x, float p, bool training) {
  if (detail::is_bf16(x) && training && p > 0.0f)
    return detail::bf16_unary(x, [&](const Tensor& xf) { return dropout(xf, p, training); });
  if (!detail::is_bf16(x)) detail::check_float(x, "dropout");
  LOOM_CHECK(p >= 0.0f && p <= 1.0f, "dropout: probability {} outside [0, 1]", p);
  if (!training || p == 0.0f) return x;
  if (p == 1.0f) return x * 0.0f;
  // x * (ge(rand(x.shape()), p) * (1 / (1 - p))), the mask drawn and applied in one pass
  // (Backend::dropout): the same uniforms, from the same counters, and the same bits.
  Tensor out = Tensor::empty(x.shape(), DType::Float32, x.device());
  Tensor mask = Tensor::empty(x.shape(), DType::Float32, x.device());
  Generator& generator = default_generator();
  backend(x.device()).dropout(x, p, generator.seed(), generator.reserve(x.numel()), out, mask);
  return autograd::record("dropout", {x}, out, [mask](const Tensor& grad) {
    return std::vector<Tensor>{grad * mask};  // d(x * mask)/dx
  });
}

}  // namespace loom
