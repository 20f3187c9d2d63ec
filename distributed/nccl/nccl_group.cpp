// The NCCL process group: CUDA tensors, one GPU per process (the CUDA backend's device 0; give
// each process its own GPU with CUDA_VISIBLE_DEVICES, which distributed::init() sets from the
// local rank when the launcher did not). Rank 0 creates the communicator's unique id and the
// bootstrap group (MPI) broadcasts it.
//
// The collectives run on a stream of their own. loom's kernels are queued on the CUDA
// backend's stream, so a collective first waits for them (Backend::synchronize) and its Work
// completes when an event recorded after it has passed.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "backends/backend.h"
#include "core/error.h"
#include "distributed/internal.h"

namespace loom::distributed::detail {

namespace {

void check_nccl(ncclResult_t code, const char* what) {
  LOOM_CHECK(code == ncclSuccess, "distributed (nccl): {} failed: {}", what,
             ncclGetErrorString(code));
}
void check_cuda(cudaError_t code, const char* what) {
  LOOM_CHECK(code == cudaSuccess, "distributed (nccl): {} failed: {}", what,
             cudaGetErrorString(code));
}

ncclDataType_t nccl_type(DType dtype) { return dtype == DType::Float32 ? ncclFloat32 : ncclInt64; }

// A collective queued on the group's stream; complete when `event_` has passed.
class NcclWork final : public Work {
 public:
  NcclWork(const char* op, Tensor result, Tensor input, cudaStream_t stream)
      : op_(op), result_(std::move(result)), input_(std::move(input)) {
    check_cuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(event_, stream), "cudaEventRecord");
  }
  ~NcclWork() override { cudaEventDestroy(event_); }

  bool is_completed() override {
    if (!done_) {
      const cudaError_t state = cudaEventQuery(event_);
      if (state != cudaErrorNotReady) {
        check_cuda(state, op_);
        finish();
      }
    }
    return done_;
  }
  void wait() override {
    for (int polls = 0; !is_completed(); ++polls) {
      watch_peers(op_);  // a peer that ended will never join
      if (polls > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  void finish() {
    done_ = true;
    result_.impl()->bump_version();  // NCCL changed the data behind autograd's back
    input_ = Tensor();
  }
  const char* op_;
  Tensor result_, input_;
  cudaEvent_t event_ = nullptr;
  bool done_ = false;
};

class NcclGroup final : public ProcessGroup {
 public:
  explicit NcclGroup(ProcessGroup& bootstrap) : rank_(bootstrap.rank()), size_(bootstrap.size()) {
    ncclUniqueId id;
    static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
    Tensor bytes = Tensor::empty({static_cast<int64_t>(sizeof(id) / sizeof(int64_t))},
                                 DType::Int64, Device::CPU);
    if (rank_ == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::memcpy(bytes.raw_data(), &id, sizeof(id));
    }
    bootstrap.broadcast(bytes, 0)->wait();
    std::memcpy(&id, bytes.raw_data(), sizeof(id));
    backend(Device::CUDA).synchronize();  // creates the CUDA backend (device 0) first
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }
  ~NcclGroup() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  std::string backend_name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::CUDA; }

  void barrier() override {  // NCCL has none: an all-reduce of one number is one
    Tensor one = Tensor::empty({1}, DType::Float32, Device::CUDA);
    one.zero_();
    all_reduce_impl(one, ReduceOp::Sum)->wait();
  }

 protected:
  std::shared_ptr<Work> all_reduce_impl(Tensor& tensor, ReduceOp op) override {
    backend(Device::CUDA).synchronize();  // the kernels that wrote `tensor` are done
    check_nccl(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), count(tensor),
                             nccl_type(tensor.dtype()), op == ReduceOp::Mean ? ncclAvg : ncclSum,
                             comm_, stream_),
               "ncclAllReduce");
    return std::make_shared<NcclWork>("all_reduce", tensor, Tensor(), stream_);
  }
  std::shared_ptr<Work> broadcast_impl(Tensor& tensor, int root) override {
    backend(Device::CUDA).synchronize();
    check_nccl(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), count(tensor),
                             nccl_type(tensor.dtype()), root, comm_, stream_),
               "ncclBroadcast");
    return std::make_shared<NcclWork>("broadcast", tensor, Tensor(), stream_);
  }
  std::shared_ptr<Work> all_gather_impl(Tensor& out, const Tensor& input) override {
    backend(Device::CUDA).synchronize();
    check_nccl(ncclAllGather(input.raw_data(), out.raw_data(), count(input),
                             nccl_type(input.dtype()), comm_, stream_),
               "ncclAllGather");
    return std::make_shared<NcclWork>("all_gather", out, input, stream_);
  }

 private:
  static size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }
  int rank_, size_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_group(ProcessGroup& bootstrap) {
  return std::make_shared<NcclGroup>(bootstrap);
}

}  // namespace loom::distributed::detail
