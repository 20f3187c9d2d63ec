// bfloat16 on CUDA: conversions bit for bit as on the CPU (core/bfloat16.h's rounding), fill,
// bfloat16 GEMMs on tensor cores (cublasGemmEx, float32 accumulation) against the CPU's float32
// BLAS on the upcast operands, autocast's Linear forward and backward, and a tiny GPT trained
// under autocast on the GPU following its float32 loss.
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

std::vector<uint16_t> bits_of(const Tensor& t) {
  const Tensor c = t.to(Device::CPU).contiguous();
  std::vector<uint16_t> bits(static_cast<size_t>(c.numel()));
  std::memcpy(bits.data(), c.raw_data(), bits.size() * 2);
  return bits;
}

}  // namespace

TEST_CASE("bfloat16 tensors move to CUDA and back bit for bit") {
  LOOM_REQUIRE_GPU();
  const Tensor b = randn({5, 7}).to(DType::BFloat16);
  const Tensor back = b.to(Device::CUDA).to(Device::CPU);
  REQUIRE(back.dtype() == DType::BFloat16);
  CHECK(std::memcmp(back.raw_data(), b.raw_data(), 5 * 7 * 2) == 0);
  // A strided view is made contiguous on the CPU before it moves.
  CHECK(b.t().to(Device::CUDA).to(Device::CPU).to_vector() == b.t().contiguous().to_vector());
}

TEST_CASE("float32 -> bfloat16 on CUDA rounds exactly as the CPU: ties to even, subnormals, "
          "overflow, infinities and NaN") {
  LOOM_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.0f,       -0.0f,      1.0f,         1.00390625f, 1.01171875f,
                               3.3895e38f, 3.4e38f,    -3.4e38f,     inf,         -inf,
                               1e-40f,     -1e-41f,    1.17549e-38f, std::nanf(""), 65504.0f};
  const Tensor random = randn({4096}) * 100.0f;
  for (float v : random.to_vector()) values.push_back(v);
  const Tensor x = tensor(values, {static_cast<int64_t>(values.size())});
  const Tensor on_cpu = x.to(DType::BFloat16);
  const Tensor on_gpu = x.to(Device::CUDA).to(DType::BFloat16);
  REQUIRE(on_gpu.dtype() == DType::BFloat16);
  CHECK(bits_of(on_gpu) == bits_of(on_cpu));
  // ... and back to float32 exactly; int64 both ways, strided views too.
  CHECK(bits_of(on_gpu.to(DType::Float32).to(DType::BFloat16)) == bits_of(on_cpu));
  const Tensor ids = randint(-300, 300, {6, 5});
  CHECK(bits_of(ids.to(Device::CUDA).to(DType::BFloat16)) == bits_of(ids.to(DType::BFloat16)));
  const Tensor bf = randn({6, 5}).to(DType::BFloat16);
  CHECK(bf.to(Device::CUDA).to(DType::Int64).to(Device::CPU).to_vector() ==
        bf.to(DType::Int64).to_vector());
  CHECK(bits_of(bf.to(Device::CUDA).t().contiguous()) == bits_of(bf.t().contiguous()));
  Tensor filled = full({3, 4}, 0.1f, Device::CUDA).to(DType::BFloat16);
  CHECK(bits_of(filled) == bits_of(full({3, 4}, 0.1f).to(DType::BFloat16)));
  CHECK(bits_of(zeros({5}, DType::BFloat16, Device::CUDA)) == bits_of(zeros({5}, DType::BFloat16)));
}

TEST_CASE("bfloat16 matmul on CUDA (tensor cores, float32 accumulation) matches the CPU, "
          "batched, transposed and broadcast") {
  LOOM_REQUIRE_GPU();
  manual_seed(21);
  struct Case {
    Shape a, b;
    bool transpose_b;
  };
  for (const Case& c : {Case{{64, 96}, {96, 80}, false}, Case{{3, 17, 33}, {3, 33, 9}, false},
                        Case{{2, 4, 31, 64}, {2, 4, 47, 64}, true}, Case{{5, 40}, {40}, false},
                        Case{{4, 8, 16}, {16, 12}, false}}) {
    const Tensor a = randn(c.a).to(DType::BFloat16);
    Tensor b = randn(c.b).to(DType::BFloat16);
    if (c.transpose_b) b = b.transpose(-1, -2);
    const Tensor cpu = matmul(a, b);
    const Tensor gpu = matmul(a.to(Device::CUDA), b.to(Device::CUDA));
    REQUIRE(gpu.dtype() == DType::BFloat16);
    // The float32 sums differ in order only; the results agree to bfloat16 rounding.
    check_close(gpu.to(Device::CPU).to(DType::Float32), cpu.to(DType::Float32), 1e-2f, 1e-2f,
                "bfloat16 matmul cuda vs cpu");
  }
}

TEST_CASE("Linear under autocast on CUDA: bfloat16 result and float32 gradients match the CPU") {
  LOOM_REQUIRE_GPU();
  manual_seed(22);
  nn::Linear cpu_layer(48, 40);
  manual_seed(22);
  nn::Linear gpu_layer(48, 40);  // the same weights, moved
  gpu_layer.to(Device::CUDA);
  const Tensor x = randn({2, 30, 48});
  const Tensor xc = x.clone().requires_grad_(true), xg = x.to(Device::CUDA).requires_grad_(true);
  Tensor yc, yg;
  {
    AutocastGuard amp;
    yc = cpu_layer.forward(xc);
    yg = gpu_layer.forward(xg);
  }
  REQUIRE(yg.dtype() == DType::BFloat16);
  // The CPU rounds x W^T + b once. cuBLAS's bfloat16 GEMM rounds x W^T to bfloat16 before it
  // adds C (the bias) and rounds again (seen on an H200: every element equal to that), so where
  // the bias cancels most of the product the two differ by up to a bfloat16 step of the
  // product (|x W^T| about 1 here), not of the result.
  check_close(yg.to(Device::CPU).to(DType::Float32), yc.to(DType::Float32), 1.0f / 128, 1.0f / 128,
              "autocast Linear forward");
  // A bfloat16 gradient (a bfloat16 consumer: GELU, the next product) ...
  const Tensor w = randn({2, 30, 40}).to(DType::BFloat16);
  yc.backward(w);
  yg.backward(w.to(Device::CUDA));
  REQUIRE(xg.grad().dtype() == DType::Float32);
  REQUIRE(gpu_layer.weight.grad().dtype() == DType::Float32);
  check_close(xg.grad().to(Device::CPU), xc.grad(), 1e-4f, 1e-4f, "dx");
  check_close(gpu_layer.weight.grad().to(Device::CPU), cpu_layer.weight.grad(), 1e-4f, 1e-4f, "dW");
  // ... whose column sums are the bias gradient, summed in float32 from the bfloat16 values.
  REQUIRE(gpu_layer.bias.grad().dtype() == DType::Float32);
  check_close(gpu_layer.bias.grad().to(Device::CPU), cpu_layer.bias.grad(), 1e-6f, 1e-6f, "db");
}

TEST_CASE("bias_gelu, bias_gelu_tanh and bias_relu on CUDA match the CPU, float32 and bfloat16") {
  // One kernel each way: act(x + bias) with the bias broadcast along the rows; x contiguous
  // or strided; float32, or bfloat16 x (a product under autocast) with a float32 bias. 64
  // columns take the vector kernels when x is contiguous, 65 the strided ones.
  LOOM_REQUIRE_GPU();
  manual_seed(28);
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  for (const Fn f : {Fn{bias_gelu}, Fn{bias_gelu_tanh}, Fn{bias_relu}})
    for (const int64_t cols : {65, 64})
      for (const bool bf16 : {false, true})
        for (const bool strided : {false, true}) {
          CAPTURE(cols);
          CAPTURE(bf16);
          CAPTURE(strided);
          Tensor x = randn({37, cols}) * 2.0f;
          if (bf16) x = x.to(DType::BFloat16);
          auto view = [&](const Tensor& t) { return strided ? t.t() : t; };  // [cols, 37]
          const Tensor b = randn({strided ? 37 : cols}), w = randn(view(x).shape());
          const Tensor xc = x.clone().requires_grad_(true), bc = b.clone().requires_grad_(true);
          const Tensor xg = x.to(Device::CUDA).requires_grad_(true);
          const Tensor bg = b.to(Device::CUDA).requires_grad_(true);
          const Tensor yc = f(view(xc), bc), yg = f(view(xg), bg);
          REQUIRE(yg.dtype() == x.dtype());
          // GELU's erf and tanh differ from the CPU's by an ulp or two of float32, so a bfloat16
          // rounding may go the other way.
          const float tol = bf16 ? 1.0f / 128 : 1e-5f;
          check_close(yg.to(Device::CPU).to(DType::Float32), yc.to(DType::Float32), tol, 1e-6f,
                      "forward");
          sum(yc.to(DType::Float32) * w).backward();
          sum(yg.to(DType::Float32) * w.to(Device::CUDA)).backward();
          check_close(xg.grad().to(Device::CPU).to(DType::Float32), xc.grad().to(DType::Float32),
                      tol, 1e-5f, "dx");
          REQUIRE(bg.grad().dtype() == DType::Float32);
          check_close(bg.grad().to(Device::CPU), bc.grad(), bf16 ? 1e-2f : 1e-5f, 1e-4f, "dbias");
        }
}

TEST_CASE("bfloat16 sums and the loss of bfloat16 logits on CUDA match the CPU") {
  // Sums read bfloat16 as it is into float32 (rows and columns, split into chunks when long);
  // the loss reads bfloat16 logits and writes their bfloat16 gradient rounded once.
  LOOM_REQUIRE_GPU();
  manual_seed(27);
  for (const Shape& shape : {Shape{7, 33}, Shape{3, 5000}, Shape{6000, 40}}) {
    CAPTURE(shape_str(shape));
    const Tensor x = randn(shape).to(DType::BFloat16), xg = x.to(Device::CUDA);
    AutocastGuard amp;
    for (int64_t dim : {0, 1}) {
      const Tensor sc = sum(x, dim), sg = sum(xg, dim);
      REQUIRE(sg.dtype() == DType::Float32);
      check_close(sg.to(Device::CPU), sc, 1e-6f, 1e-6f, "bfloat16 sum");
    }
    check_close(sum(xg).to(Device::CPU), sum(x), 1e-6f, 1e-6f, "bfloat16 sum of all");
  }
  const Tensor logits = (randn({40, 301}) * 4.0f).to(DType::BFloat16);
  Tensor target = randint(0, 301, {40});
  target.narrow(0, 3, 2).fill_(-100);  // two ignored rows
  const Tensor lc = logits.clone().requires_grad_(true);
  const Tensor lg = logits.to(Device::CUDA).requires_grad_(true);
  Tensor loss_c, loss_g;
  {
    AutocastGuard amp;
    loss_c = cross_entropy(lc, target, -100, 0.1f);
    loss_g = cross_entropy(lg, target.to(Device::CUDA), -100, 0.1f);
  }
  REQUIRE(loss_g.dtype() == DType::Float32);
  check_close(loss_g.to(Device::CPU), loss_c, 1e-5f, 1e-6f, "loss");
  loss_c.backward();
  loss_g.backward();
  REQUIRE(lg.grad().dtype() == DType::BFloat16);
  // expf differs from the CPU's by an ulp or two, so a rounding may go the other way.
  check_close(lg.grad().to(Device::CPU).to(DType::Float32), lc.grad().to(DType::Float32),
              1.0f / 128, 1e-7f, "dlogits");
}

TEST_CASE("elementwise ops, softmax and the loss on bfloat16 CUDA tensors match the CPU") {
  LOOM_REQUIRE_GPU();
  manual_seed(23);
  const Tensor a = randn({8, 33}).to(DType::BFloat16), b = randn({8, 33}).to(DType::BFloat16);
  const Tensor ag = a.to(Device::CUDA), bg = b.to(Device::CUDA);
  CHECK(bits_of(ag + bg) == bits_of(a + b));
  CHECK(bits_of(ag * bg) == bits_of(a * b));
  check_close(gelu(ag).to(Device::CPU).to(DType::Float32), gelu(a).to(DType::Float32), 1e-2f,
              1e-2f, "gelu");
  check_close(softmax(ag, 1).to(Device::CPU).to(DType::Float32), softmax(a, 1).to(DType::Float32),
              1e-2f, 1e-3f, "softmax");
  const Tensor target = randint(0, 33, {8});
  check_close(cross_entropy(ag, target.to(Device::CUDA)).to(Device::CPU).to(DType::Float32),
              cross_entropy(a, target).to(DType::Float32), 1e-2f, 1e-2f, "cross_entropy");
}

TEST_CASE("a tiny GPT trained under autocast on CUDA follows its float32 loss") {
  LOOM_REQUIRE_GPU();
  models::GPTConfig config;
  config.vocab_size = 64, config.context = 32, config.n_layer = 2, config.n_head = 4;
  config.d_model = 64;
  manual_seed(24);
  const Tensor ids = randint(0, 64, {8, 32}).to(Device::CUDA);
  const Tensor inputs = ids.narrow(1, 0, 31), targets = ids.narrow(1, 1, 31);
  auto run = [&](bool amp) {
    manual_seed(25);
    models::GPT gpt(config);
    gpt.to(Device::CUDA);
    optim::AdamW opt(gpt.parameters(), 3e-3f);
    std::vector<float> losses;
    for (int step = 0; step < 30; ++step) {
      Tensor loss;
      {
        AutocastGuard scope(amp);
        loss = cross_entropy(gpt.forward(inputs).reshape({-1, 64}), targets.reshape({-1}));
      }
      losses.push_back(loss.item());
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    return losses;
  };
  const std::vector<float> amp = run(true), fp32 = run(false);
  for (size_t i = 0; i < amp.size(); ++i)
    CHECK_MESSAGE(std::fabs(amp[i] - fp32[i]) <= 0.02f * fp32[i] + 0.01f,
                  "step " << i << ": autocast " << amp[i] << ", float32 " << fp32[i]);
  CHECK(amp.back() < 0.5f * amp.front());
}

TEST_CASE("CUDA kernels without a bfloat16 version refuse it, naming the op and the dtype") {
  LOOM_REQUIRE_GPU();
  const Tensor g = ones({2, 3}, DType::BFloat16).to(Device::CUDA);
  Tensor out = Tensor::empty({2, 3}, DType::Float32, Device::CUDA);
  expect_error([&] { backend(Device::CUDA).softmax(g, 2, 3, 1, false, out); },
               {"softmax", "bfloat16"});
}

TEST_CASE("unary, its backward and binary arithmetic read and write bfloat16 on CUDA, bit for "
          "bit as the CPU") {
  // One kernel per op: float32 math on the bfloat16 values, the result rounded once. The
  // contiguous aligned operands take the vector path (8 bfloat16 per access, or 4 beside a
  // float32 operand); the offset, strided and broadcast ones the general kernel.
  LOOM_REQUIRE_GPU();
  manual_seed(31);
  const Tensor base = randn({6, 37});
  for (const int layout : {0, 1, 2}) {  // contiguous, offset by one element, transposed
    CAPTURE(layout);
    Tensor xc = base.to(DType::BFloat16).requires_grad_();
    Tensor xg = base.to(DType::BFloat16).to(Device::CUDA).requires_grad_();
    auto view = [&](const Tensor& t) {  // the same view on either device
      if (layout == 1) return t.reshape({-1}).narrow(0, 1, 6 * 36).reshape({6, 36});
      return layout == 2 ? t.t() : t;
    };
    const Tensor yc = gelu_tanh(view(xc)), yg = gelu_tanh(view(xg));
    REQUIRE(yg.dtype() == DType::BFloat16);
    CHECK(bits_of(yg) == bits_of(yc));
    CHECK(bits_of(tanh(view(xg))) == bits_of(tanh(view(xc))));
    const Tensor w = randn(yc.shape()).to(DType::BFloat16);
    sum((yc * w).to(DType::Float32)).backward();
    sum((yg * w.to(Device::CUDA)).to(DType::Float32)).backward();
    CHECK(bits_of(xg.grad()) == bits_of(xc.grad()));
    // A float32 residual plus a bfloat16 branch (float32 result), and a broadcast bfloat16 row.
    const Tensor r = randn(yc.shape()), row = randn({yc.size(1)}).to(DType::BFloat16);
    const Tensor sum_c = r + yc, sum_g = r.to(Device::CUDA) + yg;
    REQUIRE(sum_g.dtype() == DType::Float32);
    CHECK(sum_g.to(Device::CPU).to_vector() == sum_c.to_vector());
    CHECK(bits_of(yg - row.to(Device::CUDA)) == bits_of(yc - row));
    CHECK(bits_of(yg * yg) == bits_of(yc * yc));
  }
}

TEST_CASE(
    "a large Linear whose width is not a multiple of 64 (an LM head) matches the CPU on "
    "CUDA, in float32 and under autocast, with and without a bias") {
  // On the GPU its three products run on operands zero-padded to 1024 outputs for cuBLAS's
  // aligned kernels (autograd/ops_matmul.cpp, pad_out_for_gpu): the values must not notice.
  LOOM_REQUIRE_GPU();
  for (bool amp : {false, true})
    for (bool with_bias : {true, false}) {
      CAPTURE(amp);
      CAPTURE(with_bias);
      manual_seed(26);
      nn::Linear cpu_layer(40, 1001, with_bias);  // 1100 x 1001 outputs: over the threshold
      manual_seed(26);
      nn::Linear gpu_layer(40, 1001, with_bias);
      gpu_layer.to(Device::CUDA);
      const Tensor x = randn({2, 550, 40});
      const Tensor xc = x.clone().requires_grad_(true),
                   xg = x.to(Device::CUDA).requires_grad_(true);
      Tensor yc, yg;
      {
        AutocastGuard scope(amp);
        yc = cpu_layer.forward(xc);
        yg = gpu_layer.forward(xg);
      }
      REQUIRE(yg.shape() == Shape{2, 550, 1001});
      const float tol = amp ? 2e-2f : 1e-4f;
      check_close(yg.to(Device::CPU), yc, tol, tol, "padded Linear forward");
      // The loss reads the padded view as it is: reshape keeps it a view, cross_entropy reads
      // its padded rows in place.
      const Tensor target = randint(0, 1001, {1100});
      cross_entropy(yc.reshape({-1, 1001}), target).backward();
      cross_entropy(yg.reshape({-1, 1001}), target.to(Device::CUDA)).backward();
      check_close(xg.grad().to(Device::CPU), xc.grad(), tol, tol, "dx");
      check_close(gpu_layer.weight.grad().to(Device::CPU), cpu_layer.weight.grad(), tol, tol, "dW");
      REQUIRE(gpu_layer.weight.grad().shape() == Shape{1001, 40});
      if (with_bias)
        check_close(gpu_layer.bias.grad().to(Device::CPU), cpu_layer.bias.grad(), 1e-4f, 1e-4f,
                    "db");
    }
}
