// DistributedDataParallel: buckets of gradients all-reduced from the gradient-ready hooks.
#include "distributed/distributed_data_parallel.h"

#include <algorithm>

#include <fmt/format.h>

#include "autograd/node.h"
#include "core/error.h"
#include "distributed/distributed.h"

namespace loom::nn {

// One round = one backward outside no_sync(): every parameter's gradient arrives once, each
// full bucket is launched in order, and when all are launched they are awaited and copied back.
struct DistributedDataParallel::Reducer {
  struct Bucket {
    std::vector<size_t> params;    // indices into Reducer::params
    std::vector<int64_t> offsets;  // where each one's gradient sits in `flat`
    Tensor flat;                   // the gradients, one after another (float32, 1-D)
    size_t ready = 0;              // how many of them are in `flat` this round
    std::shared_ptr<distributed::Work> work;  // the all-reduce in flight
  };
  distributed::ProcessGroup* group = nullptr;
  std::vector<Tensor> params;
  std::vector<size_t> bucket_of, slot_of;  // per parameter: its bucket and place in it
  std::vector<bool> arrived;               // per parameter, this round
  std::vector<Bucket> buckets;
  size_t next_launch = 0;  // buckets launch in index order on every rank
  size_t arrived_count = 0;
  bool sync = true;

  void on_gradient_ready(size_t i) {
    if (!sync) return;
    LOOM_CHECK(!arrived[i],
               "DistributedDataParallel: parameter {} (shape {}) got a second gradient before "
               "the previous backward's averaging finished: {} parameters got none then; call "
               "synchronize() after a backward that leaves parameters unused",
               i, shape_str(params[i].shape()), params.size() - arrived_count);
    Bucket& b = buckets[bucket_of[i]];
    const Tensor& grad = params[i].grad();
    LOOM_CHECK(grad.device() == b.flat.device(),
               "DistributedDataParallel: a gradient on {} for buckets on {}; move the model to "
               "its device before wrapping it",
               device_name(grad.device()), device_name(b.flat.device()));
    b.flat.narrow(0, b.offsets[slot_of[i]], grad.numel()).copy_(grad.reshape({-1}));
    arrived[i] = true;
    ++arrived_count;
    ++b.ready;
    launch_ready_buckets();
    for (size_t k = 0; k < next_launch; ++k) buckets[k].work->is_completed();  // drive MPI
    if (next_launch == buckets.size()) finish();
  }

  void launch_ready_buckets() {
    while (next_launch < buckets.size() &&
           buckets[next_launch].ready == buckets[next_launch].params.size()) {
      Bucket& b = buckets[next_launch++];
      b.work = group->all_reduce(b.flat, distributed::ReduceOp::Mean);
    }
  }

  // Waits for every bucket and hands each parameter its averaged gradient.
  void finish() {
    for (Bucket& b : buckets) {
      b.work->wait();
      for (size_t s = 0; s < b.params.size(); ++s) {
        const Tensor& p = params[b.params[s]];
        const Tensor averaged = b.flat.narrow(0, b.offsets[s], p.numel()).reshape(p.shape());
        if (p.grad().defined()) p.grad().copy_(averaged);
        else p.set_grad(averaged.clone());
      }
      b.ready = 0;
      b.work.reset();
    }
    arrived.assign(params.size(), false);
    arrived_count = 0;
    next_launch = 0;
  }

  // A round some parameters never joined: their slots count as zero gradients.
  void complete_round() {
    if (arrived_count == 0) return;
    for (size_t i = 0; i < params.size(); ++i) {
      if (arrived[i]) continue;
      Bucket& b = buckets[bucket_of[i]];
      b.flat.narrow(0, b.offsets[slot_of[i]], params[i].numel()).zero_();
      arrived[i] = true;
      ++b.ready;
    }
    launch_ready_buckets();
    finish();
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(register_module("module", std::move(module))),
      reducer_(std::make_shared<Reducer>()) {
  LOOM_CHECK(options.bucket_cap_mb > 0, "DistributedDataParallel: bucket_cap_mb {} must be > 0",
             options.bucket_cap_mb);
  LOOM_CHECK(distributed::is_initialized(),
             "DistributedDataParallel: call distributed::init() before wrapping a model");
  Reducer& r = *reducer_;
  for (const Tensor& p : module_->parameters())
    if (p.requires_grad()) r.params.push_back(p);
  LOOM_CHECK(!r.params.empty(), "DistributedDataParallel: {} has no parameter that requires grad",
             module_->name());
  const Device device = r.params.front().device();
  for (const Tensor& p : r.params)
    LOOM_CHECK(p.device() == device,
               "DistributedDataParallel: parameters on {} and {}; move the model to one device",
               device_name(device), device_name(p.device()));
  // Every replica starts from rank 0's state.
  {
    NoGradGuard no_grad;
    for (Tensor t : module_->parameters()) distributed::broadcast(t, 0);
    for (Tensor t : module_->buffers()) distributed::broadcast(t, 0);
  }
  r.group = &distributed::group(device);
  if (r.group->size() == 1) return;  // nothing to average

  // Buckets of about bucket_cap_mb, filled in reverse order of registration. The first one (the
  // last layers, whose gradients come first) holds at most 1 MB, as in PyTorch, so that
  // communication starts early in backward.
  const auto cap = static_cast<int64_t>(options.bucket_cap_mb * 1024 * 1024);
  const int64_t first_cap = std::min<int64_t>(cap, 1024 * 1024);
  r.bucket_of.resize(r.params.size());
  r.slot_of.resize(r.params.size());
  int64_t bytes = cap;  // start a bucket at the first parameter
  for (size_t i = r.params.size(); i-- > 0;) {
    if (bytes >= (r.buckets.size() == 1 ? first_cap : cap)) {
      r.buckets.emplace_back();
      bytes = 0;
    }
    Reducer::Bucket& b = r.buckets.back();
    r.bucket_of[i] = r.buckets.size() - 1;
    r.slot_of[i] = b.params.size();
    b.offsets.push_back(b.params.empty() ? 0
                                         : b.offsets.back() + r.params[b.params.back()].numel());
    b.params.push_back(i);
    bytes += r.params[i].numel() * static_cast<int64_t>(sizeof(float));
  }
  for (Reducer::Bucket& b : r.buckets)
    b.flat = Tensor::empty({b.offsets.back() + r.params[b.params.back()].numel()},
                           DType::Float32, device);
  r.arrived.assign(r.params.size(), false);

  // The hooks outlive nothing: once this wrapper is gone they find no reducer and do nothing.
  std::weak_ptr<Reducer> weak = reducer_;
  for (size_t i = 0; i < r.params.size(); ++i)
    r.params[i].register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto reducer = weak.lock()) reducer->on_gradient_ready(i);
    });
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::synchronize() {
  if (reducer_->group->size() > 1) reducer_->complete_round();
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_assignment() const {
  std::vector<std::vector<size_t>> out;
  for (const Reducer::Bucket& b : reducer_->buckets) out.push_back(b.params);
  return out;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.reducer_->sync) {
  ddp_.reducer_->sync = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.reducer_->sync = previous_; }

}  // namespace loom::nn
