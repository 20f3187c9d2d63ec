// ProcessGroup's argument checks (once, for every backend) and the group of a one-process job.
#include "distributed/process_group.h"

#include "autograd/node.h"
#include "core/error.h"

namespace loom::distributed {

void ProcessGroup::check_tensor(const char* op, const Tensor& tensor) const {
  LOOM_CHECK(tensor.defined(), "{}: the tensor is undefined", op);
  LOOM_CHECK(tensor.device() == device(),
             "{}: the {} process group takes {} tensors; this one (shape {}) is on {}", op,
             backend_name(), device_name(device()), shape_str(tensor.shape()),
             device_name(tensor.device()));
  LOOM_CHECK(tensor.is_contiguous(), "{}: the tensor of shape {} is not contiguous", op,
             shape_str(tensor.shape()));
  LOOM_CHECK(tensor.dtype() != DType::BFloat16,
             "{}: the tensor of shape {} is bfloat16, which process groups do not reduce yet; "
             "communicate in float32",
             op, shape_str(tensor.shape()));
}

std::shared_ptr<Work> ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", tensor);
  LOOM_CHECK(op != ReduceOp::Mean || tensor.dtype() == DType::Float32,
             "all_reduce: ReduceOp::Mean needs a float32 tensor, got {} (shape {})",
             dtype_name(tensor.dtype()), shape_str(tensor.shape()));
  return all_reduce_impl(tensor, op);
}

std::shared_ptr<Work> ProcessGroup::broadcast(Tensor& tensor, int root) {
  check_tensor("broadcast", tensor);
  LOOM_CHECK(root >= 0 && root < size(), "broadcast: root {} is not a rank of a group of {}", root,
             size());
  return broadcast_impl(tensor, root);
}

std::shared_ptr<Work> ProcessGroup::all_gather(Tensor& out, const Tensor& input) {
  check_tensor("all_gather (input)", input);
  check_tensor("all_gather (output)", out);
  Shape expected{size()};
  expected.insert(expected.end(), input.shape().begin(), input.shape().end());
  LOOM_CHECK(out.shape() == expected && out.dtype() == input.dtype(),
             "all_gather: the output must be {} of shape {} for an input of shape {} on {} "
             "ranks; got {} of shape {}",
             dtype_name(input.dtype()), shape_str(expected), shape_str(input.shape()), size(),
             dtype_name(out.dtype()), shape_str(out.shape()));
  return all_gather_impl(out, input);
}

namespace {

class CompletedWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

// One process: the sum, the mean and rank 0's value of a tensor are the tensor itself.
class LocalGroup final : public ProcessGroup {
 public:
  explicit LocalGroup(Device device) : device_(device) {}
  std::string backend_name() const override { return "local"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return device_; }
  void barrier() override {}

 protected:
  std::shared_ptr<Work> all_reduce_impl(Tensor&, ReduceOp) override { return completed_work(); }
  std::shared_ptr<Work> broadcast_impl(Tensor&, int) override { return completed_work(); }
  std::shared_ptr<Work> all_gather_impl(Tensor& out, const Tensor& input) override {
    NoGradGuard no_grad;
    out.select(0, 0).copy_(input);
    return completed_work();
  }

 private:
  Device device_;
};

}  // namespace

std::shared_ptr<Work> completed_work() { return std::make_shared<CompletedWork>(); }

std::shared_ptr<ProcessGroup> make_local_group(Device device) {
  return std::make_shared<LocalGroup>(device);
}

}  // namespace loom::distributed
