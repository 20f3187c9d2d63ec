// The image transforms of data/transforms.h on CUDA tensors: each computes on the host and
// returns its result on the input's device, equal bit for bit to the CPU result (the same loops
// and, for the random ones, the same draws); and a DataLoader batch moved to the GPU trains as
// on the CPU. Without a GPU the cases return at once (test_cuda.cpp's first case reports that).
#include <vector>

#include "test_util.h"

using namespace loom;
namespace T = loom::data::transforms;

TEST_CASE("cuda: data transforms give the CPU's result on the input's device") {
  LOOM_REQUIRE_GPU();
  manual_seed(5);
  const Tensor batch = rand({4, 3, 9, 7});
  const Tensor pixels = randint(0, 256, {3, 9, 7});
  const std::vector<T::Transform> cases = {
      T::Normalize({0.1f, 0.2f, 0.3f}, {0.5f, 0.6f, 0.7f}), T::Resize({5, 11}), T::Resize(4),
      T::RandomCrop(7, 2, -1.0f), T::RandomHorizontalFlip(),
      T::Compose({T::RandomCrop({9, 7}, 1), T::RandomHorizontalFlip(), T::Resize({8, 8})})};
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("transform " << i);
    Tensor cpu, gpu;
    {
      T::RngScope scope(100 + i);
      cpu = cases[i](batch);
    }
    {
      T::RngScope scope(100 + i);
      gpu = cases[i](batch.to(Device::CUDA));
    }
    CHECK(gpu.device() == Device::CUDA);
    CHECK(gpu.to(Device::CPU).to_vector() == cpu.to_vector());
  }
  const Tensor f = T::ToFloat()(pixels.to(Device::CUDA));
  CHECK(f.device() == Device::CUDA);
  CHECK(f.to(Device::CPU).to_vector() == T::ToFloat()(pixels).to_vector());
}
