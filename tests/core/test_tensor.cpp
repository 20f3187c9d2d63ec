// Tensor core: creation, inspection, views sharing storage, broadcasting, RNG, printing.
#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>

#include "test_util.h"

using namespace loom;

TEST_CASE("creation functions give the documented shapes, dtypes and values") {
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dim() == 2);
  CHECK(t.numel() == 6);
  CHECK(t.size(-1) == 3);
  CHECK(t.dtype() == DType::Float32);
  CHECK(t.device() == Device::CPU);
  CHECK(t.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(zeros({2, 2}).to_vector() == std::vector<float>(4, 0.0f));
  CHECK(ones({3}).to_vector() == std::vector<float>(3, 1.0f));
  CHECK(full({2}, 2.5f).to_vector() == std::vector<float>{2.5f, 2.5f});
  Tensor a = arange(5);
  CHECK(a.dtype() == DType::Int64);
  CHECK(a.to_vector_i64() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(tensor_i64({7, -1}, {2}).to_vector_i64() == std::vector<int64_t>{7, -1});
  CHECK(scalar_tensor(4.0f).dim() == 0);
  CHECK(scalar_tensor(4.0f).item() == 4.0f);
  CHECK(zeros({0, 3}).numel() == 0);
}

TEST_CASE("the RNG is reproducible and independent of the thread count") {
  // 100000 draws: above the per-thread cutoff of the parallel loop (kGrainHeavy = 2048 in
  // backends/cpu/loops.h), so with 2 and 3 threads the draws are split into chunks that start at
  // different counters, and must still match the single-threaded stream element for element.
  constexpr int64_t n = 100000;
  const int threads = get_num_threads();
  std::vector<std::vector<float>> normals, uniforms;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    manual_seed(42);
    normals.push_back(randn({n}).to_vector());
    uniforms.push_back(rand({n}).to_vector());
  }
  set_num_threads(threads);
  for (size_t k = 1; k < normals.size(); ++k) {
    INFO("threads: " << k + 1);
    CHECK(normals[k] == normals[0]);
    CHECK(uniforms[k] == uniforms[0]);
  }
  const std::vector<float>& a = normals[0];
  CHECK(randn({n}).to_vector() != a);  // the stream moves on
  double m = 0, v = 0;
  for (float x : a) m += x;
  m /= a.size();
  for (float x : a) v += (x - m) * (x - m);
  v /= a.size();
  CHECK(std::fabs(m) < 0.015);  // N(0,1): mean and variance within ~5 standard errors
  CHECK(std::fabs(v - 1.0) < 0.025);
  const auto [lo, hi] = std::minmax_element(uniforms[0].begin(), uniforms[0].end());
  CHECK(*lo >= 0.0f);
  CHECK(*hi < 1.0f);
  Tensor r = randint(3, 7, {200});
  for (int64_t x : r.to_vector_i64()) CHECK((x >= 3 && x < 7));
}

// Fixed values, so that a change to the generator (constants, rounds, counter or key layout, the
// bits used) cannot pass unnoticed. They come from outside loom: Random123's published
// known-answer vector philox4x32_10(counter 0, key 0) = {6627e8d5, e169c58d, bc57ac4c, 9b00dbd8}
// (Salmon et al. 2011), and this float64 Python reference of core/rng.h, checked against it:
//
//   import math
//   M = 0xFFFFFFFF
//   def philox(counter, seed):  # Philox-4x32-10 on (counter lo, counter hi, 0, 0), key = seed
//       c = [counter & M, counter >> 32, 0, 0]; k = [seed & M, seed >> 32]
//       for _ in range(10):
//           p0 = 0xD2511F53 * c[0]; p1 = 0xCD9E8D57 * c[2]
//           c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & M, (p0 >> 32) ^ c[3] ^ k[1], p0 & M]
//           k = [(k[0] + 0x9E3779B9) & M, (k[1] + 0xBB67AE85) & M]
//       return c
//   assert philox(0, 0) == [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
//   def uniform(i, s): return (philox(i, s)[0] >> 8) / 2**24   # top 24 bits of word 0
//   def normal(i, s):                                          # Box-Muller on words 0 and 1
//       r = philox(i, s)
//       return (math.sqrt(-2 * math.log(((r[0] >> 8) + 1) / 2**24))
//               * math.cos(2 * math.pi * (r[1] >> 8) / 2**24))
//
// rand is exact (a 24-bit integer over 2^24), so it is compared for equality as that integer;
// randn is computed in float32 by loom (logf, sqrtf, cosf) and agrees to a few float32 ulps.
TEST_CASE("rand and randn give the Philox-4x32-10 reference values") {
  const uint64_t saved_seed = default_generator().seed(),
                 saved_offset = default_generator().offset();
  // manual_seed(0): key 0, counters 0, 1, 2, ... Counter 0 is Random123's zero vector:
  // 0x6627e8d5 >> 8 = 6694888.
  manual_seed(0);
  const std::vector<float> u = rand({4}).to_vector();                           // counters 0..3
  const std::vector<float> expected_u = {6694888, 16311500, 326307, 13209839};  // [i] / 2^24
  for (size_t i = 0; i < 4; ++i) CHECK(u[i] * 16777216.0f == expected_u[i]);
  CHECK(u[0] == 0.3990464210510254f);
  const std::vector<float> z = randn({4}).to_vector();  // counters 4..7
  const std::vector<double> expected_z = {-0.12755167058099692, 1.2440060708871092,
                                          0.28980007437611244, 0.8808579698742274};
  for (size_t i = 0; i < 4; ++i) CHECK(z[i] == doctest::Approx(expected_z[i]).epsilon(1e-5));

  // A 64-bit seed (both key words) and counters crossing 2^32 (both counter words):
  // seed 0x0123456789ABCDEF, counters 2^32 - 2 .. 2^32 + 1 for rand, 2^32 + 2 .. + 5 for randn.
  default_generator().set_state(0x0123456789ABCDEFull, (uint64_t{1} << 32) - 2);
  const std::vector<float> u2 = rand({4}).to_vector();
  const std::vector<double> expected_u2 = {0.9558591246604919, 0.02813732624053955,
                                           0.8486507534980774, 0.28761494159698486};
  for (size_t i = 0; i < 4; ++i) CHECK(u2[i] == static_cast<float>(expected_u2[i]));
  const std::vector<float> z2 = randn({4}).to_vector();
  const std::vector<double> expected_z2 = {-0.9400688729563816, -0.9116577155511691,
                                           1.64028094615673, 0.4902459389496103};
  for (size_t i = 0; i < 4; ++i) CHECK(z2[i] == doctest::Approx(expected_z2[i]).epsilon(1e-5));
  default_generator().set_state(saved_seed, saved_offset);
}

TEST_CASE("views share storage with their base") {
  Tensor base = tensor({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor tr = base.transpose(0, 1);
  CHECK(tr.shape() == Shape{3, 2});
  CHECK_FALSE(tr.is_contiguous());
  CHECK(tr.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor row = base.narrow(0, 1, 1);
  row.fill_(9.0f);  // writes through the view
  CHECK(base.to_vector() == std::vector<float>{0, 1, 2, 9, 9, 9});
  Tensor r = base.reshape({3, 2});
  CHECK(r.impl()->storage() == base.impl()->storage());
  Tensor p = base.unsqueeze(0).permute({2, 0, 1});
  CHECK(p.shape() == Shape{3, 1, 2});
  CHECK(p.to_vector() == std::vector<float>{0, 9, 1, 9, 2, 9});
  Tensor e = tensor({1, 2}, {2, 1}).expand({2, 3});
  CHECK(e.strides()[1] == 0);
  CHECK(e.to_vector() == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(base.select(1, 2).to_vector() == std::vector<float>{2, 9});
  CHECK(base.unsqueeze(-1).squeeze(-1).shape() == Shape{2, 3});
  Tensor c = tr.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.impl()->storage() != base.impl()->storage());
  CHECK(tr.reshape({6}).to_vector() == std::vector<float>{0, 9, 1, 9, 2, 9});
  CHECK(base.flatten().shape() == Shape{6});
  CHECK(zeros({2, 3, 4}).flatten(1).shape() == Shape{2, 12});
}

TEST_CASE("reshape of a strided tensor is a view when its strides allow one, else a copy") {
  // PyTorch's rule: the rows of a [6, 5] view of a [6, 8] buffer (padded rows) split into
  // (2, 3, 5) and merge back without a copy; flattening them needs one.
  const Tensor buffer = arange_f(0.0f, 48.0f).reshape({6, 8}).requires_grad_();
  const Tensor padded = buffer.narrow(1, 0, 5);  // [6, 5], strides (8, 1)
  const Tensor split = padded.reshape({2, 3, 5});
  CHECK(split.impl()->storage() == buffer.impl()->storage());
  CHECK(split.strides() == Strides{24, 8, 1});
  CHECK(split.to_vector() == padded.contiguous().to_vector());
  const Tensor merged = split.reshape({-1, 5});
  CHECK(merged.impl()->storage() == buffer.impl()->storage());
  CHECK(merged.strides() == Strides{8, 1});
  const Tensor flat = padded.reshape({30});
  CHECK(flat.impl()->storage() != buffer.impl()->storage());
  CHECK(flat.is_contiguous());
  CHECK(flat.to_vector() == padded.contiguous().to_vector());
  // Size-1 dims may sit anywhere; a transpose cannot be merged.
  CHECK(padded.unsqueeze(1).reshape({6, 5, 1}).impl()->storage() == buffer.impl()->storage());
  CHECK(padded.t().reshape({30}).impl()->storage() != buffer.impl()->storage());
  // The gradient flows back through the view to the buffer's columns it covers.
  sum(split * 2.0f).backward();
  const std::vector<float> grad = buffer.grad().to_vector();
  for (int64_t i = 0; i < 48; ++i) CHECK(grad[i] == (i % 8 < 5 ? 2.0f : 0.0f));
  // view follows the same rule (as PyTorch's), and refuses where reshape would copy.
  const Tensor viewed = padded.view({2, 3, 5});
  CHECK(viewed.impl()->storage() == buffer.impl()->storage());
  CHECK(viewed.strides() == Strides{24, 8, 1});
  testing::expect_error([&] { padded.view({30}); },
                        {"view", "[6,5]", "strides [8,1]", "[30]", "reshape()"});
}

TEST_CASE("TensorImpl keeps its invariants: geometry inside the storage, grads of its shape") {
  const Tensor base = zeros({2, 3});
  const std::shared_ptr<Storage>& storage = base.impl()->storage();  // 6 floats
  auto make = [&](Shape shape, Strides strides, int64_t offset) {
    return TensorImpl(storage, std::move(shape), std::move(strides), offset, DType::Float32);
  };
  CHECK_NOTHROW(make({3, 2}, {1, 3}, 0));  // the transpose
  CHECK_NOTHROW(make({2}, {3}, 2));        // the last column
  CHECK_NOTHROW(make({4, 0}, {9, 9}, 6));  // no elements: nothing is addressed
  testing::expect_error([&] { make({2, 3}, {3}, 0); }, {"TensorImpl", "[2,3]", "strides [3]"});
  testing::expect_error([&] { make({2}, {3}, 3); },
                        {"TensorImpl", "offset 3", "element 6", "6 elements"});
  testing::expect_error([&] { make({2}, {-1}, 1); }, {"TensorImpl", "negative"});
  testing::expect_error([&] { make({2}, {1}, -1); }, {"TensorImpl", "offset -1"});
  // An int64 view of the same bytes has half as many elements.
  testing::expect_error([&] { TensorImpl(storage, {4}, {1}, 0, DType::Int64); },
                        {"TensorImpl", "element 3", "3 elements"});

  // set_data re-points every handle at new data of the same shape and dtype.
  Tensor a = zeros({2, 3}), alias = a;
  a.impl()->set_data(*ones({2, 3}).impl());
  CHECK(alias.to_vector() == std::vector<float>(6, 1.0f));
  testing::expect_error(
      [&] {
        a.impl()->set_data(*ones({3, 2}).impl());
      },
      {"set_data", "[3,2]", "[2,3]"});
  testing::expect_error(
      [&] {
        a.impl()->set_data(*arange(6).reshape({2, 3}).impl());
      },
      {"set_data", "int64", "float32"});

  // A recorded op's output requires grad; a gradient must have the tensor's shape.
  Tensor y = exp(ones({2}).requires_grad_());
  CHECK(y.requires_grad());
  CHECK(y.impl()->grad_fn()->name == "exp");
  testing::expect_error([&] { a.impl()->set_grad(zeros({3}).impl_ptr()); },
                        {"set_grad", "[3]", "[2,3]"});
}

TEST_CASE("every method form gives what its free function gives, recorded as the same op") {
  manual_seed(21);
  const Tensor x = randn({3, 4}).requires_grad_();
  const Tensor pos = (abs(randn({3, 4})) + 0.5f).detach().requires_grad_();
  const Tensor mask = gt(randn({4}), 0.0f), other = randn({4, 2});
  // One row per method of core/tensor.h: {name, method form, free function}.
  const std::vector<std::tuple<std::string, Tensor, Tensor>> forms = {
      {"exp", x.exp(), exp(x)},
      {"log", pos.log(), log(pos)},
      {"sqrt", pos.sqrt(), sqrt(pos)},
      {"rsqrt", pos.rsqrt(), rsqrt(pos)},
      {"tanh", x.tanh(), tanh(x)},
      {"sigmoid", x.sigmoid(), sigmoid(x)},
      {"relu", x.relu(), relu(x)},
      {"gelu", x.gelu(), gelu(x)},
      {"gelu_tanh", x.gelu_tanh(), gelu_tanh(x)},
      {"abs", x.abs(), abs(x)},
      {"sin", x.sin(), sin(x)},
      {"cos", x.cos(), cos(x)},
      {"sign", x.sign(), sign(x)},
      {"clamp", x.clamp(-0.5f, 0.5f), clamp(x, -0.5f, 0.5f)},
      {"pow", pos.pow(1.5f), pow(pos, 1.5f)},
      {"sum", x.sum(), sum(x)},
      {"sum dim", x.sum(1, true), sum(x, 1, true)},
      {"mean", x.mean(), mean(x)},
      {"mean dim", x.mean(-1), mean(x, -1)},
      {"max", x.max(), max(x)},
      {"max dim", x.max(0, true), max(x, 0, true)},
      {"min dim", x.min(1), min(x, 1)},
      {"argmax", x.argmax(1), argmax(x, 1)},
      {"argmin", x.argmin(0, true), argmin(x, 0, true)},
      {"var", x.var(1, false, true), var(x, 1, false, true)},
      {"sum_to", x.sum_to({1, 4}), sum_to(x, {1, 4})},
      {"softmax", x.softmax(0), softmax(x, 0)},
      {"log_softmax", x.log_softmax(-1), log_softmax(x, -1)},
      {"roll", x.roll(5, 1), roll(x, 5, 1)},
      {"roll dims", x.roll({1, -1}, {0, 1}), roll(x, {1, -1}, {0, 1})},
      {"tril", x.tril(1), tril(x, 1)},
      {"triu", x.triu(), triu(x)},
      {"matmul", x.matmul(other), matmul(x, other)},
      {"masked_fill", x.masked_fill(mask, 2.0f), masked_fill(x, mask, 2.0f)},
  };
  for (const auto& [name, method, free] : forms) {
    INFO("method form of " << name);
    CHECK(method.dtype() == free.dtype());
    CHECK(method.shape() == free.shape());
    CHECK(method.to_vector() == free.to_vector());
    REQUIRE((method.grad_fn() == nullptr) == (free.grad_fn() == nullptr));
    if (method.grad_fn()) CHECK(method.grad_fn()->name == free.grad_fn()->name);
  }
}

TEST_CASE("binary ops broadcast like NumPy") {
  Tensor a = tensor({1, 2, 3}, {3, 1});
  Tensor b = tensor({10, 20}, {2});
  Tensor s = a + b;
  CHECK(s.shape() == Shape{3, 2});
  CHECK(s.to_vector() == std::vector<float>{11, 21, 12, 22, 13, 23});
  CHECK((a * 2.0f).to_vector() == std::vector<float>{2, 4, 6});
  CHECK((1.0f - a).to_vector() == std::vector<float>{0, -1, -2});
  CHECK((6.0f / a).to_vector() == std::vector<float>{6, 3, 2});
  CHECK(broadcast_shapes({5, 1, 4}, {3, 1}, "t") == Shape{5, 3, 4});
  CHECK(eq(arange(4), tensor_i64({0, 5, 2, 5}, {4})).to_vector() ==
        std::vector<float>{1, 0, 1, 0});
  CHECK(gt(tensor({-1, 0, 2}, {3}), 0.0f).to_vector() == std::vector<float>{0, 0, 1});
  CHECK(where(tensor({1, 0}, {2}), tensor({1, 2}, {2}), tensor({5}, {1})).to_vector() ==
        std::vector<float>{1, 5});
}

TEST_CASE("in-place updates: copy_, fill_, zero_, add_, mul_") {
  Tensor t = zeros({2, 2});
  t.copy_(tensor({1, 2}, {2}));  // broadcast copy
  CHECK(t.to_vector() == std::vector<float>{1, 2, 1, 2});
  t.add_(ones({2, 2}), 2.0f);
  CHECK(t.to_vector() == std::vector<float>{3, 4, 3, 4});
  t.mul_(0.5f);
  CHECK(t.to_vector() == std::vector<float>{1.5f, 2, 1.5f, 2});
  t.transpose(0, 1).narrow(0, 0, 1).fill_(7.0f);  // first column
  CHECK(t.to_vector() == std::vector<float>{7, 2, 7, 2});
  t.zero_();
  CHECK(t.to_vector() == std::vector<float>(4, 0.0f));
  Tensor i = zeros({3});
  i.copy_(tensor_i64({1, 2, 3}, {3}));  // dtype converted
  CHECK(i.to_vector() == std::vector<float>{1, 2, 3});
}

TEST_CASE("index_copy_ writes src's slices at the indexed positions, in any dtype") {
  // Reference: out[o, index[j], i] = src[o, j, i] by loops over the [outer, n, inner] view.
  auto reference = [](std::vector<float> x, int64_t outer, int64_t n, int64_t inner,
                      const std::vector<int64_t>& index, const std::vector<float>& src) {
    const int64_t k = static_cast<int64_t>(index.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < inner; ++i)
          x[static_cast<size_t>((o * n + index[static_cast<size_t>(j)]) * inner + i)] =
              src[static_cast<size_t>((o * k + j) * inner + i)];
    return x;
  };
  manual_seed(3);
  const Tensor x = randn({2, 5, 3}), src = randn({2, 2, 3});
  const std::vector<int64_t> index = {4, 1};
  Tensor y = x.clone();
  y.index_copy_(1, tensor_i64(index, {2}), src);
  CHECK(y.to_vector() == reference(x.to_vector(), 2, 5, 3, index, src.to_vector()));
  // dim 0, a negative dim, and a strided (transposed) destination written through its view.
  Tensor rows = zeros({4, 2});
  rows.index_copy_(0, tensor_i64({3, 0}, {2}), tensor({1, 2, 3, 4}, {2, 2}));
  CHECK(rows.to_vector() == std::vector<float>{3, 4, 0, 0, 0, 0, 1, 2});
  Tensor base = zeros({2, 4});
  base.t().index_copy_(-1, tensor_i64({1}, {1}), tensor({5, 6, 7, 8}, {4, 1}));
  CHECK(base.to_vector() == std::vector<float>{0, 0, 0, 0, 5, 6, 7, 8});
  // int64 and bfloat16 rows move unchanged.
  Tensor ids = zeros({1, 4}, DType::Int64);
  ids.index_copy_(1, tensor_i64({2}, {1}), tensor_i64({41}, {1, 1}));
  CHECK(ids.to_vector_i64() == std::vector<int64_t>{0, 0, 41, 0});
  Tensor half = zeros({3}, DType::BFloat16);
  half.index_copy_(0, tensor_i64({1}, {1}), tensor({2.5f}, {1}).to(DType::BFloat16));
  CHECK(half.to(DType::Float32).to_vector() == std::vector<float>{0, 2.5f, 0});
}

TEST_CASE("index_copy_ rejects bad indices, shapes and dtypes with loom::Error") {
  Tensor t = zeros({2, 3});
  testing::expect_error([&] { t.index_copy_(1, tensor_i64({3}, {1}), zeros({2, 1})); },
              {"index_copy", "index 3", "size 3"});
  testing::expect_error([&] { t.index_copy_(1, tensor_i64({0, 1}, {2}), zeros({2, 3})); },
              {"index_copy_", "[2,3]", "[2,2]"});
  testing::expect_error([&] { t.index_copy_(1, tensor({0}, {1}), zeros({2, 1})); },
              {"index_copy_", "int64"});
  testing::expect_error(
      [&] { t.index_copy_(1, tensor_i64({0}, {1}), zeros({2, 1}, DType::Int64)); },
              {"index_copy_", "int64", "float32"});
  testing::expect_error([&] { t.index_copy_(2, tensor_i64({0}, {1}), zeros({2, 1})); },
                        {"index_copy_"});
  CHECK(t.to_vector() == std::vector<float>(6, 0.0f));  // nothing was written
}

TEST_CASE("printing looks like PyTorch") {
  std::ostringstream os;
  os << tensor({1, 2, 3, 4}, {2, 2});
  CHECK(os.str().find("tensor([[1.0000, 2.0000],") == 0);
  CHECK(os.str().find("shape=[2,2]") != std::string::npos);
  std::ostringstream big;
  big << arange(100);
  CHECK(big.str().find("...") != std::string::npos);
  CHECK(big.str().find("dtype=int64") != std::string::npos);
}

TEST_CASE("devices: CUDA requests fail cleanly without a GPU") {
  if (cuda_available()) return;
  CHECK_THROWS_AS(zeros({2}).to(Device::CUDA), Error);
  CHECK_THROWS_AS(zeros({2}, Device::CUDA), Error);
}
