// The differentiable operations of loom. Each is defined once, in autograd/ops_*.cpp: the
// forward computes through the device's backend (backends/backend.h) and the backward sits right
// beside it, recorded with autograd::record (autograd/node.h). A backward is one of two kinds:
//   * composed of the ops in this file, so it runs on any device: the views and shape ops
//     (transpose <-> transpose, narrow <-> zero-padded copy, cat <-> narrow, split <-> one
//     cat, ...), arithmetic, where, the reductions, matmul (two matmuls) and the index ops
//     (index_select and index_add, gather and scatter_add are each other's adjoints);
//   * a backward kernel of the backend, where one fused pass is faster or more stable than the
//     composite: the unary functions (Backend::unary_backward, which evaluates the derivative
//     written beside the function), softmax and log_softmax (softmax_backward), layer_norm
//     (layer_norm_backward), cross_entropy (cross_entropy_backward) and fused_attention
//     (attention_backward).
// A backward that builds a graph (create_graph: autograd::grad, Tensor::backward) runs with
// grad mode on and must be differentiable itself: a composed backward is, reading the tensors
// it saved through detail::saved (an input keeps its place in the graph) and a saved output
// through autograd::unpack_output; a kernel backward, when autograd::building_graph(...) says
// so, computes the same formula with the ops of this file instead (the unary derivatives,
// softmax's y (g - sum(g y)), layer_norm's and cross_entropy's composites), or, lacking one,
// returns its result through autograd::not_differentiable_twice, so that a second derivative
// through it is an error naming the op, never a silent zero.
// All binary ops broadcast like NumPy/PyTorch and promote their operands' dtypes as PyTorch does
// (autograd/ops_dtype.h: bool < int64 < floating; a C++ number is a Scalar, core/scalar.h).
//
// bfloat16
// --------
// A bfloat16 tensor (core/bfloat16.h) is made by x.to(DType::BFloat16) or zeros/ones/full with a
// dtype, and goes back by .to(DType::Float32); the cast is differentiable both ways. The ops
// below that compute on values take bfloat16 as PyTorch's CPU kernels do: the inputs are upcast
// to float32 (exactly), the op runs in float32 (reductions, softmax, layer_norm and the loss
// accumulate in float32) and the result is rounded to bfloat16 once. So bfloat16 @ bfloat16 is a
// bfloat16 GEMM with float32 accumulation. Types promote as in PyTorch: bfloat16 with bfloat16
// gives bfloat16, with float32 gives float32 (matmul wants equal dtypes), comparisons give
// Bool; argmax/argmin give int64. Gradients of bfloat16 tensors are bfloat16. Taking
// bfloat16: the arithmetic, the unary functions, comparisons, where, masked_fill, sum, mean,
// max, min, argmax, argmin, var, softmax, log_softmax, matmul, layer_norm, cross_entropy,
// dropout, embedding, tril, triu and every view, cat/stack/roll/contiguous/clone. The index
// ops (index_select, gather, index_add, scatter_add) refuse it with a loom::Error naming the op
// and the dtype. Where it happens: the unary functions (but exp, log, rsqrt, pow) and the
// arithmetic are one backend kernel that reads and writes bfloat16 itself (one pass over
// memory; a derivative that reads the output recomputes it in float32 from the input); gemm
// takes bfloat16 operands (cuBLAS's bfloat16 GEMM on CUDA); sum and cross_entropy read
// bfloat16 in their kernels too; every other op runs its float32 kernel on upcast copies and
// rounds once. The values are the same either way.
// Inside an AutocastGuard (autograd/autocast.h) matmul and linear cast float32 operands to
// bfloat16 (a bfloat16 result), and softmax, log_softmax, layer_norm, cross_entropy, sum, exp,
// log, rsqrt and pow return their float32 result for bfloat16 inputs instead of rounding it.
//
// How to add an op
// ----------------
// The library files each kind of op touches (the tests below come on top):
// 1. Compose it from the ops below if you can (tinygrad's rule: few primitives, composites on
//    top): 2 files. Its backward is then automatic and it runs on every device: declare it
//    here, in the section it belongs to, with a comment giving its PyTorch counterpart and
//    conventions, and define it in the one autograd/ops_*.cpp of its kind (ops_shape.cpp for
//    shape ops), checking its arguments first (LOOM_CHECK, with a message that names the op
//    and the shapes or values at fault). If it takes one tensor, its method form makes 4
//    (core/tensor.h + autograd/tensor_methods.cpp; the rule is stated in core/tensor.h). No
//    backend file changes. roll in ops_shape.cpp (along one dim) is the worked example: narrow +
//    cat, no kernel.
// 2. A new unary function (elementwise, one input): 3 files, as the recipe at the top of
//    backends/unary_math.h says: its entry in that table (the one host+device table of each
//    function and its derivative from which the CPU and CUDA loops are instantiated; the
//    UnaryOp enum comes from it), its declaration here and its method's in core/tensor.h. The
//    two definitions are generated from the table's LOOM_UNARY_FUNCTIONS: the free function is
//    unary_op(UnaryOp::X, "x", x) in autograd/ops_elementwise.cpp, whose backward calls
//    Backend::unary_backward. The kernel-level tests iterate over the table by themselves, but
//    tests/core/test_cpu_backend.cpp wants a reference formula for the new entry. A 4th file:
//    the same derivative written with ops, the entry's case in unary_grad_graph
//    (autograd/ops_elementwise.cpp), for create_graph; -Wswitch names a missing one.
// 3. A new kernel family (only when a profile or numerical stability asks for it; keep the
//    composite as the reference it is tested against): 4 files in backends/, as
//    backends/backend.h describes (backends/<family>/<family>.h, its arguments and kernel
//    signatures; <family>.cpp, the public methods, whose checks are the only ones on the
//    kernel's arguments, and the CPU loops; <family>.cu, the CUDA kernels; backend.h, the
//    public methods and the include), a backward kernel being a second member of the family.
//    Then the op here and in its autograd/ops_*.cpp, as in 1, its forward and backward calling
//    the two kernels and checking only what the kernels cannot see (the op's own shapes and
//    dims, before they become the kernel's rows): 6 files, 8 with a method form.
// In every case add the five tests:
//   * gradient check: tests/autograd/test_gradcheck.cpp, gradcheck(weighted(f), inputs, eps,
//     rtol, atol, name) against central finite differences, on contiguous and non-contiguous
//     inputs (the transposed()/narrowed() helpers) and on every argument form;
//   * golden against PyTorch: a family function of add_case(name, torch_fn, inputs...) appended
//     at the END of FAMILIES in tests/golden/gen_ops.py (each case draws from one seeded stream,
//     so a case inserted earlier would change every later stored tensor), regenerated with
//     /usr/bin/python3 tests/golden/gen_ops.py (every old tensor of ops.safetensors must stay
//     byte-identical); and in tests/autograd/test_golden_ops.cpp the same family, one
//     {name, lambda} per case mirroring the Python line by line, a TEST_CASE running it, and
//     an entry in all_families(): the last test fails on a fixture case without a lambda;
//   * CUDA parity: tests/cuda/test_cuda.cpp, compare_op(name, f, inputs) in the "... through
//     .to(Device::CUDA)" case of its kind (values and gradients on the GPU against the CPU), and
//     for a new kernel a compare_devices case calling the kernel directly in several layouts;
//     without a GPU, tests/cuda/emulator/run_emulated.sh runs the suite on a CPU emulator;
//   * double backward: tests/autograd/test_double_backward.cpp, gradgradcheck(f, inputs, name)
//     (finite differences of the gradient built with create_graph);
//   * error paths: tests/core/test_error_paths.cpp, expect_error(f, {"op", "[2,3]", ...}) for
//     each LOOM_CHECK, naming the op and the shapes or values the message must contain.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/ops_dtype.h"  // promotion, comparisons, logical ops, any/all
#include "backends/unary_math.h"  // UnaryOp
#include "backends/window/window.h"  // WindowGeometry
#include "core/tensor.h"

namespace loom {

// The fused attention kernels' sizes and options (backends/attention/attention.h).
struct AttentionArgs;

// --- creation -----------------------------------------------------------------------------
Tensor tensor(std::vector<float> values, Shape shape);          // float32, copies
Tensor tensor_i64(std::vector<int64_t> values, Shape shape);    // int64 (ids, labels)
Tensor scalar_tensor(float value, Device device = Device::CPU); // 0-d float32
Tensor zeros(Shape shape, Device device = Device::CPU);
Tensor ones(Shape shape, Device device = Device::CPU);
Tensor full(Shape shape, float value, Device device = Device::CPU);
// The same of a given dtype (float32, bfloat16: the value rounded to nearest even; int64).
Tensor zeros(Shape shape, DType dtype, Device device = Device::CPU);
Tensor ones(Shape shape, DType dtype, Device device = Device::CPU);
Tensor full(Shape shape, float value, DType dtype, Device device = Device::CPU);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor randn(Shape shape, Device device = Device::CPU);   // N(0,1) from the global generator
Tensor rand(Shape shape, Device device = Device::CPU);    // U[0,1) from the global generator
Tensor randint(int64_t low, int64_t high, Shape shape, Device device = Device::CPU);  // int64
Tensor arange(int64_t n, Device device = Device::CPU);    // int64 0..n-1
Tensor arange_f(float start, float end, float step = 1.0f, Device device = Device::CPU);
void manual_seed(uint64_t seed);
void set_num_threads(int n);   // OpenMP + OpenBLAS threads of the CPU backend
int get_num_threads();

// --- elementwise arithmetic (broadcasting) --------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, float exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
// A number on either side (x * 0.5f, x * 2, 1 - mask, x / 3): a Scalar (core/scalar.h), whose
// kind decides the result's dtype as in PyTorch (autograd/ops_dtype.h): float32 * 2 is float32,
// int64 * 2 is int64, int64 * 2.0f and int64 / 2 are float32.
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);

// --- elementwise functions -----------------------------------------------------------------
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);        // exact: x * Phi(x), Phi the normal CDF (erf)
Tensor gelu_tanh(const Tensor& x);   // tanh approximation (GPT-2)
Tensor abs(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor sign(const Tensor& x);        // not differentiable (zero gradient)
Tensor clamp(const Tensor& x, float min, float max);
// torch.clamp with either bound absent (std::nullopt); clamp_min / clamp_max keep one bound.
// The gradient passes where x lies inside the bounds, edges included, as torch.clamp's.
Tensor clamp(const Tensor& x, std::optional<float> min, std::optional<float> max);
Tensor clamp_min(const Tensor& x, float min);
Tensor clamp_max(const Tensor& x, float max);
// The table's other functions (backends/unary_math.h gives each formula and its derivative),
// with torch's names and meanings.
Tensor neg(const Tensor& x);         // -x
Tensor reciprocal(const Tensor& x);  // 1 / x
Tensor square(const Tensor& x);      // x * x
Tensor log1p(const Tensor& x);       // log(1 + x), accurate for small x
Tensor expm1(const Tensor& x);       // e^x - 1, accurate for small x
Tensor log2(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor erf(const Tensor& x);
// floor, ceil, round (half to even, as torch.round) and trunc: zero gradient, as PyTorch's.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor silu(const Tensor& x);        // x sigmoid(x) (Elfwing et al. 2017; swish)
// log(1 + e^(beta x)) / beta, and x itself where beta x > threshold (torch's softplus).
Tensor softplus(const Tensor& x, float beta = 1.0f, float threshold = 20.0f);
Tensor leaky_relu(const Tensor& x, float negative_slope = 0.01f);
Tensor elu(const Tensor& x, float alpha = 1.0f);  // x > 0 ? x : alpha (e^x - 1)
Tensor mish(const Tensor& x);        // x tanh(softplus(x)) (Misra 2019)
Tensor hardswish(const Tensor& x);   // x relu6(x + 3) / 6 (Howard et al. 2019, MobileNetV3)
// log(z / (1 - z)) with z = x, or x clamped to [eps, 1 - eps] when eps is given (torch.logit).
Tensor logit(const Tensor& x, std::optional<float> eps = std::nullopt);
Tensor relu6(const Tensor& x);       // min(max(x, 0), 6)

// --- comparisons (Bool results), logical ops, promotion: autograd/ops_dtype.h ----------------

// cond nonzero -> a, else b (broadcasting all three): cond Bool, or any dtype (nonzero = true);
// a and b promoted to result_type(a, b); differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
// x where mask is zero/false, value where it is nonzero/true (mask of any dtype, Bool as
// PyTorch wants it, broadcastable to x); the result has x's dtype.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);

// --- reductions -----------------------------------------------------------------------------
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);                                  // all elements -> 0-d
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // values
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);  // int64
Tensor var(const Tensor& x, int64_t dim, bool unbiased = true, bool keepdim = false);
Tensor std(const Tensor& x, int64_t dim, bool unbiased = true, bool keepdim = false);
// Over several dims at once, as PyTorch's dim lists: dims may be negative and may not repeat;
// an empty Shape{} reduces over every dim. A braced single dim, sum(x, {1}), picks the one-dim
// form above (the same result); so does var(x, {1}, 2), whose 2 then reads as `unbiased` (as in
// LibTorch): write var(x, Shape{1}, 2) for a correction other than 0 or 1.
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// sum((x - mean)^2) / (N - correction) over dims (N their element count), as torch.var with
// correction; std is its square root.
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
// The product of all elements (0-d), or along dim. The gradient is the product of the other
// elements, right when x holds zeros (as PyTorch's).
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
// log(sum(exp(x))) over dims, computed as m + log(sum(exp(x - m))) with m the max (a row of
// -inf gives -inf, one with +inf gives +inf, as torch.logsumexp).
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
// The vector p-norm (sum |x|^p)^(1/p) of all elements or over dims, as torch.norm: p = inf is
// max |x|, -inf min |x|, 0 the count of nonzeros. The gradient at x = 0 is 0 (p = 2: the
// subgradient PyTorch picks).
Tensor norm(const Tensor& x, float p = 2.0f);
Tensor norm(const Tensor& x, float p, int64_t dim, bool keepdim = false);
Tensor norm(const Tensor& x, float p, const Shape& dims, bool keepdim = false);
// Inclusive running sum / product along dim (torch.cumsum, torch.cumprod): one scan kernel
// (backends/scan). cumsum's gradient is the reverse running sum of g; cumprod's is right when
// x holds zeros.
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);
// Sums `x` down to `shape` (the reverse of broadcasting `shape` up to x's shape).
Tensor sum_to(const Tensor& x, const Shape& shape);

// --- softmax ---------------------------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// softmax(x + bias, -1) with bias broadcast to x (attention's additive mask, Swin's relative
// position bias): the values and gradients of the two ops, to the bit, in one pass where the
// add wrote the sum out and the softmax read it back (on the CPU; elsewhere the two ops).
Tensor add_softmax(const Tensor& x, const Tensor& bias);

// --- linear algebra ---------------------------------------------------------------------------
// torch.matmul: 1-D . 1-D, 2-D @ 2-D, and N-D batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
// The same product returned in out_dtype: for bfloat16 operands (or float32 ones under autocast)
// float32 gives the float32 accumulators unrounded (cuBLAS's bfloat16 GEMM with a float32 C;
// torch.matmul has no such argument). Float32 operands take only float32.
Tensor matmul(const Tensor& a, const Tensor& b, std::optional<DType> out_dtype);
// x [..., in] @ weight [out, in]^T + bias [out] (bias may be undefined) -> [..., out], as
// torch.nn.functional.linear: one GEMM that starts from the bias, one autograd node.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// activation(linear(x, weight, bias)) for activation Relu, Gelu or GeluTanh (PyTorch's fused
// _addmm_activation): the same values and gradients. Without autograd (inference) it is one
// GEMM that applies the activation as it writes its output (GemmArgs::activation); with it,
// bias_relu / bias_gelu / bias_gelu_tanh of the product, whose backward reads x W^T (in
// float32 on the CPU one GEMM writes both, the activation as it finishes each band of rows:
// GemmArgs::activation_out).
Tensor linear_activation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         UnaryOp activation);
// torch.einsum (autograd/ops_einsum.cpp): "ij,jk->ik", an implicit output (the letters that
// appear once, sorted), "..." for broadcast dims, a letter repeated in one operand (its
// diagonal), any number of operands (contracted left to right). Lowered to permute, reshape,
// sum and matmul, so its gradient is theirs.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors);
// a [n] and b [m] -> [n, m], a_i b_j (torch.outer).
Tensor outer(const Tensor& a, const Tensor& b);
// [b, n, k] @ [b, k, m] -> [b, n, m]: 3-D only and no broadcasting, as torch.bmm.
Tensor bmm(const Tensor& a, const Tensor& b);
// beta input + alpha (batch1 @ batch2), input broadcast to [b, n, m] (torch.baddbmm); with
// beta = 0 input is ignored (its NaNs too), as PyTorch does.
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, float beta = 1.0f,
               float alpha = 1.0f);
// beta input + alpha (mat1 @ mat2) for 2-D mat1, mat2, input broadcast to [n, m] (torch.addmm).
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, float beta = 1.0f,
             float alpha = 1.0f);

// --- joining, splitting and indexing ------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// torch.split: views of consecutive slices of x along dim (negative counts from the end), each
// split_size long but the last, which holds what is left (x.size(dim) / split_size rounded up
// pieces, one when the dim is empty); or of the lengths in `sizes`, which must sum to
// x.size(dim). Differentiable as one op: its backward is one cat of the pieces' gradients.
// As with roll, split(x, {n}, d) takes the braces for a number: split_size n.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, std::vector<int64_t> sizes, int64_t dim);
// torch.chunk: split into `chunks` pieces of ceil(x.size(dim) / chunks), so possibly fewer than
// `chunks` pieces (size 5 in 4 chunks gives 2, 2, 1); an empty dim gives `chunks` empty pieces.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// Rows (slices along dim) of x picked by a 1-D int64 index.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// torch.gather: out[..., j, ...] = x[..., index[..., j, ...], ...] along dim.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with src's slices added at positions index (1-D int64) along dim: the adjoint of index_select.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// x with src added at x[..., index[..., j, ...], ...] along dim: the adjoint of gather.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// Rows of weight [num, dim] gathered by int64 ids of any shape -> ids.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// torch.roll: out[..., i, ...] = x[..., (i - shift) mod n, ...] along dim (n = x.size(dim)):
// elements pushed off one end come back at the other. Any shift (negative, or beyond n).
Tensor roll(const Tensor& x, int64_t shift, int64_t dim);
// Rolls along dims[i] by shifts[i] for each i (a dim may repeat: its shifts add up), as
// torch.roll(x, shifts, dims). dims may not be empty: torch.roll's form without dims (x rolled
// as if flattened) is x.flatten().roll(shift, 0).reshape(x.shape()). Beware that in
// roll(x, {s}, {}) the braces convert to numbers and call the one-dim form, with dim 0.
Tensor roll(const Tensor& x, std::vector<int64_t> shifts, std::vector<int64_t> dims);
// Lower-triangular part (k = diagonal offset), as torch.tril.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

// --- fused nn functions (differentiable; nn::functional wraps these) ----------------------------
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f);
// {h, layer_norm(h, weight, bias, eps)} with h = x + residual: the same values and gradients as
// the two ops, from one kernel that adds and normalises in the same pass (a pre-norm block's
// residual add and the LayerNorm after it). One of x and residual may be bfloat16 (a branch
// computed in bfloat16): it is added in float32 as it is read; h and the result are float32.
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual,
                                         const Tensor& weight, const Tensor& bias,
                                         float eps = 1e-5f);
// Batch normalisation of input [N, C, ...] per channel (Ioffe & Szegedy 2015), as
// torch::batch_norm: the batch's statistics in training (running_mean and running_var, when
// given, updated with `momentum`, the variance unbiased), the running ones in evaluation. One
// kernel each way (backends/batch_norm); nn::functional::batch_norm writes the same as ops.
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var, bool training,
                  float momentum = 0.1f, float eps = 1e-5f);
// The sliding windows of x [N, C, H, W] (ops_window.cpp): every window as a column,
// [N, C, kh*kw, H_out*W_out], pad_value where it reads the padding (im2col), or with the batch
// last, [C, kh*kw, N, H_out*W_out], so that a convolution is one GEMM over every image; the
// columns summed back onto a [N, C, height, width] image (col2im, im2col's adjoint); each
// window's maximum and its position in its H*W plane (max_pool2d_with_indices, as
// torch::max_pool2d_with_indices).
Tensor im2col(const Tensor& x, const WindowGeometry& w, float pad_value = 0.0f,
              bool batch_last = false);
Tensor col2im(const Tensor& cols, int64_t height, int64_t width, const WindowGeometry& w,
              bool batch_last = false);
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const WindowGeometry& w);
// The convolution those columns make (ops_window.cpp): x [N, C_in, H, W] float32, weight
// [C_out, C_in / groups, kh, kw], bias [C_out] or undefined -> [N, C_out, H_out, W_out], one GEMM
// per group over the columns of a few images at a time, so that the columns (and, backward,
// their gradient) stay in cache; the backward makes each chunk's columns again rather than
// keeping them. nn::functional::conv2d checks the shapes and calls it.
Tensor conv2d_im2col(const Tensor& x, const Tensor& weight, const Tensor& bias,
                     const WindowGeometry& w, int64_t groups);
// relu / gelu / gelu_tanh of (x + bias), bias [C] added along x's last dim, in one pass each way
// (Megatron-LM's bias_gelu): a Linear run without its bias (linear(x, W, Tensor())) whose output
// goes straight into the activation, as nn::feed_forward does. The values and gradients of
// gelu(x + bias); the result has x's dtype (a bfloat16 product stays bfloat16), the bias's
// gradient bias's.
Tensor bias_relu(const Tensor& x, const Tensor& bias);
Tensor bias_gelu(const Tensor& x, const Tensor& bias);
Tensor bias_gelu_tanh(const Tensor& x, const Tensor& bias);
// Mean (over non-ignored targets) softmax cross-entropy of logits [N, C] and int64 targets [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     float label_smoothing = 0.0f);
Tensor dropout(const Tensor& x, float p, bool training);
// Attention by the backend's fused kernels (FlashAttention-2, Dao 2023; ops_attention.cpp):
// dropout(softmax(q k^T * args.scale + mask + causal)) v for q [n, T_q, d] and k, v [n, T_k, d]
// (contiguous, or k and v read in place as args.kv_stride allows), mask undefined or a view
// broadcast to the scores [..., T_q, T_k] -> [n, T_q, d]. The kernels' conditions are the
// caller's to check: nn::functional::scaled_dot_product_attention chooses this op when they hold.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                       const AttentionArgs& args);

}  // namespace loom

// torch::indexing (Tensor::index, index_put_), masked_select, nonzero and the shape ops that
// go with them: unbind, unflatten, repeat, flip and the free forms of the views.
#include "autograd/indexing.h"  // IWYU pragma: export

// Selection, sorting and random sampling: topk, sort, amax, scatter, one_hot, randperm, ...
#include "autograd/selection.h"
