// Tensor core: creation, inspection, views sharing storage, broadcasting, RNG, printing.
#include <sstream>

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
  manual_seed(42);
  const std::vector<float> a = randn({1000}).to_vector();
  const std::vector<float> u = rand({1000}).to_vector();
  const int threads = get_num_threads();
  set_num_threads(1);
  manual_seed(42);
  const std::vector<float> b = randn({1000}).to_vector();
  set_num_threads(threads);
  CHECK(a == b);
  CHECK(randn({1000}).to_vector() != a);  // the stream moves on
  double m = 0, v = 0;
  for (float x : a) m += x;
  m /= a.size();
  for (float x : a) v += (x - m) * (x - m);
  v /= a.size();
  CHECK(std::fabs(m) < 0.1);        // N(0,1): mean within ~3 standard errors
  CHECK(std::fabs(v - 1.0) < 0.15);
  for (float x : u) CHECK((x >= 0.0f && x < 1.0f));
  Tensor r = randint(3, 7, {200});
  for (int64_t x : r.to_vector_i64()) CHECK((x >= 3 && x < 7));
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
  CHECK(r.impl()->storage == base.impl()->storage);
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
  CHECK(c.impl()->storage != base.impl()->storage);
  CHECK(tr.reshape({6}).to_vector() == std::vector<float>{0, 9, 1, 9, 2, 9});
  CHECK(base.flatten().shape() == Shape{6});
  CHECK(zeros({2, 3, 4}).flatten(1).shape() == Shape{2, 12});
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
