// Invalid-argument paths of the tensor handle, creation, comparison, indexing, nn, reduction and
// shape ops: each throws loom::Error whose message names the op and the offending shape or value.
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("copy_ rejects a source that does not broadcast to the destination") {
  // Incompatible sizes fail in the broadcast itself.
  expect_error([] { zeros({2, 3}).copy_(zeros({4})); }, {"copy_", "[4]", "[2,3]"});
  // Compatible shapes whose broadcast is larger than the destination.
  expect_error(
      [] {
        zeros({3}).copy_(zeros({2, 3}));
      },
      {"copy_", "source shape [2,3]", "broadcast to [3]"});
  expect_error([] { zeros({2, 1}).copy_(zeros({2, 3})); }, {"copy_", "[2,3]", "[2,1]"});
  expect_error([] { zeros({2}).copy_(Tensor()); }, {"copy_", "undefined"});
  expect_error([] { ones({2}).requires_grad_().copy_(zeros({2})); }, {"copy_", "leaf"});
  // A source that does broadcast is fine.
  Tensor x = zeros({2, 3});
  CHECK_NOTHROW(x.copy_(ones({3})));
  CHECK(x.sum().item() == 6.0f);
}

TEST_CASE("set_grad rejects a gradient of the wrong shape") {
  Tensor x = ones({2, 3}).requires_grad_();
  expect_error([&] { x.set_grad(zeros({3, 2})); }, {"set_grad", "[3,2]", "[2,3]"});
  expect_error([&] { x.set_grad(zeros({6})); }, {"set_grad", "[6]", "[2,3]"});
  CHECK_NOTHROW(x.set_grad(zeros({2, 3})));
  CHECK_NOTHROW(x.set_grad(Tensor()));  // clearing is allowed
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("add_ rejects wrong dtypes, shapes and devices") {
  expect_error([] { zeros({2}).add_(arange(2)); }, {"add_", "float32", "int64"});
  expect_error([] { arange(2).add_(zeros({2})); }, {"add_", "int64", "float32"});
  expect_error([] { zeros({3}).add_(zeros({2})); }, {"add_", "[2]", "[3]"});
  expect_error([] { zeros({3}).add_(zeros({2, 3})); }, {"add_", "[2,3]", "[3]"});
  expect_error([] { zeros({2}).add_(Tensor()); }, {"add_", "undefined"});
  Tensor x = ones({2, 3});
  x.add_(ones({3}), 2.0f);  // broadcasting the other operand is fine
  CHECK(x.sum().item() == 18.0f);
  // The device check needs a second device; it runs only where CUDA is available.
  if (cuda_available()) {
    expect_error([] { zeros({2}).add_(zeros({2}).to(Device::CUDA)); },
                      {"add_", "cpu", "cuda"});
  }
}

TEST_CASE("requires_grad_ rejects non-leaf and non-float tensors") {
  Tensor x = ones({2}).requires_grad_();
  Tensor y = exp(x);
  expect_error([&] { y.requires_grad_(); }, {"requires_grad_", "leaf", "'exp'"});
  expect_error([&] { (x * 2.0f).requires_grad_(false); }, {"requires_grad_", "'mul'"});
  expect_error([] { arange(3).requires_grad_(); }, {"requires_grad_", "int64"});
  CHECK_NOTHROW(y.detach().requires_grad_());
}

TEST_CASE("randint range and arange_f step errors") {
  const int64_t wide = (int64_t{1} << 24) + 1;
  expect_error([&] { randint(0, wide, {2}); }, {"randint", "[0, 16777217)", "2^24"});
  expect_error([] { randint(-(int64_t{1} << 23), (int64_t{1} << 23) + 1, {2}); },
                    {"randint", "[-8388608, 8388609)", "2^24"});
  CHECK_NOTHROW(randint(0, int64_t{1} << 24, {2}));  // exactly 2^24 values is still allowed
  expect_error([] { arange_f(0.0f, 1.0f, 0.0f); }, {"arange_f", "step=0"});
  expect_error([] { arange_f(0.0f, 1.0f, -1.0f); },
                    {"arange_f", "start=0", "end=1", "step=-1"});
  expect_error([] { arange_f(1.0f, 0.0f, 0.5f); },
                    {"arange_f", "start=1", "end=0", "step=0.5"});
  CHECK(arange_f(1.0f, 0.0f, -0.5f).numel() == 2);
  CHECK(arange_f(1.0f, 0.0f, -0.5f).to_vector() == std::vector<float>{1.0f, 0.5f});
  CHECK(arange(4).to_vector_i64() == std::vector<int64_t>{0, 1, 2, 3});
  // Backend::arange itself: float32 or int64 only, integral steps for int64.
  Tensor bf = Tensor::empty({3}, DType::BFloat16);
  expect_error([&] { backend(Device::CPU).arange(bf, 0.0, 1.0); }, {"arange", "bfloat16"});
  Tensor ids = Tensor::empty({3}, DType::Int64);
  expect_error([&] { backend(Device::CPU).arange(ids, 0.0, 0.5); },
               {"arange", "integral", "0.5"});
  backend(Device::CPU).arange(ids, 5.0, -2.0);
  CHECK(ids.to_vector_i64() == std::vector<int64_t>{5, 3, 1});
}

TEST_CASE("comparing an int64 tensor with a non-integer number compares in float32") {
  // As torch.eq: the number lifts the comparison to float32 (autograd/ops_dtype.h).
  CHECK(eq(arange(3), 0.5f).to_vector() == std::vector<float>{0, 0, 0});
  CHECK(lt(arange(3), 1.5f).to_vector() == std::vector<float>{1, 1, 0});
  CHECK(gt(arange(3), -0.25f).to_vector() == std::vector<float>{1, 1, 1});
  CHECK(eq(arange(3), 1.0f).to_vector() == std::vector<float>{0, 1, 0});
  CHECK(lt(zeros({2}), 0.5f).to_vector() == std::vector<float>{1, 1});  // float: any scalar
}

TEST_CASE("index_select rejects a non-1-D index and a 0-d input") {
  expect_error(
      [] {
        index_select(zeros({3, 2}), 0, tensor_i64({0, 1}, {1, 2}));
      },
      {"index_select", "1-D", "[1,2]"});
  expect_error(
      [] {
        index_select(zeros({3, 2}), 0, tensor_i64({0}, {}));
      },
      {"index_select", "1-D", "[]"});
  expect_error([] { index_select(zeros({}), 0, tensor_i64({0}, {1})); },
                    {"index_select", "0-d", "[]"});
  expect_error(
      [] {
        index_select(zeros({3, 2}), 2, tensor_i64({0}, {1}));
      },
      {"index_select", "dim 2"});
}

TEST_CASE("index_add argument errors") {
  const Tensor idx = tensor_i64({0, 2}, {2});
  expect_error(
      [&] {
        index_add(zeros({3, 2}), 0, idx, ones({5, 2}));
      },
      {"index_add", "[5,2]", "[2]", "[3,2]", "dim 0"});
  expect_error(
      [] {
        index_add(zeros({3, 2}), 0, tensor_i64({0, 1}, {1, 2}), ones({2, 2}));
      },
      {"index_add", "[1,2]", "[3,2]"});
  expect_error(
      [] {
        index_add(zeros({3, 2}), 0, tensor({0, 1}, {2}), ones({2, 2}));
      },
      {"index_add", "int64", "float32"});
  expect_error([&] { index_add(arange(3), 0, idx, arange(2)); },
                    {"index_add", "int64", "[3]"});
  expect_error(
      [&] {
        index_add(zeros({3, 2}), 2, idx, ones({2, 2}));
      },
      {"index_add", "dim 2"});
  expect_error(
      [] {
        index_add(zeros({3, 2}), 0, tensor_i64({0, 3}, {2}), ones({2, 2}));
      },
      {"index_add", "index 3", "size 3"});
  expect_error([] { index_add(zeros({}), 0, tensor_i64({0}, {1}), ones({1})); },
                    {"index_add", "0-d", "[]"});
  CHECK(index_add(zeros({3, 2}), 0, idx, ones({2, 2})).to_vector() ==
        std::vector<float>{1, 1, 0, 0, 1, 1});
}

TEST_CASE("scatter_add argument errors") {
  expect_error(
      [] {
        scatter_add(zeros({2, 3}), 1, tensor_i64({0, 1}, {2, 1}), ones({2, 2}));
      },
      {"scatter_add", "[2,1]", "[2,2]", "[2,3]"});
  expect_error(
      [] {
        scatter_add(zeros({2, 3}), 1, tensor_i64({0, 1, 2}, {3, 1}), ones({3, 1}));
      },
      {"scatter_add", "[3,1]", "[2,3]", "dim 1"});
  expect_error(
      [] {
        scatter_add(zeros({2, 3}), 1, tensor_i64({0, 1}, {2}), ones({2}));
      },
      {"scatter_add", "[2]", "[2,3]"});
  expect_error(
      [] {
        scatter_add(zeros({2, 3}), 1, tensor({0, 1}, {2, 1}), ones({2, 1}));
      },
      {"scatter_add", "int64", "float32"});
  expect_error(
      [] {
        scatter_add(zeros({2, 3}), 1, tensor_i64({0, 3}, {2, 1}), ones({2, 1}));
      },
      {"scatter_add", "index 3", "size 3"});
  expect_error(
      [] {
        scatter_add(zeros({2, 3}), -3, tensor_i64({0, 1}, {2, 1}), ones({2, 1}));
      },
      {"scatter_add", "dim -3"});
  CHECK(scatter_add(zeros({2, 3}), 1, tensor_i64({2, 0}, {2, 1}), ones({2, 1})).to_vector() ==
        std::vector<float>{0, 0, 1, 1, 0, 0});
}

TEST_CASE("linear names the shapes that do not fit") {
  expect_error(
      [] {
        linear(zeros({2, 3}), zeros({4, 5}), Tensor());
      },
      {"linear", "[2,3]", "[4,5]"});
  expect_error(
      [] {
        linear(zeros({2, 3}), zeros({4, 3}), zeros({5}));
      },
      {"linear", "bias", "[5]", "[4,3]"});
  expect_error([] { linear(zeros({2, 3}), zeros({3}), Tensor()); }, {"linear", "[3]"});
  expect_error([] { linear(Tensor(), zeros({4, 3}), Tensor()); }, {"linear", "undefined"});
}

TEST_CASE("layer_norm on a 0-d input and cross_entropy label_smoothing range") {
  expect_error([] { layer_norm(zeros({}), Tensor(), Tensor()); },
                    {"layer_norm", "at least 1 dim", "[]"});
  const Tensor logits = zeros({2, 3}), target = tensor_i64({0, 1}, {2});
  expect_error([&] { cross_entropy(logits, target, -100, 1.5f); },
                    {"cross_entropy", "label_smoothing", "1.5", "[0, 1]"});
  expect_error([&] { cross_entropy(logits, target, -100, -0.1f); },
                    {"cross_entropy", "label_smoothing", "-0.1"});
  CHECK_NOTHROW(cross_entropy(logits, target, -100, 1.0f));
  CHECK_NOTHROW(cross_entropy(logits, target, -100, 0.0f));
}

TEST_CASE("mean of empty tensors and dims, max of an empty tensor") {
  expect_error([] { mean(zeros({0})); }, {"mean", "empty", "[0]"});
  expect_error([] { mean(zeros({2, 0, 3})); }, {"mean", "empty", "[2,0,3]"});
  expect_error([] { mean(zeros({2, 0}), 1); }, {"mean", "dim 1", "[2,0]", "empty"});
  expect_error([] { mean(zeros({2, 0}), -1); }, {"mean", "dim -1", "[2,0]"});
  expect_error([] { mean(zeros({2, 3}), 2); }, {"mean", "dim 2", "2 dims"});
  expect_error([] { mean(zeros({}), 3); }, {"mean", "dim 3", "0 dims"});
  expect_error([] { mean(arange(3)); }, {"mean", "int64"});
  expect_error([] { var(zeros({2, 3}), 5); }, {"var", "dim 5", "2 dims"});
  expect_error([] { max(zeros({0})); }, {"max", "empty", "[0]"});
  expect_error([] { max(zeros({3, 0})); }, {"max", "empty", "[3,0]"});
  CHECK(mean(zeros({2, 0}), 0).shape() == Shape{0});  // reducing a non-empty dim is fine
}

TEST_CASE("reshape and flatten errors") {
  expect_error(
      [] {
        zeros({2, 3}).reshape({-2, 3});
      },
      {"reshape", "invalid dimension", "[-2,3]"});
  expect_error([] { zeros({2, 3}).reshape({2, -3}); }, {"reshape", "[2,-3]"});
  expect_error([] { zeros({0, 3}).reshape({-1, 0}); }, {"reshape", "[-1,0]", "size 0"});
  expect_error([] { zeros({2, 3}).reshape({-1, 0}); }, {"reshape", "[-1,0]", "size 6"});
  expect_error([] { zeros({6}).view({-3, 2}); }, {"view", "[-3,2]"});
  CHECK(zeros({0, 3}).reshape({-1, 3}).shape() == Shape{0, 3});
  expect_error(
      [] {
        zeros({2, 3, 4}).flatten(2, 1);
      },
      {"flatten", "start_dim 2", "end_dim 1"});
  expect_error(
      [] {
        zeros({2, 3, 4}).flatten(-1, 0);
      },
      {"flatten", "start_dim -1", "end_dim 0"});
  expect_error([] { zeros({2, 3}).flatten(0, 5); }, {"flatten", "dim 5", "2 dims"});
}

TEST_CASE("t, narrow and select on unsupported ranks") {
  expect_error([] { zeros({2, 3, 4}).t(); }, {"t:", "<= 2 dims", "[2,3,4]"});
  CHECK(zeros({2, 3}).t().shape() == Shape{3, 2});
  expect_error([] { zeros({}).narrow(0, 0, 1); }, {"narrow", "0-d", "[]"});
  expect_error([] { zeros({}).select(0, 0); }, {"select", "0-d", "[]"});
}

TEST_CASE("expand errors") {
  expect_error([] { zeros({2, 3}).expand({3}); }, {"expand", "[3]", "[2,3]", "fewer dims"});
  expect_error([] { zeros({3}).expand({-1, 3}); }, {"expand", "-1", "[-1,3]"});
  expect_error([] { zeros({3}).expand({2, -1, 3}); }, {"expand", "-1", "[2,-1,3]"});
  CHECK(zeros({3}).expand({2, -1}).shape() == Shape{2, 3});
}

TEST_CASE("cat of 0-d tensors and stack of nothing") {
  expect_error([] { cat({zeros({}), zeros({})}, 0); }, {"cat", "zero-dimensional"});
  expect_error([] { stack({}); }, {"stack", "non-empty"});
  expect_error([] { stack({}, 1); }, {"stack", "non-empty"});
  expect_error(
      [] {
        stack({zeros({2}), zeros({2})}, 2);
      },
      {"stack", "dim 2", "[-2, 1]", "[2]"});
  CHECK(stack({zeros({}), zeros({})}).shape() == Shape{2});
}

TEST_CASE("split and chunk reject bad dims, sizes and counts, naming the shape") {
  expect_error([] { split(zeros({2, 3}), 1, 2); }, {"split", "dim 2", "[2,3]"});
  expect_error([] { zeros({2, 3}).split(1, -3); }, {"split", "dim -3", "[2,3]"});
  expect_error([] { split(scalar_tensor(1.0f), 1, 0); }, {"split", "dim 0", "shape []"});
  expect_error([] { split(zeros({2, 3}), 0, 1); }, {"split", "split_size 0", "[2,3]"});
  expect_error([] { split(zeros({2, 3}), -2, 1); }, {"split", "split_size -2", "[2,3]"});
  expect_error([] { split(zeros({2, 3}), std::vector<int64_t>{1, 1}, 1); },
               {"split", "sizes [1,1]", "sum to 3", "[2,3]"});
  expect_error([] { zeros({2, 3}).split({4, -1}, 1); }, {"split", "[4,-1]", "non-negative"});
  expect_error([] { chunk(zeros({2, 3}), 0, 1); }, {"chunk", "chunks 0", "[2,3]"});
  expect_error([] { chunk(zeros({2, 3}), 2, 5); }, {"chunk", "dim 5", "[2,3]"});
  expect_error([] { split(Tensor(), 1, 0); }, {"split", "undefined"});
  // Valid edge cases, as torch's: the last piece smaller, fewer chunks than asked, empty dims.
  auto sizes = [](const std::vector<Tensor>& pieces) {
    std::vector<int64_t> out;
    for (const Tensor& p : pieces) out.push_back(p.size(-1));
    return out;
  };
  CHECK(sizes(split(zeros({2, 5}), 2, -1)) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes(split(zeros({2, 5}), 7, 1)) == std::vector<int64_t>{5});
  CHECK(sizes(chunk(zeros({5}), 4)) == std::vector<int64_t>{2, 2, 1});
  CHECK(sizes(chunk(zeros({6}), 4)) == std::vector<int64_t>{2, 2, 2});
  CHECK(sizes(split(zeros({0}), 0)) == std::vector<int64_t>{0});
  CHECK(sizes(split(zeros({0}), 3)) == std::vector<int64_t>{0});
  CHECK(sizes(chunk(zeros({0}), 3)) == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("add_softmax rejects a bias that does not broadcast to x") {
  expect_error([] { add_softmax(zeros({2, 3}), zeros({4})); }, {"add_softmax", "[4]", "[2,3]"});
  expect_error([] { add_softmax(zeros({3}), zeros({2, 3})); }, {"add_softmax", "[2,3]", "[3]"});
  expect_error([] { add_softmax(zeros({2, 3}), Tensor()); }, {"add_softmax"});
}

TEST_CASE("roll rejects out-of-range dims and shifts that do not match the dims") {
  expect_error([] { roll(zeros({2, 3}), 1, 2); }, {"roll", "dim 2", "[2,3]"});
  expect_error([] { roll(zeros({2, 3}), 1, -3); }, {"roll", "dim -3", "[2,3]"});
  expect_error([] { roll(scalar_tensor(1.0f), 1, 0); }, {"roll", "dim 0", "shape []"});
  expect_error([] { roll(zeros({2, 3}), {1, 1}, {0, 2}); }, {"roll", "dim 2", "[2,3]"});
  expect_error([] { roll(zeros({2, 3}), {1, 1}, {-3, 1}); }, {"roll", "dim -3", "[2,3]"});
  expect_error(
      [] {
        roll(zeros({2, 3}), {1, 2}, {0});
      },
      {"roll", "shifts [1,2]", "dims [0]", "[2,3]"});
  expect_error([] { roll(zeros({2, 3}), {1}, {0, 5}); }, {"roll", "[1]", "[0,5]", "[2,3]"});
  expect_error([] { roll(zeros({2, 3}), {1, 2}, {}); }, {"roll", "[1,2]", "dims []", "[2,3]"});
  expect_error(
      [] {
        roll(zeros({2, 3}), std::vector<int64_t>{}, std::vector<int64_t>{});
      },
      {"roll", "shifts []", "dims []", "at least 1", "[2,3]"});
  expect_error([] { roll(zeros({2, 3}), {1, 1}, {0, 2}); }, {"roll", "dim 2", "[2,3]"});
  expect_error([] { zeros({4}).roll(1, 1); }, {"roll", "dim 1", "[4]"});
  expect_error([] { roll(Tensor(), 1, 0); }, {"roll", "undefined"});
  // Valid edge cases: a size-0 dim, a shift of 0.
  CHECK(roll(zeros({0, 3}), 5, 0).shape() == Shape{0, 3});
  CHECK(roll(arange(3), 0, 0).to_vector_i64() == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("out-of-range dims for size, stride, squeeze and unsqueeze") {
  const Tensor x = zeros({2, 3});
  expect_error([&] { x.size(2); }, {"size", "dim 2", "2 dims"});
  expect_error([&] { x.size(-3); }, {"size", "dim -3", "2 dims"});
  expect_error([] { zeros({}).size(0); }, {"size", "dim 0", "0-d"});
  expect_error([&] { x.stride(2); }, {"stride", "dim 2", "2 dims"});
  expect_error([] { zeros({}).stride(-1); }, {"stride", "dim -1", "0-d"});
  CHECK(x.size(-1) == 3);
  expect_error([&] { x.squeeze(2); }, {"squeeze", "dim 2", "2 dims"});
  expect_error([&] { x.squeeze(-3); }, {"squeeze", "dim -3", "2 dims"});
  expect_error([] { zeros({}).squeeze(1); }, {"squeeze", "dim 1", "0 dims"});
  CHECK(zeros({}).squeeze(0).dim() == 0);
  CHECK(zeros({}).squeeze(-1).dim() == 0);
  expect_error([&] { x.unsqueeze(3); }, {"unsqueeze", "dim 3", "[-3, 2]", "[2,3]"});
  expect_error([&] { x.unsqueeze(-4); }, {"unsqueeze", "dim -4", "[-3, 2]", "[2,3]"});
  expect_error([] { zeros({}).unsqueeze(1); }, {"unsqueeze", "dim 1", "[-1, 0]", "[]"});
  CHECK(x.unsqueeze(2).shape() == Shape{2, 3, 1});
  CHECK(x.unsqueeze(-3).shape() == Shape{1, 2, 3});
}

TEST_CASE("operations on an undefined tensor name the operation") {
  const Tensor u;
  expect_error([&] { u.shape(); }, {"shape:", "undefined tensor"});
  expect_error([&] { u.strides(); }, {"strides:", "undefined tensor"});
  expect_error([&] { u.dtype(); }, {"dtype:", "undefined tensor"});
  expect_error([&] { u.device(); }, {"device:", "undefined tensor"});
  expect_error([&] { u.size(0); }, {"size:", "undefined tensor"});
  expect_error([&] { u.stride(0); }, {"stride:", "undefined tensor"});
  expect_error([&] { u.is_contiguous(); }, {"is_contiguous:", "undefined tensor"});
  expect_error([&] { u.item(); }, {"item:", "undefined tensor"});
  expect_error([&] { u.to_vector(); }, {"to_vector:", "undefined tensor"});
  expect_error([&] { u.to(DType::Int64); }, {"to:", "undefined tensor"});
  expect_error([&] { u.to(Device::CPU); }, {"to:", "undefined tensor"});
  expect_error([&] { u.requires_grad(); }, {"requires_grad:", "undefined tensor"});
  expect_error([&] { u.grad(); }, {"grad:", "undefined tensor"});
  expect_error([&] { u.set_grad(zeros({1})); }, {"set_grad:", "undefined tensor"});
  expect_error([&] { u.backward(); }, {"backward:", "undefined tensor"});
  expect_error([&] { u.detach(); }, {"detach:", "undefined tensor"});
  // dim() and numel() are inline in the header and report the accessor they go through.
  expect_error([&] { u.numel(); }, {"shape:", "undefined tensor"});
  Tensor w;
  expect_error([&] { w.requires_grad_(); }, {"requires_grad_:", "undefined tensor"});
  expect_error([&] { w.copy_(zeros({1})); }, {"copy_:", "undefined tensor"});
  expect_error([&] { w.fill_(1.0f); }, {"fill_:", "undefined tensor"});
  expect_error([&] { w.add_(zeros({1})); }, {"add_:", "undefined tensor"});
  expect_error([&] { w.mul_(2.0f); }, {"mul_:", "undefined tensor"});
  // Ops check their inputs before touching them.
  expect_error([&] { u.reshape({1}); }, {"reshape", "undefined"});
  expect_error([&] { u.select(0, 0); }, {"select", "undefined"});
  expect_error([&] { exp(u); }, {"exp", "undefined"});
  expect_error([&] { stack({u}); }, {"stack", "undefined"});
}
