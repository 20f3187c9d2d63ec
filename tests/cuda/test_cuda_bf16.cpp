// bfloat16 on CUDA, as far as it goes today: tensors move to the GPU and back bit for bit, and
// every kernel refuses them with a loom::Error naming the op, the dtype and the device (the
// CUDA conversion and cublasGemmEx kernels are still to come; autograd/ops.h, "bfloat16").
// Without a GPU the cases return at once (test_cuda.cpp's first case reports that once).
#include <cstring>
#include <vector>

#include "test_util.h"

using namespace loom;
using namespace loom::testing;

TEST_CASE("bfloat16 tensors move to CUDA and back bit for bit") {
  LOOM_REQUIRE_GPU();
  const Tensor b = randn({5, 7}).to(DType::BFloat16);
  const Tensor back = b.to(Device::CUDA).to(Device::CPU);
  REQUIRE(back.dtype() == DType::BFloat16);
  CHECK(std::memcmp(back.raw_data(), b.raw_data(), 5 * 7 * 2) == 0);
  // A strided view is made contiguous on the CPU before it moves.
  CHECK(b.t().to(Device::CUDA).to(Device::CPU).to_vector() == b.t().contiguous().to_vector());
}

TEST_CASE("CUDA kernels refuse bfloat16 tensors, naming the op, the dtype and the device") {
  LOOM_REQUIRE_GPU();
  const Tensor g = ones({2, 3}, DType::BFloat16).to(Device::CUDA);
  expect_error([&] { g.to(DType::Float32); }, {"copy", "bfloat16", "cuda"});
  expect_error([&] { g + g; }, {"copy", "bfloat16", "cuda"});
  expect_error([&] { zeros({2}, DType::BFloat16, Device::CUDA); }, {"fill", "bfloat16", "cuda"});
  expect_error([&] { ones({2, 3}, Device::CUDA).to(DType::BFloat16); }, {"copy", "bfloat16"});
}
