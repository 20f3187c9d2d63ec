// ProcessGroup: the processes of a data-parallel job and the collectives they run together,
// after torch.distributed's c10d::ProcessGroup. Three implementations:
//   * "local": a job of one process (no launcher, no MPI): every collective is the identity;
//   * "mpi":   OpenMPI (distributed/mpi/), CPU tensors;
//   * "nccl":  NCCL (distributed/nccl/), CUDA tensors, one GPU per process.
//
// Conventions:
//   * Every rank calls the same collectives in the same order with tensors of the same shape
//     and dtype (float32 or int64); tensors are contiguous and on the group's device. The
//     public methods check what one process can see and throw loom::Error naming the op.
//   * Collectives work in place and may be asynchronous: they return a Work whose wait()
//     blocks until the tensor holds the result (PyTorch's async_op=True). The tensor must stay
//     untouched until then; the Work keeps it alive.
//   * ReduceOp::Mean is the sum divided by the number of processes (float32 only).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loom::distributed {

enum class ReduceOp { Sum, Mean };

// A collective in flight (c10d::Work).
class Work {
 public:
  virtual ~Work() = default;
  // Drives the communication forward without blocking; true once the result is in place.
  virtual bool is_completed() = 0;
  // Blocks until the result is in place.
  virtual void wait() = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  virtual std::string backend_name() const = 0;  // "local", "mpi" or "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Device device() const = 0;  // where its tensors live

  // Every rank's `tensor` becomes the elementwise sum (or mean) over the ranks.
  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // Every rank's `tensor` becomes rank `root`'s.
  std::shared_ptr<Work> broadcast(Tensor& tensor, int root = 0);
  // out (shape [size(), ...input's shape]) receives every rank's `input`, in rank order.
  std::shared_ptr<Work> all_gather(Tensor& out, const Tensor& input);
  // Returns once every rank has called barrier().
  virtual void barrier() = 0;

 protected:
  // Called with arguments already checked.
  virtual std::shared_ptr<Work> all_reduce_impl(Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast_impl(Tensor& tensor, int root) = 0;
  virtual std::shared_ptr<Work> all_gather_impl(Tensor& out, const Tensor& input) = 0;

 private:
  void check_tensor(const char* op, const Tensor& tensor) const;
};

// A Work that is already complete (the local group's, and the fallback of the others).
std::shared_ptr<Work> completed_work();

// The group of a job of one process, for tensors on `device`.
std::shared_ptr<ProcessGroup> make_local_group(Device device = Device::CPU);

}  // namespace loom::distributed
