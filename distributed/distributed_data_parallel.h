// nn::DistributedDataParallel: data parallelism across processes, as PyTorch's
// torch.nn.parallel.DistributedDataParallel. Every process holds a replica of the model and
// trains it on its own part of each batch; after backward every replica holds the gradient
// averaged over all processes, so the optimizer steps keep the replicas identical.
//
//   distributed::init();
//   auto model = std::make_shared<models::GPT>(config);
//   nn::DistributedDataParallel ddp(model);     // rank 0's weights broadcast to every rank
//   ...
//   Tensor loss = cross_entropy(model->forward(x), y);   // x: this rank's part of the batch
//   loss.backward();                                     // gradients averaged meanwhile
//   opt.step();
//
// How (Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel
// Training", section 3.2): the parameters are grouped into buckets of about bucket_cap_mb (the
// first one 1 MB at most), in reverse order of registration (roughly the order backward
// produces their gradients). A hook on every parameter
// (Tensor::register_post_accumulate_grad_hook) copies its gradient into its bucket as soon as
// the gradient is complete; a full bucket is all-reduced at once, asynchronously
// (MPI_Iallreduce / NCCL), while backward goes on computing the gradients of the earlier
// layers. When the last bucket has been launched, the hook waits for all of them
// and writes the averaged gradients back into each parameter's .grad, so backward returns
// with the averaged gradients. Buckets are launched in the same order on every rank.
//
// Conventions:
//   * The loss is each rank's own mean: averaging gradients over R ranks of batch B each gives
//     the gradient of the mean loss over the R*B examples, as one process with batch R*B.
//   * Under no_sync() the hooks do nothing: gradients accumulate locally, and the first
//     backward outside it averages the accumulated sums (gradient accumulation).
//   * A parameter that gets no gradient in a backward (a layer this batch skipped) keeps its
//     bucket from completing: call synchronize() after such a backward, which reduces what is
//     left with zeros for the missing gradients. Otherwise the next backward refuses to start.
//   * Buffers (BatchNorm statistics) are broadcast from rank 0 at construction only.
//   * In a job of one process nothing is registered: the wrapper costs nothing.
//   * Wrap the model once it is on its device (model->to(device) first): the buckets live there.
#pragma once

#include <memory>

#include "nn/module.h"

namespace loom::nn {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25.0;  // PyTorch's default bucket size
};

class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  std::string name() const override { return "DistributedDataParallel"; }
  // The wrapped model (registered as the child "module", so names read "module.<name>" as in
  // PyTorch's DDP state_dict; checkpoints usually save module() itself).
  const std::shared_ptr<Module>& module() const { return module_; }

  // RAII: while it lives, backward accumulates gradients without averaging them.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // Finishes a backward's averaging if some parameters got no gradient (see above); a no-op
  // when backward already averaged everything.
  void synchronize();

  // The buckets, each a list of indices into module()->parameters() (for tests and reports).
  std::vector<std::vector<size_t>> bucket_assignment() const;

  struct Reducer;  // the bucket state the hooks share (distributed_data_parallel.cpp)

 private:
  std::shared_ptr<Module> module_;
  std::shared_ptr<Reducer> reducer_;
};

}  // namespace loom::nn
