// loom::distributed's collectives on every rank of the job (2 under ctest's mpirun, or 1):
// each rank contributes values built from its rank, so the expected results are known.
#include <doctest/doctest.h>

#include <cstdlib>
#include <vector>

#include "loom.h"
#include "test_util.h"

using namespace loom;
namespace dist = loom::distributed;

namespace {
// rank r's contribution: r * 100 + 0, 1, 2, ... in the given shape.
Tensor rank_values(const Shape& shape, DType dtype) {
  Tensor t = arange_f(0.0f, static_cast<float>(shape_numel(shape))).reshape(shape) +
             static_cast<float>(dist::rank() * 100);
  return dtype == DType::Float32 ? t.contiguous() : t.to(DType::Int64);
}
// The sum over ranks of rank_values, elementwise: W * i + 100 * W(W-1)/2.
std::vector<float> expected_sum(int64_t n) {
  const int w = dist::world_size();
  std::vector<float> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<float>(w * i + 100 * w * (w - 1) / 2));
  return out;
}
const std::vector<Shape> kShapes = {{1}, {7}, {3, 5}, {2, 3, 4}, {1000, 33}};
}  // namespace

TEST_CASE("the job has the ranks the launcher started") {
  const dist::LaunchInfo env = dist::launch_info_from_env();
  CHECK(dist::is_initialized());
  CHECK(dist::world_size() == env.world_size);
  CHECK(dist::rank() == env.rank);
  CHECK(dist::rank() < dist::world_size());
  CHECK(dist::local_rank() <= dist::rank());  // one machine: local rank == rank
  CHECK(dist::is_main_process() == (dist::rank() == 0));
  CHECK(dist::group().size() == dist::world_size());
  CHECK(dist::group().backend_name() == (dist::world_size() > 1 ? "mpi" : "local"));
}

TEST_CASE("all_reduce sums and averages float32 and int64 tensors of several shapes in place") {
  for (const Shape& shape : kShapes) {
    CAPTURE(shape_str(shape));
    const std::vector<float> sum = expected_sum(shape_numel(shape));
    Tensor f = rank_values(shape, DType::Float32);
    dist::all_reduce(f);
    CHECK(f.shape() == shape);
    CHECK(f.to_vector() == sum);
    Tensor i = rank_values(shape, DType::Int64);
    dist::all_reduce(i, dist::ReduceOp::Sum);
    CHECK(i.dtype() == DType::Int64);
    CHECK(i.to_vector() == sum);
    Tensor m = rank_values(shape, DType::Float32);
    dist::all_reduce(m, dist::ReduceOp::Mean);
    std::vector<float> mean = sum;
    for (float& v : mean) v /= static_cast<float>(dist::world_size());
    testing::check_close(m, tensor(mean, shape), 1e-6f, 1e-6f, "mean");
  }
}

TEST_CASE("all_reduce of a non-contiguous view writes through to the viewed tensor") {
  Tensor base = rank_values({4, 3}, DType::Float32);
  Tensor view = base.t();  // (3, 4), not contiguous
  dist::all_reduce(view);
  CHECK(base.to_vector() == expected_sum(12));
}

TEST_CASE("all_reduce bumps the version counter, so stale saved tensors are caught") {
  Tensor t = rank_values({3}, DType::Float32);
  const uint64_t before = t.version();
  dist::all_reduce(t);
  if (dist::world_size() > 1) CHECK(t.version() > before);
  else CHECK(t.version() == before);  // a job of one leaves the data as it is
}

TEST_CASE("broadcast gives every rank the root's tensor, from any root") {
  for (int root = 0; root < dist::world_size(); ++root) {
    for (const Shape& shape : kShapes) {
      Tensor f = rank_values(shape, DType::Float32);
      dist::broadcast(f, root);
      std::vector<float> expected;
      for (int64_t i = 0; i < shape_numel(shape); ++i)
        expected.push_back(static_cast<float>(root * 100 + i));
      CHECK(f.to_vector() == expected);
      Tensor i = rank_values(shape, DType::Int64);
      dist::broadcast(i, root);
      CHECK(i.to_vector() == expected);
    }
  }
}

TEST_CASE("all_gather returns every rank's tensor in rank order") {
  for (const Shape& shape : kShapes) {
    for (DType dtype : {DType::Float32, DType::Int64}) {
      const std::vector<Tensor> parts = dist::all_gather(rank_values(shape, dtype));
      CHECK(parts.size() == static_cast<size_t>(dist::world_size()));
      for (int r = 0; r < static_cast<int>(parts.size()); ++r) {
        CHECK(parts[static_cast<size_t>(r)].shape() == shape);
        CHECK(parts[static_cast<size_t>(r)].dtype() == dtype);
        CHECK(parts[static_cast<size_t>(r)].to_vector()[0] == static_cast<float>(r * 100));
      }
    }
  }
}

TEST_CASE("asynchronous all_reduces complete in any order of waiting") {
  dist::ProcessGroup& g = dist::group();
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<dist::Work>> works;
  for (int k = 0; k < 4; ++k) {
    ts.push_back(rank_values({256 * (k + 1)}, DType::Float32));
    works.push_back(g.all_reduce(ts.back(), dist::ReduceOp::Sum));
  }
  for (int k = 3; k >= 0; --k) works[static_cast<size_t>(k)]->wait();
  for (int k = 0; k < 4; ++k) CHECK(ts[static_cast<size_t>(k)].to_vector() == expected_sum(256 * (k + 1)));
  for (auto& w : works) CHECK(w->is_completed());
}

TEST_CASE("barrier returns on every rank") {
  for (int k = 0; k < 3; ++k) CHECK_NOTHROW(dist::barrier());
  Tensor one = ones({1});
  dist::all_reduce(one);  // every rank got past the barriers and still takes part
  CHECK(one.item() == static_cast<float>(dist::world_size()));
}

TEST_CASE("collectives reject tensors they cannot take, naming the op") {
  Tensor undefined;
  CHECK_THROWS_WITH_AS(dist::all_reduce(undefined), doctest::Contains("all_reduce"), Error);
  Tensor ids = tensor_i64({1, 2}, {2});
  CHECK_THROWS_WITH_AS(dist::group().all_reduce(ids, dist::ReduceOp::Mean),
                       doctest::Contains("Mean needs a float32 tensor"), Error);
  Tensor f = zeros({2});
  CHECK_THROWS_WITH_AS(dist::group().broadcast(f, dist::world_size()),
                       doctest::Contains("root"), Error);
  Tensor wrong = zeros({3});
  CHECK_THROWS_WITH_AS(dist::group().all_gather(wrong, f), doctest::Contains("all_gather"), Error);
  Tensor strided = zeros({4, 4}).t();
  CHECK_THROWS_WITH_AS(dist::group().all_reduce(strided), doctest::Contains("not contiguous"),
                       Error);
}

// NCCL with one rank (a communicator of one GPU): runs when this is a job of one on a machine
// with a GPU and loom was built with NCCL; the 2-rank form needs a machine with 2 GPUs.
TEST_CASE("nccl: a one-rank group reduces, broadcasts and gathers CUDA tensors") {
  if (dist::world_size() != 1 || !dist::is_nccl_available() || !cuda_available()) {
    MESSAGE("skipped: needs a job of one, a GPU and loom built with NCCL");
    return;
  }
  std::shared_ptr<dist::ProcessGroup> nccl = dist::new_nccl_group();
  CHECK(nccl->backend_name() == "nccl");
  Tensor t = (arange_f(1.0f, 7.0f).reshape({2, 3})).cuda();
  nccl->all_reduce(t, dist::ReduceOp::Sum)->wait();
  CHECK(t.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  nccl->all_reduce(t, dist::ReduceOp::Mean)->wait();
  CHECK(t.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor ids = tensor_i64({5, 6, 7}, {3}).cuda();
  nccl->broadcast(ids, 0)->wait();
  CHECK(ids.to_vector_i64() == std::vector<int64_t>{5, 6, 7});
  Tensor gathered = Tensor::empty({1, 3}, DType::Int64, Device::CUDA);
  nccl->all_gather(gathered, ids)->wait();
  CHECK(gathered.to_vector_i64() == std::vector<int64_t>{5, 6, 7});
  nccl->barrier();
}
