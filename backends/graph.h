// Recording GPU work once and replaying it with one launch: CUDA graphs, as torch.cuda.CUDAGraph.
//
// Decoding one token of a small model is a few hundred small kernels. Launched one by one, they
// cost the host more time than the GPU spends running them, so the GPU waits for the host. A
// graph records the launches once; each replay then runs all of them with one call:
//
//   CudaGraph graph;
//   graph.capture([&] { out.copy_(step(input)); });  // records the kernels; nothing runs yet
//   for (...) {
//     input.copy_(next_input);  // (a device-to-device copy, or a kernel that wrote input)
//     graph.replay();           // runs the recorded kernels: out now holds step(input)
//   }
//
// What a replay repeats is exactly what the capture recorded: the same kernels with the same
// arguments, on the same addresses. So
//   * shapes, and every value the host passes to a kernel (a scalar, a position, a seed), are
//     fixed at capture: what changes between replays must live in device memory (a tensor the
//     recorded work reads, updated in place, or advanced by the recorded work itself);
//   * tensors the recorded work reads or writes must stay alive while the graph is used;
//     tensors created during the capture live in the graph's own memory pool, which nothing
//     else is given while the graph exists, so results may be read from them after a replay;
//   * nothing inside the capture may wait for the GPU: .item(), .to(Device::CPU), a copy from
//     the host or synchronize() throw loom::Error (and the capture is dropped);
//   * the capture itself runs no kernel: tensors it writes hold their values after replay().
// Errors that kernels find (an index out of range) are reported at the first wait after the
// replay that met them, as for any other GPU work.
#pragma once

#include <functional>
#include <memory>

#include "core/tensor.h"

namespace loom {

class DeviceGraph;  // backends/backend.h

class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(CudaGraph&&) noexcept;
  CudaGraph& operator=(CudaGraph&&) noexcept;

  // Runs `work` on the host while recording the GPU work it queues on `device` (CUDA). A
  // graph captured before is dropped first. If `work` throws, the capture is dropped and the
  // exception passes on; a device that cannot record (the CPU, a build without CUDA) is a
  // loom::Error.
  void capture(const std::function<void()>& work, Device device = Device::CUDA);
  // Runs the recorded work (queued on the device's stream, like any kernel). loom::Error when
  // nothing was captured.
  void replay();
  bool captured() const { return graph_ != nullptr; }
  // Drops the recording; the graph's memory is released once no tensor holds any of it.
  void reset();

 private:
  std::unique_ptr<DeviceGraph> graph_;
};

}  // namespace loom
