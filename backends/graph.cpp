// CudaGraph: a capture on the device's backend (Backend::begin_capture / end_capture).
#include "backends/graph.h"

#include "backends/backend.h"
#include "core/error.h"

namespace loom {

CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;
CudaGraph::CudaGraph(CudaGraph&&) noexcept = default;
CudaGraph& CudaGraph::operator=(CudaGraph&&) noexcept = default;

void CudaGraph::capture(const std::function<void()>& work, Device device) {
  LOOM_CHECK(work != nullptr, "CudaGraph::capture: no work given");
  reset();
  Backend& kernels = backend(device);
  kernels.begin_capture();
  try {
    work();
  } catch (...) {
    kernels.abort_capture();
    throw;
  }
  graph_ = kernels.end_capture();
}

void CudaGraph::replay() {
  LOOM_CHECK(graph_ != nullptr, "CudaGraph::replay: nothing was captured");
  graph_->replay();
}

void CudaGraph::reset() { graph_.reset(); }

}  // namespace loom
