// Chapter 13 (docs/learn/13-faster-and-wider.md): what data parallelism hooks into backward.
// A 4-layer MLP's parameters are grouped into buckets as nn::DistributedDataParallel groups them
// (reverse order, here with a 2 KB cap instead of 25 MB); a gradient-ready hook on every
// parameter prints when backward completes its gradient, and when a bucket is complete (where
// DDP launches its all-reduce). Runs as one process, or under mpirun, where DDP averages the
// gradients and every rank checks that it holds the same ones.
//   learn_13_ddp                                   a job of one
//   mpirun -np 2 build/examples/learn/learn_13_ddp  two ranks (as root: --allow-run-as-root)
#include <cstdio>
#include <string>

#include "examples/learn/learn.h"
#include "loom.h"
using namespace loom;

namespace {
struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3, fc4;
  MLP() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(8, 32));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 32));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(32, 32));
    fc4 = register_module("fc4", std::make_shared<nn::Linear>(32, 2));
  }
  Tensor forward(const Tensor& x) const {
    return fc4->forward(relu(fc3->forward(relu(fc2->forward(relu(fc1->forward(x)))))));
  }
};
}  // namespace

int main(int argc, char** argv) try {
  learn::parse_args(argc, argv,
                    "Chapter 13 (docs/learn/13-faster-and-wider.md): gradient-ready hooks and "
                    "DDP's buckets, as one process or under mpirun.");
  distributed::init();  // a job of one without a launcher: no MPI call at all
  const int rank = distributed::rank(), world = distributed::world_size();
  manual_seed(0);
  auto model = std::make_shared<MLP>();
  const nn::NamedTensors params = model->named_parameters();
  const double cap_mb = 2.0 / 1024;  // 2 KB

  // DDP's rule (distributed/distributed_data_parallel.cpp): walk the parameters backwards, start
  // a new bucket once the current one holds cap bytes or more.
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> bucket_of(params.size());
  int64_t bytes = 1 << 30;
  for (size_t i = params.size(); i-- > 0;) {
    if (bytes >= static_cast<int64_t>(cap_mb * 1024 * 1024)) buckets.emplace_back(), bytes = 0;
    buckets.back().push_back(i);
    bucket_of[i] = buckets.size() - 1;
    bytes += params[i].second.numel() * 4;
  }
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = cap_mb});  // rank 0's weights
  const bool same_buckets = world == 1 || ddp.bucket_assignment() == buckets;

  std::vector<size_t> ready(buckets.size(), 0), completed;
  int fired = 0;
  for (size_t i = 0; i < params.size(); ++i)
    params[i].second.register_post_accumulate_grad_hook([&, i](const Tensor& p) {
      const size_t b = bucket_of[i];
      ++fired;
      if (rank == 0)
        std::printf("  grad ready: %-11s %-8s -> bucket %zu (%zu of %zu)\n",
                    params[i].first.c_str(), shape_str(p.shape()).c_str(), b, ++ready[b],
                    buckets[b].size());
      else
        ++ready[b];
      if (ready[b] == buckets[b].size()) {
        completed.push_back(b);
        if (rank == 0) std::printf("  bucket %zu complete: its all-reduce starts now\n", b);
      }
    });

  manual_seed(1 + rank);  // every rank its own part of the batch
  const Tensor x = randn({16, 8}), y = randn({16, 2});
  const Tensor loss = nn::functional::mse_loss(model->forward(x), y);
  if (rank == 0) std::printf("%d process(es); loss.backward():\n", world);
  loss.backward();

  // Under mpirun every rank must now hold the same (averaged) gradient.
  float spread = 0.0f;
  for (const auto& [name, p] : params) {
    const std::vector<Tensor> all = distributed::all_gather(p.grad());
    for (const Tensor& g : all) spread = std::max(spread, max(abs(g - all[0])).item());
  }
  if (rank == 0)
    std::printf(
        "backward returned; %d hooks fired; buckets completed in order %s; DDP's buckets "
        "%s; largest gradient difference between ranks %g\n",
        fired, completed == std::vector<size_t>{0, 1, 2} ? "0 1 2" : "(not 0 1 2)",
        world == 1     ? "(none in a job of one)"
        : same_buckets ? "the same"
                       : "different",
        spread);
  const bool ok = fired == static_cast<int>(params.size()) && same_buckets && spread == 0.0f &&
                  completed == std::vector<size_t>{0, 1, 2};
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  return learn::fail(e);
}
