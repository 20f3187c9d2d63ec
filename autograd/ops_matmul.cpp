// matmul with torch.matmul semantics. Every product is one or more cblas/cuBLAS GEMM calls;
// transposed views are handed to the backend as transpose flags instead of being copied.
#include <algorithm>
#include <numeric>
#include <optional>

#include "autograd/internal.h"
#include "autograd/packed_weights.h"

namespace loom {

namespace {

// How the backend should read one [rows, cols] matrix of a (possibly strided) view.
struct MatrixLayout {
  bool trans = false;
  int64_t ld = 0;
};

// Returns false if the last two dims cannot be described to BLAS without a copy.
bool blas_layout(const Tensor& t, MatrixLayout& layout) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.stride(-2), cs = t.stride(-1);
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1))) {
    layout = {false, rows <= 1 ? std::max<int64_t>(cols, 1) : rs};
    return true;
  }
  if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1))) {
    layout = {true, cols <= 1 ? std::max<int64_t>(rows, 1) : cs};
    return true;
  }
  return false;
}

// Element offsets of each batch item of a view whose leading dims are the batch dims.
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t batch) {
  std::vector<int64_t> offsets(batch);
  const int64_t nb = t.dim() - 2;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rem = b, off = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      off += (rem % t.shape()[d]) * t.strides()[d];
      rem /= t.shape()[d];
    }
    offsets[b] = off;
  }
  return offsets;
}

// Uniform stride of the offsets if there is one (so one strided-batched call suffices).
bool uniform_stride(const std::vector<int64_t>& offsets, int64_t& stride) {
  stride = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != stride) return false;
  return true;
}

// Whether the offsets of items i = o * group + j are o * group_stride + j * stride (the heads
// of a (B, T, nh, hs) view, group nh); sets the two strides.
bool in_groups(const std::vector<int64_t>& offsets, int64_t group, int64_t& stride,
               int64_t& group_stride) {
  const auto count = static_cast<int64_t>(offsets.size());
  stride = offsets[1] - offsets[0];
  group_stride = offsets[group] - offsets[0];
  for (int64_t i = 0; i < count; ++i)
    if (offsets[i] - offsets[0] != i / group * group_stride + i % group * stride) return false;
  return true;
}

// Whether a batch of `batch` items lies in groups of `group` (the last batch dim) for A, B and C
// (C contiguous when off_c is empty) and the CPU's kernel takes it so (cpu::gemm_takes_groups);
// then args holds the strides and the group (GemmArgs::group), else args' group stays 0.
bool grouped_args(GemmArgs& args, int64_t group, int64_t batch,
                  const std::vector<int64_t>& off_a, const std::vector<int64_t>& off_b,
                  const std::vector<int64_t>& off_c) {
  if (group < 2 || batch <= group) return false;
  if (!in_groups(off_a, group, args.stride_a, args.group_stride_a) ||
      !in_groups(off_b, group, args.stride_b, args.group_stride_b))
    return false;
  if (off_c.empty())
    args.stride_c = args.m * args.n, args.group_stride_c = group * args.m * args.n;
  else if (!in_groups(off_c, group, args.stride_c, args.group_stride_c))
    return false;
  args.group = group;
  if (!cpu::gemm_takes_groups(args)) args.group = 0;
  return args.group > 0;
}

// C = A @ B for A [..., M, K], B [..., K, N] (both >= 2-D, batch dims broadcast). No autograd.
// With `init` (C's shape: contiguous, one matrix whose rows are padded, row stride >= N, or any
// other layout of whole rows, such as heads interleaved as a projection's (B, T, nh, hs) viewed
// as (B, nh, T, hs)) the product is written into it and it is returned: C = beta * init + A @ B
// (beta 1: added to it, as a GEMM from a bias; 0: init is only the memory to write). A and B
// have one dtype, float32 or bfloat16 (products accumulated in float32 either way); C has init's
// dtype, else `out_type`, else A's. `bias` (float32 [N], or undefined) is added to every row
// (GemmArgs::bias): the GEMM starts from it, so no copy of it is made first; then `activation`
// (GemmArgs::activation). `alpha` scales the product: C = alpha * A @ B (+ beta * init + bias).
Tensor gemm_forward(Tensor a, Tensor b, const Tensor& init = Tensor(),
                    std::optional<DType> out_type = std::nullopt, float beta = 1.0f,
                    const Tensor& bias = Tensor(),
                    std::optional<UnaryOp> activation = std::nullopt, float alpha = 1.0f) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const Shape batch_a(a.shape().begin(), a.shape().end() - 2);
  const Shape batch_b(b.shape().begin(), b.shape().end() - 2);
  Shape batch_shape = broadcast_shapes(batch_a, batch_b, "matmul");
  const int64_t batch = shape_numel(batch_shape);
  Shape out_shape = batch_shape;
  out_shape.push_back(m);
  out_shape.push_back(n);
  const DType c_type = init.defined() ? init.dtype() : out_type.value_or(a.dtype());
  Tensor c = init.defined() ? init : Tensor::empty(out_shape, c_type, a.device());
  if (c.numel() == 0) return c;
  if (k == 0) {  // an empty sum adds nothing: C is init (or zeros), plus the bias
    if (!init.defined() || beta == 0.0f) backend(c.device()).fill(c, 0.0);
    if (bias.defined()) c.copy_(c + bias);
    if (activation) c.copy_(detail::activation(*activation, c, Tensor()));
    return c;
  }
  Shape full_a = batch_shape, full_b = batch_shape;
  full_a.insert(full_a.end(), {m, k});
  full_b.insert(full_b.end(), {k, n});
  // A padded-row C (one matrix) is written through its row stride. C in another layout of whole
  // rows (heads interleaved, as a projection's) is written in groups of its last batch dim where
  // the CPU's tiles take them; otherwise the product goes to a contiguous C, copied in.
  const bool padded_rows = c.dim() == 2 && c.stride(1) == 1 && c.stride(0) > n;
  const bool c_laid_out = !c.is_contiguous() && !padded_rows;
  const auto via_contiguous = [&] {
    c.copy_(gemm_forward(a, b, beta == 0.0f ? Tensor() : init.contiguous(), c_type, beta, bias,
                         activation, alpha));
    return c;
  };
  if (c_laid_out && (c.dim() < 3 || c.stride(-1) != 1 || c.stride(-2) < n))
    return via_contiguous();
  MatrixLayout la, lb;
  if (!blas_layout(a, la)) a = a.contiguous(), blas_layout(a, la);
  if (!blas_layout(b, lb)) b = b.contiguous(), blas_layout(b, lb);
  Tensor av = detail::broadcast_view(a, full_a), bv = detail::broadcast_view(b, full_b);
  std::vector<int64_t> off_a = batch_offsets(av, batch), off_b = batch_offsets(bv, batch);
  GemmArgs args;
  args.trans_a = la.trans;
  args.trans_b = lb.trans;
  args.m = m, args.n = n, args.k = k;
  args.lda = la.ld, args.ldb = lb.ld;
  args.ldc = padded_rows || c_laid_out ? c.stride(-2) : n;
  args.alpha = alpha;
  args.beta = init.defined() ? beta : 0.0f;
  args.ab_type = a.dtype(), args.c_type = c_type;
  const Tensor bias_row = bias.defined() ? bias.contiguous() : Tensor();  // [N] float32
  if (bias_row.defined()) args.bias = bias_row.data_ptr<float>();
  args.activation = activation;
  int64_t sa = 0, sb = 0;
  const bool uniform = uniform_stride(off_a, sa) && uniform_stride(off_b, sb);
  // Heads split out of a (B, T, nh, hs) view (items b*T*C + h*hs) are not evenly spaced, but
  // their items lie in groups of the last batch dim, two strides each: the CPU's kernel reads
  // them where they lie (GemmArgs::group). Elsewhere such an operand is copied into a contiguous
  // layout, cheaper than B*nh small calls; only broadcast batch dims (stride 0, no copy wanted)
  // still fall back to the per-item loop below.
  const std::vector<int64_t> off_c = c_laid_out ? batch_offsets(c, batch) : std::vector<int64_t>{};
  const int64_t group = batch_shape.empty() ? 0 : batch_shape.back();
  if ((!uniform || c_laid_out) && c.device() == Device::CPU &&
      grouped_args(args, group, batch, off_a, off_b, off_c)) {
    args.batch = batch;
    args.a = static_cast<const char*>(av.raw_data()) + off_a[0] * element_size(a.dtype());
    args.b = static_cast<const char*>(bv.raw_data()) + off_b[0] * element_size(b.dtype());
    args.c = static_cast<char*>(c.raw_data()) + (c_laid_out ? off_c[0] : 0) * element_size(c_type);
    backend(c.device()).gemm(args);
    return c;
  }
  if (c_laid_out) return via_contiguous();
  args.stride_c = m * n;
  if (!uniform_stride(off_a, sa) && a.dim() > 2 && !a.is_contiguous()) {
    a = a.contiguous(), blas_layout(a, la);
    av = detail::broadcast_view(a, full_a), off_a = batch_offsets(av, batch);
    args.trans_a = la.trans, args.lda = la.ld;
  }
  if (!uniform_stride(off_b, sb) && b.dim() > 2 && !b.is_contiguous()) {
    b = b.contiguous(), blas_layout(b, lb);
    bv = detail::broadcast_view(b, full_b), off_b = batch_offsets(bv, batch);
    args.trans_b = lb.trans, args.ldb = lb.ld;
  }
  // Element offsets become byte addresses: the operands' elements are 4 or 2 bytes.
  const auto* pa = static_cast<const char*>(av.raw_data());
  const auto* pb = static_cast<const char*>(bv.raw_data());
  auto* pc = static_cast<char*>(c.raw_data());
  const int64_t ab_size = element_size(a.dtype()), c_size = element_size(c_type);
  if (uniform_stride(off_a, sa) && uniform_stride(off_b, sb)) {
    args.batch = batch;
    args.a = pa + off_a[0] * ab_size, args.stride_a = sa;
    args.b = pb + off_b[0] * ab_size, args.stride_b = sb;
    args.c = pc;
    backend(c.device()).gemm(args);
  } else {  // irregular batch layout: one GEMM per item
    args.batch = 1;
    for (int64_t i = 0; i < batch; ++i) {
      args.a = pa + off_a[i] * ab_size;
      args.b = pb + off_b[i] * ab_size;
      args.c = pc + i * m * n * c_size;
      backend(c.device()).gemm(args);
    }
  }
  return c;
}

// y [rows, out] = x [rows, in] W^T + bias, then the activation, with W^T in the panels
// [panels, in, width] that a PackedWeightsGuard keeps (GemmArgs::b_panel): float32, on the CPU.
Tensor gemm_by_panels(Tensor x, const Tensor& panels, int64_t out, const Tensor& bias,
                      std::optional<UnaryOp> activation) {
  if (x.stride(1) != 1 || x.stride(0) < x.size(1)) x = x.contiguous();
  const int64_t rows = x.size(0);
  Tensor y = Tensor::empty({rows, out}, DType::Float32, x.device());
  GemmArgs args;
  args.m = rows, args.n = out, args.k = x.size(1);
  args.a = x.data_ptr<float>(), args.lda = x.stride(0);
  args.b = panels.data_ptr<float>(), args.ldb = panels.stride(0), args.b_panel = panels.size(2);
  args.c = y.data_ptr<float>(), args.ldc = out;
  const Tensor bias_row = bias.defined() ? bias.contiguous() : Tensor();
  if (bias_row.defined()) args.bias = bias_row.data_ptr<float>();
  args.activation = activation;
  backend(y.device()).gemm(args);
  return y;
}

// x [rows, in] @ W^T [in, out] (W a Linear's weight [out, in]) and, from the same product, act =
// op(x W^T + bias) [rows, out] (GemmArgs::activation_out): a Linear and its activation in a
// training step on the CPU, which keeps both values (the backward reads the product). The
// activation is written as each band of the product's rows is finished, while it is in the
// cache, instead of in a pass of its own that reads the product back: the same bits.
Tensor product_and_activation(Tensor x, Tensor w, const Tensor& bias, UnaryOp op, Tensor& act) {
  if (x.stride(1) != 1 || x.stride(0) < x.size(1)) x = x.contiguous();
  if (w.stride(1) != 1 || w.stride(0) < w.size(1)) w = w.contiguous();
  const int64_t rows = x.size(0), out = w.size(0);
  Tensor y = Tensor::empty({rows, out}, DType::Float32, x.device());
  act = Tensor::empty({rows, out}, DType::Float32, x.device());
  const Tensor bias_row = bias.contiguous();  // [out] float32
  GemmArgs args;
  args.trans_b = true;
  args.m = rows, args.n = out, args.k = x.size(1);
  args.a = x.data_ptr<float>(), args.lda = x.stride(0);
  args.b = w.data_ptr<float>(), args.ldb = w.stride(0);
  args.c = y.data_ptr<float>(), args.ldc = out;
  args.activation = op;
  args.activation_out = act.data_ptr<float>(), args.ld_activation_out = out;
  args.activation_bias = bias_row.data_ptr<float>();
  backend(y.device()).gemm(args);
  return y;
}

// Whether t's matrices are stored transposed (column-major: a transposed view of a contiguous
// tensor), the layout blas_layout reads with a transpose flag.
bool stored_transposed(const Tensor& t) {
  return t.dim() >= 2 && t.size(-2) > 1 && t.size(-1) > 1 && t.stride(-2) == 1 &&
         t.stride(-1) != 1;
}

// The shape an operand of the product c would have without broadcasting: c's batch dims and the
// operand's own matrix dims. Equal to the operand's shape when its gradient needs no sum.
Shape batch_like(const Tensor& operand, const Tensor& c) {
  Shape shape(c.shape().begin(), c.shape().end() - 2);
  shape.push_back(operand.size(-2));
  shape.push_back(operand.size(-1));
  return shape;
}

// Whether t, a float32 CPU tensor of >= 2 batch dims, has whole rows but batch items in no one
// stride: heads interleaved, as a (B, T, nh, hs) projection's viewed as (B, nh, T, hs).
bool heads_interleaved(const Tensor& t) {
  return t.device() == Device::CPU && t.dtype() == DType::Float32 && t.dim() >= 4 &&
         t.stride(-1) == 1 && !t.is_contiguous() && !stored_transposed(t);
}

// An empty tensor of `shape` (t's when not given; t's rank) whose memory follows t's, its dims
// nested in the order of t's strides (torch's preserve_format): for interleaved heads, the
// gradient is interleaved too, and the view that made the heads takes it back without a copy.
// Undefined (contiguous, the default) for any other t.
Tensor laid_out_as(const Tensor& t, Shape shape_of = {}) {
  if (!heads_interleaved(t)) return Tensor();
  if (shape_of.empty()) shape_of = t.shape();
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return t.stride(x) > t.stride(y); });
  Shape shape;
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    shape.push_back(shape_of[static_cast<size_t>(order[i])]);
    back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  }
  return Tensor::empty(shape, t.dtype(), t.device()).permute(back);
}

// The differentiable product alpha * a @ b of two >= 2-D tensors; the result in `out_type`
// (default: the operands' dtype), written into `into` when given (C's shape, any layout
// gemm_forward writes); the operands' gradients where grad_into says (detail::GradientInto).
Tensor matmul_nd(const Tensor& a, const Tensor& b, std::optional<DType> out_type = std::nullopt,
                 const Tensor& into = Tensor(), float alpha = 1.0f,
                 const detail::GradientInto& grad_into = {}) {
  // [..., M, K] @ [K, N]: fold the batch into the rows, one large GEMM instead of many.
  if (b.dim() == 2 && a.dim() > 2 && !into.defined()) {
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(b.size(1));
    return matmul_nd(a.reshape({-1, a.size(-1)}), b, out_type, Tensor(), alpha).reshape(out_shape);
  }
  // A product whose B has heads interleaved (P V in attention over a projection's values) is
  // written interleaved as B is: the heads' merge that follows, y.transpose(1, 2).reshape(B, T,
  // C), is then a view instead of a copy.
  Tensor c_into = into;
  if (!c_into.defined() && !out_type && a.is_contiguous() && a.dim() == b.dim() &&
      std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin())) {
    Shape shape = a.shape();
    shape.back() = b.size(-1);
    c_into = laid_out_as(b, shape);
  }
  Tensor c = gemm_forward(a.detach(), b.detach(), c_into, out_type, 0.0f, Tensor(), std::nullopt,
                          alpha);
  if (!autograd::any_requires_grad({a, b})) return c;
  Tensor as = detail::saved(a), bs = detail::saved(b);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // dA = alpha dC @ B^T,  dB = alpha A^T @ dC  (summed over broadcast batch dims). Each operand
  // gets its gradient in its own layout, so that the views it came from hand the gradient back
  // without a copy. One stored transposed (k.transpose(-2, -1) in attention's scores): dB =
  // alpha (dC^T @ A)^T, the same sums, written as B's memory lies; it used to be copied element
  // by element, across rows, into the layout of what B was viewed from. Heads interleaved (a
  // projection's): the gradient interleaved too (laid_out_as), where it used to be copied from
  // contiguous heads. Given a place (grad_into: q, k and v's gradients side by side in one
  // buffer, detail::SharedGradient), an operand's gradient is written there.
  const bool a_own = as.shape() == batch_like(as, c), b_own = bs.shape() == batch_like(bs, c);
  const bool a_transposed = a_own && stored_transposed(as);
  const bool b_transposed = b_own && stored_transposed(bs);
  return autograd::record("matmul", {a, b}, c,
                          [as, bs, need_a, need_b, a_own, b_own, a_transposed, b_transposed,
                           alpha, grad_into](const Tensor& grad) {
    const Tensor g = grad.to(as.dtype());  // the operands' dtype (bfloat16 products stay so)
    const Tensor gt = g.transpose(-1, -2);
    const std::nullopt_t same_type = std::nullopt;
    // Where the gradient of operand t goes (seen transposed when t is stored transposed): its
    // given place, else a new tensor laid out as t.
    const auto place = [](const std::function<Tensor()>& given, const Tensor& t, bool transposed) {
      const Tensor p = given ? given() : Tensor();
      if (!p.defined() || p.shape() != t.shape())
        return laid_out_as(transposed ? t.transpose(-1, -2) : t);
      return transposed ? p.transpose(-1, -2) : p;
    };
    Tensor ga, gb;
    if (need_a && a_transposed)
      ga = matmul_nd(bs, gt, same_type, place(grad_into.a, as, true), alpha).transpose(-1, -2);
    else if (need_a)
      ga = sum_to(matmul_nd(g, bs.transpose(-1, -2), same_type,
                            a_own ? place(grad_into.a, as, false) : Tensor(), alpha),
                  as.shape());
    if (need_b && b_transposed)
      gb = matmul_nd(gt, as, same_type, place(grad_into.b, bs, true), alpha).transpose(-1, -2);
    else if (need_b)
      gb = sum_to(matmul_nd(as.transpose(-1, -2), g, same_type,
                            b_own ? place(grad_into.b, bs, false) : Tensor(), alpha),
                  bs.shape());
    return std::vector<Tensor>{ga, gb};
  }, {as, bs});
}

// cuBLAS picks its fast tensor-core kernels only when every matrix's contiguous extent and row
// stride are multiples of 8 elements; a GPT's LM head has out = 50,257 (the vocabulary), and its
// three products (the logits and the two gradients) then run in kernels several times slower.
// So on the GPU a large Linear whose `out` is not a multiple of 64 runs all three on operands
// padded with zeros to the next multiple of 64 (llm.c pads GPT-2's vocabulary to 50,304 the
// same way): the weight's copy gets zero rows, the result and its gradient live in
// [rows, padded] buffers, and y is the [rows, out] view; the zeros change no sum. Reshaped to
// [..., out] (and back to [rows, out] for the loss) y stays a view, and cross_entropy reads its
// padded rows in place: the logits are never copied to close the gaps.
constexpr int64_t kPadMultiple = 64;
int64_t padded_width(int64_t width) {
  return (width + kPadMultiple - 1) / kPadMultiple * kPadMultiple;
}
bool pad_out_for_gpu(const Tensor& like, int64_t rows, int64_t out) {
  return like.device() == Device::CUDA && out % kPadMultiple != 0 && rows > 1 &&
         rows * out >= (int64_t{1} << 20);
}
// `t` (2-D, any dtype) as `type` at the start of a buffer whose size along `dim` is padded to
// padded_width, the rest of it zero.
Tensor pad_with_zeros(const Tensor& t, int64_t dim, DType type) {
  Shape shape = t.shape();
  const int64_t size = shape[dim];
  shape[dim] = padded_width(size);
  Tensor buffer = Tensor::empty(shape, type, t.device());
  buffer.narrow(dim, 0, size).copy_(t);
  buffer.narrow(dim, size, shape[dim] - size).zero_();
  return buffer;
}

// y = x W^T + b as one GEMM that starts from the bias. Without `low`, x, weight, the bias and y
// are float32. With `low` (autocast) x and weight are any floating dtype: the op casts them, and
// the bias, to `low` itself, outside autograd; the GEMM accumulates in float32 from the bias and
// rounds y to `low` once (PyTorch's autocast addmm; cuBLAS's bfloat16 GEMM rounds the product
// before it adds the bias, and rounds again: seen on an H200). It records ONE node whose inputs are
// x, weight and bias as given: it saves the low-precision copies for its backward, whose two GEMMs
// write dx and dW in x's and weight's own dtype (float32 for float32 master weights) straight
// from their float32 accumulators, and db is summed in float32: no cast nodes, and no gradient
// of a parameter rounded to bfloat16 and cast back.
// An activation that linear_gemm's product writes too (product_and_activation): `out` gets
// op(x W^T + bias), [..., out] as the product, where the product can (a float32 product on the
// CPU, not in panels), else stays undefined.
struct ActivationOfProduct {
  UnaryOp op;
  Tensor bias;
  Tensor out;
};

Tensor linear_gemm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                   std::optional<DType> low = std::nullopt,
                   std::optional<UnaryOp> activation = std::nullopt,
                   ActivationOfProduct* also = nullptr) {
  // x [..., in] @ weight[out, in]^T (+ bias [out]) -> [..., out]
  detail::check_same_device(x, weight, "linear");
  LOOM_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1),
             "linear: input of shape {} does not match weight of shape {} (expected input "
             "[..., {}])",
             shape_str(x.shape()), shape_str(weight.shape()),
             weight.dim() == 2 ? weight.size(1) : -1);
  const int64_t in = weight.size(1), out = weight.size(0);
  if (bias.defined()) {
    detail::check_float(bias, "linear");
    detail::check_same_device(x, bias, "linear");
    LOOM_CHECK(bias.shape() == Shape{out},
               "linear: bias of shape {} does not match weight of shape {}",
               shape_str(bias.shape()), shape_str(weight.shape()));
  }
  Shape out_shape = x.shape();
  out_shape.back() = out;
  // Every leading position is a row: [rows, in] (a 2-D x is used as it is: no view node, and a
  // strided one is read by the GEMM through its strides).
  const Tensor x2 = x.dim() == 2 ? x : x.reshape({-1, in});
  const int64_t rows = x2.size(0);
  // The GEMM's operands: under autocast the low-precision copies (detached: no cast nodes); a
  // weight with padded rows when `out` is (see pad_out_for_gpu).
  const bool pad = pad_out_for_gpu(x, rows, out);
  const int64_t out_p = pad ? padded_width(out) : out;
  // x_graph is the same with x's place in the graph (under autocast a recorded cast), saved
  // for a backward that builds a graph.
  const Tensor x_graph = low ? x2.to(*low) : x2;
  const Tensor xa = x_graph.detach();  // [rows, in]
  const DType w_low = low ? *low : weight.dtype();
  const Tensor wa = pad ? pad_with_zeros(weight.detach(), 0, w_low)  // [out_p, in]
                        : low ? weight.detach().to(*low) : weight.detach();
  // W^T [in, out_p] as the product reads it: a transposed view of W, or inside a
  // PackedWeightsGuard (decoding) a parameter's W^T in panels, made once for all the guard's
  // calls rather than copied in blocks by the product on every call (autograd/packed_weights.h).
  const Tensor panels = pad || low ? Tensor() : detail::packed_weight(weight, rows);
  const Tensor wt = wa.t();
  // The GEMM starts from the bias, as torch's addmm: no second pass over the output to add it,
  // and no pass of the BLAS zeroing the output first.
  const DType y_type = low ? *low : DType::Float32;
  Tensor y;
  if (pad) {  // [rows, out] inside a [rows, out_p] buffer
    Tensor y_p = Tensor::empty({rows, out_p}, y_type, x.device());
    if (bias.defined()) y_p = pad_with_zeros(bias.detach().expand({rows, out}), 1, y_type);
    y = gemm_forward(xa, wt, y_p, y_type, bias.defined() ? 1.0f : 0.0f, Tensor(), activation)
            .narrow(1, 0, out);
  } else if (also != nullptr && !low && !panels.defined() && !bias.defined() && !activation &&
             x.device() == Device::CPU) {  // [rows, out], and also->out
    y = product_and_activation(xa, wa, also->bias.detach(), also->op, also->out);
  } else {
    const Tensor b = bias.defined() ? bias.detach() : Tensor();
    y = panels.defined() ? gemm_by_panels(xa, panels, out, b, activation)  // [rows, out]
                         : gemm_forward(xa, wt, Tensor(), y_type, 0.0f, b, activation);
  }
  if (also != nullptr && also->out.defined() && x.dim() != 2)
    also->out = also->out.reshape(out_shape);
  if (autograd::any_requires_grad({x2, weight, bias})) {
    LOOM_CHECK(!activation, "linear: internal error: a fused activation needs no gradient");
    Tensor xs = detail::saved(x_graph), ws = detail::saved(wa), wi = detail::saved(weight);
    const bool need_x = x2.requires_grad(), need_w = weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const DType x_type = x2.dtype(), w_type = weight.dtype();
    // dx = g W; dW = g^T x, computed in weight's own [out, in] layout (no transposed copy);
    // db = the column sums of g, in float32. The products take g in the operands' dtype
    // (bfloat16 under autocast) and write dx and dW in the inputs' own dtypes.
    y = autograd::record("linear", {x2, weight, bias}, y,
                         [xs, ws, wi, need_x, need_w, need_b, x_type, w_type, pad,
                          out](const Tensor& grad) {
      if (autograd::building_graph({grad, xs, wi})) {  // create_graph: the same, as ops
        const Tensor g = grad.to(xs.dtype());
        return std::vector<Tensor>{need_x ? matmul(g, wi.to(g.dtype())).to(x_type) : Tensor(),
                                   need_w ? matmul(g.t(), xs).to(w_type) : Tensor(),
                                   need_b ? sum(grad.to(DType::Float32), 0) : Tensor()};
      }
      // g in the operands' dtype; zero-padded to ws's out_p rows when the forward was.
      const Tensor g = pad ? pad_with_zeros(grad, 1, ws.dtype()) : grad.to(ws.dtype());
      Tensor dw;
      if (need_w) {
        dw = gemm_forward(g.t(), xs, Tensor(), w_type);  // [out_p, in]: the first out rows
        if (pad) dw = dw.narrow(0, 0, out);
      }
      return std::vector<Tensor>{need_x ? gemm_forward(g, ws, Tensor(), x_type) : Tensor(), dw,
                                 need_b ? detail::column_sums(grad, out) : Tensor()};
    }, {xs, ws});
  }
  return x.dim() == 2 ? y : y.reshape(out_shape);  // [..., out]
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(x, "linear");
  detail::check_defined(weight, "linear");
  // Under autocast (autograd/autocast.h) the product runs in bfloat16 on tensor cores, is
  // accumulated in float32 from the bias (cast to bfloat16, as PyTorch casts every input of an
  // autocast op) and rounded to bfloat16 once: the result is bfloat16, as in PyTorch. So the
  // activations between products stay bfloat16 (GELU reads and writes them in one pass, the
  // next product needs no cast, the LM head's logits are half the bytes), and a residual sum
  // with the float32 stream is float32. One autograd node: the casts are internal, and the
  // gradients of x and weight come out of the backward's GEMMs in their own dtypes (float32 for
  // float32 inputs), unrounded.
  if (autocast::is_enabled() && is_floating_point(x.dtype()) &&
      is_floating_point(weight.dtype()))
    return linear_gemm(x, weight, bias, autocast::get_dtype());
  // Explicit bfloat16 operands outside autocast: matmul's rule (a bfloat16 product), then the
  // bias by type promotion.
  if (detail::is_bf16(x) || detail::is_bf16(weight)) {
    const Tensor y = matmul(x, weight.t());
    return bias.defined() ? y + bias : y;
  }
  detail::check_float(x, "linear");
  detail::check_float(weight, "linear");
  return linear_gemm(x, weight, bias);
}

Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         UnaryOp activation) {
  detail::check_defined(x, "linear_activation");
  detail::check_defined(weight, "linear_activation");
  LOOM_CHECK(
      activation == UnaryOp::Relu || activation == UnaryOp::Gelu || activation == UnaryOp::GeluTanh,
      "linear_activation: the activation must be Relu, Gelu or GeluTanh, got {}",
      unary_op_name(activation));
  const bool autocast =
      autocast::is_enabled() && is_floating_point(x.dtype()) && is_floating_point(weight.dtype());
  // With autograd, or bfloat16 operands outside autocast (matmul's rule): the two ops.
  if (autograd::any_requires_grad({x, weight, bias}) ||
      (!autocast && (detail::is_bf16(x) || detail::is_bf16(weight)))) {
    // In float32 on the CPU the product writes the activation as well (two values, two nodes,
    // the same bits; product_and_activation).
    const auto float32 = [](const Tensor& t) { return t.dtype() == DType::Float32; };
    if (!autocast && float32(x) && float32(weight) && bias.defined() && float32(bias) &&
        x.device() == Device::CPU && bias.device() == Device::CPU && bias.dim() == 1 &&
        weight.dim() == 2 && bias.size(0) == weight.size(0)) {
      ActivationOfProduct also{activation, bias, Tensor()};
      const Tensor product = linear_gemm(x, weight, Tensor(), std::nullopt, std::nullopt, &also);
      if (also.out.defined())
        return detail::activation_of_product(activation, product, bias, also.out);
      return detail::activation(activation, product, bias);
    }
    return detail::activation(activation, linear(x, weight, Tensor()), bias);
  }
  if (autocast) return linear_gemm(x, weight, bias, autocast::get_dtype(), activation);
  detail::check_float(x, "linear_activation");
  detail::check_float(weight, "linear_activation");
  return linear_gemm(x, weight, bias, std::nullopt, activation);
}

// bfloat16 @ bfloat16 (see ops.h): one bfloat16 GEMM with float32 accumulation (cublasGemmEx on
// tensor cores; on the CPU float32 BLAS on the exactly upcast operands, since products of
// bfloat16 values are exact in float32); the result is rounded to bfloat16 once. As in PyTorch
// the two operands must have the same dtype.
Tensor matmul(const Tensor& a, const Tensor& b) { return matmul(a, b, std::nullopt); }

Tensor matmul(const Tensor& a, const Tensor& b, std::optional<DType> out_dtype) {
  return detail::scaled_matmul(a, b, 1.0f, out_dtype);
}

Tensor detail::scaled_matmul(const Tensor& a, const Tensor& b, float alpha,
                             std::optional<DType> out_dtype, const GradientInto& into) {
  detail::check_defined(a, "matmul");
  detail::check_defined(b, "matmul");
  LOOM_CHECK(!out_dtype || *out_dtype == DType::Float32 || *out_dtype == DType::BFloat16,
             "matmul: out_dtype {} is not float32 or bfloat16", dtype_name(*out_dtype));
  // Under autocast (autograd/autocast.h) float32 operands are multiplied in bfloat16.
  if (autocast::is_enabled() && is_floating_point(a.dtype()) && is_floating_point(b.dtype()) &&
      (a.dtype() == DType::Float32 || b.dtype() == DType::Float32))
    return scaled_matmul(a.to(autocast::get_dtype()), b.to(autocast::get_dtype()), alpha,
                         out_dtype);
  if (detail::is_bf16(a) || detail::is_bf16(b)) {
    LOOM_CHECK(a.dtype() == b.dtype(),
               "matmul: operands of dtypes {} and {} (shapes {} and {}); cast one so they match",
               dtype_name(a.dtype()), dtype_name(b.dtype()), shape_str(a.shape()),
               shape_str(b.shape()));
  } else {
    detail::check_float(a, "matmul");
    detail::check_float(b, "matmul");
    LOOM_CHECK(!out_dtype || *out_dtype == DType::Float32,
               "matmul: float32 operands (shapes {} and {}) give a float32 result, not {}",
               shape_str(a.shape()), shape_str(b.shape()), dtype_name(*out_dtype));
  }
  detail::check_same_device(a, b, "matmul");
  LOOM_CHECK(a.dim() >= 1 && b.dim() >= 1,
             "matmul: both arguments need at least 1 dim, got {} and {}", shape_str(a.shape()),
             shape_str(b.shape()));
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  LOOM_CHECK(ka == kb, "matmul: shapes {} and {} cannot be multiplied ({} vs {})",
             shape_str(a.shape()), shape_str(b.shape()), ka, kb);
  if (a.dim() > 2 || b.dim() > 2) {  // batch dims must broadcast
    const Shape ba(a.shape().begin(), a.shape().end() - std::min<int64_t>(a.dim(), 2));
    const Shape bb(b.shape().begin(), b.shape().end() - std::min<int64_t>(b.dim(), 2));
    broadcast_shapes(ba, bb, "matmul");
  }
  // 1-D operands become [1, K] / [K, 1] matrices, and the extra dim is removed afterwards.
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(-1) : b;
  const bool places = a2.dim() == a.dim() && b2.dim() == b.dim();  // no 1-D operand
  Tensor c = matmul_nd(a2, b2, out_dtype, Tensor(), alpha, places ? into : GradientInto{});
  if (b.dim() == 1) c = c.squeeze(-1);
  if (a.dim() == 1) c = c.squeeze(a.dim() == 1 && b.dim() == 1 ? -1 : -2);
  return c;
}

}  // namespace loom
