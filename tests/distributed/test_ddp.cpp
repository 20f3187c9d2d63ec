// nn::DistributedDataParallel on every rank of the job (2 under ctest's mpirun, or 1): R ranks
// at batch B must train exactly what one process at batch R*B trains. Every rank computes that
// one-process reference itself (the whole batch is made from a fixed seed), so the comparison
// needs no communication.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "loom.h"
#include "test_util.h"

using namespace loom;
namespace dist = loom::distributed;

namespace {

struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, unused;
  explicit MLP(bool with_unused = false) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 16));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
    if (with_unused) unused = register_module("unused", std::make_shared<nn::Linear>(3, 3));
  }
  Tensor forward(const Tensor& x) const { return fc2->forward(tanh(fc1->forward(x))); }
};

std::shared_ptr<MLP> make_mlp(uint64_t seed, bool with_unused = false) {
  manual_seed(seed);
  return std::make_shared<MLP>(with_unused);
}

constexpr int64_t kB = 4;  // examples per rank

struct GlobalBatch {
  Tensor x, y;  // (R*B, 4), (R*B, 3)
  // This rank's rows.
  Tensor x_part() const { return x.narrow(0, dist::rank() * kB, kB).contiguous(); }
  Tensor y_part() const { return y.narrow(0, dist::rank() * kB, kB).contiguous(); }
};
GlobalBatch global_batch(uint64_t seed) {
  manual_seed(seed);
  const int64_t n = kB * dist::world_size();
  return {randn({n, 4}), randn({n, 3})};
}

Tensor loss_of(const MLP& model, const Tensor& x, const Tensor& y) {
  return nn::functional::mse_loss(model.forward(x), y);
}

void check_same_parameters(const nn::Module& a, const nn::Module& b, float rtol, float atol) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  CHECK(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size() && i < pb.size(); ++i)
    testing::check_close(pa[i].second, pb[i].second, rtol, atol, pa[i].first);
}

// K AdamW steps with DDP at batch B per rank vs one process (on the CPU) at batch R*B.
void train_and_compare(double bucket_cap_mb, Device device = Device::CPU) {
  auto reference = make_mlp(1);
  auto model = make_mlp(1 + static_cast<uint64_t>(dist::rank()));  // rank 0's weights must win
  model->to(device);
  nn::DistributedDataParallel ddp(model, {bucket_cap_mb});
  check_same_parameters(*model, *reference, 0, 0);  // broadcast at construction
  optim::AdamW ref_opt(reference->parameters(), 1e-2f), opt(model->parameters(), 1e-2f);
  for (int step = 0; step < 5; ++step) {
    const GlobalBatch batch = global_batch(100 + static_cast<uint64_t>(step));
    ref_opt.zero_grad();
    loss_of(*reference, batch.x, batch.y).backward();
    ref_opt.step();
    opt.zero_grad();
    // averaged within backward
    loss_of(*model, batch.x_part().to(device), batch.y_part().to(device)).backward();
    opt.step();
  }
  check_same_parameters(*model, *reference, device == Device::CPU ? 1e-4f : 1e-3f, 1e-5f);
}

// Whether every rank sees a GPU: decided together, so that all ranks run a CUDA case or none.
bool every_rank_has_gpu() {
  Tensor count = tensor_i64({cuda_available() ? 1 : 0}, {1});
  dist::all_reduce(count);
  return count.to_vector_i64()[0] == dist::world_size();
}

}  // namespace

TEST_CASE("DDP over R ranks at batch B trains the weights of one process at batch R*B (AdamW)") {
  SUBCASE("one 25 MB bucket") { train_and_compare(25.0); }
  SUBCASE("a bucket per parameter or two") { train_and_compare(0.0002); }
}

TEST_CASE("DDP buckets hold the parameters in reverse order, each about bucket_cap_mb") {
  auto model = make_mlp(1);
  // fc2's weight is 16*3*4 = 192 bytes; a cap of 200 bytes closes a bucket after 200 or more.
  nn::DistributedDataParallel ddp(model, {200.0 / (1024 * 1024)});
  const auto buckets = ddp.bucket_assignment();
  if (dist::world_size() == 1) {
    CHECK(buckets.empty());  // a job of one registers nothing
    return;
  }
  // parameters(): fc1.weight (256 B), fc1.bias (64 B), fc2.weight (192 B), fc2.bias (12 B)
  CHECK(buckets == std::vector<std::vector<size_t>>{{3, 2}, {1, 0}});
}

TEST_CASE("DDP no_sync accumulates locally; the next backward averages the accumulated sums") {
  auto reference = make_mlp(1), model = make_mlp(1);
  nn::DistributedDataParallel ddp(model);
  const GlobalBatch m0 = global_batch(7), m1 = global_batch(8);
  loss_of(*reference, m0.x, m0.y).backward();
  loss_of(*reference, m1.x, m1.y).backward();
  {
    auto no_sync = ddp.no_sync();
    loss_of(*model, m0.x_part(), m0.y_part()).backward();
    // Not averaged: each rank holds the gradient of its own rows.
    auto local = make_mlp(1);
    loss_of(*local, m0.x_part(), m0.y_part()).backward();
    testing::check_close(model->fc1->weight.grad(), local->fc1->weight.grad(), 1e-6f, 1e-7f,
                         "local gradient under no_sync");
  }
  loss_of(*model, m1.x_part(), m1.y_part()).backward();
  for (size_t i = 0; i < model->parameters().size(); ++i)
    testing::check_close(model->parameters()[i].grad(), reference->parameters()[i].grad(), 1e-5f,
                         1e-6f, "accumulated and averaged");
}

TEST_CASE("DDP synchronize() finishes a backward that left a parameter without gradient") {
  auto reference = make_mlp(1, true), model = make_mlp(1, true);
  nn::DistributedDataParallel ddp(model, {0.0002});
  const GlobalBatch batch = global_batch(9);
  loss_of(*reference, batch.x, batch.y).backward();
  loss_of(*model, batch.x_part(), batch.y_part()).backward();  // `unused` gets nothing
  ddp.synchronize();
  testing::check_close(model->fc1->weight.grad(), reference->fc1->weight.grad(), 1e-5f, 1e-6f,
                       "fc1");
  if (dist::world_size() > 1)
    CHECK(model->unused->weight.grad().to_vector() == std::vector<float>(9, 0.0f));
  ddp.synchronize();  // nothing left: a no-op
  // The next round starts clean.
  loss_of(*model, batch.x_part(), batch.y_part()).backward();
  CHECK_NOTHROW(ddp.synchronize());
}

TEST_CASE("DDP refuses a backward while the previous one left parameters without gradient") {
  auto model = make_mlp(1, true);
  nn::DistributedDataParallel ddp(model);
  const GlobalBatch batch = global_batch(10);
  loss_of(*model, batch.x_part(), batch.y_part()).backward();  // `unused` gets nothing
  if (dist::world_size() == 1) return;  // a job of one averages nothing, so nothing is pending
  // Every rank throws at the same parameter (the first hook of the backward), so they agree.
  CHECK_THROWS_WITH_AS(loss_of(*model, batch.x_part(), batch.y_part()).backward(),
                       doctest::Contains("call synchronize()"), Error);
  ddp.synchronize();  // finishes the first round; the job goes on
  CHECK(model->unused->weight.grad().defined());
}

TEST_CASE("DDP names the wrapped module's parameters as PyTorch does and checks its arguments") {
  auto model = make_mlp(1);
  nn::DistributedDataParallel ddp(model);
  CHECK(ddp.named_parameters().front().first == "module.fc1.weight");
  CHECK(ddp.module() == model);
  CHECK_THROWS_WITH_AS(nn::DistributedDataParallel(model, {0.0}),
                       doctest::Contains("bucket_cap_mb"), Error);
}

// On a machine with a GPU per rank (NCCL among the ranks; a job of one needs no NCCL).
TEST_CASE("DDP on CUDA tensors trains the weights of one process at batch R*B") {
  if (!every_rank_has_gpu() || (dist::world_size() > 1 && !dist::is_nccl_available())) {
    MESSAGE("skipped: needs a GPU on every rank (and NCCL with several ranks)");
    return;
  }
  train_and_compare(0.0002, Device::CUDA);
}
