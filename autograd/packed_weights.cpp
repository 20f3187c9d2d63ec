// PackedWeightsGuard (packed_weights.h): how many guards are open, on any thread, and the copies
// of W^T in panels they hold, one set for the process under a mutex.
#include "autograd/packed_weights.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/gemm/tiled_gemm.h"
#include "core/profiler.h"

namespace loom {
namespace {

// One weight's copy: the weight as it was seen (holding its storage, so no other tensor can
// take its address while the copy lives), its version then, and W^T in panels.
struct PackedWeight {
  Tensor weight;
  uint64_t version;
  Tensor panels;
};

// Shared by every thread, so that threads decoding with one model at once (translate_batch's
// groups, models/beam_search.cpp; a program's own team) read one copy of each weight, not one
// each: the cache holds one set of copies instead of several. Every use takes the mutex, a few
// tens of nanoseconds beside a product of microseconds; a weight is packed under it, once.
struct PackedWeights {
  std::mutex mutex;
  int open = 0;  // guards open, on any thread
  std::vector<PackedWeight> copies;
};

PackedWeights& packed_weights() {
  static PackedWeights* const state = new PackedWeights();  // never destroyed: used at exit
  return *state;
}

// The same view of the same data: address, shape and strides.
bool same_view(const Tensor& a, const Tensor& b) {
  return a.data_ptr<float>() == b.data_ptr<float>() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

// W^T in panels, [panels, in, cpu::panel_columns()] (GemmArgs::b_panel), zeros past column
// `out` of the last panel: W's rows transposed a panel at a time, over the threads.
Tensor panels_of(const Tensor& weight) {
  profiler::Scope scope("pack_weight");  // a kernel of its own in a profile
  const Tensor w = weight.detach().contiguous();  // [out, in]
  const int64_t out = w.size(0), in = w.size(1);
  Tensor panels = Tensor::empty({cpu::panel_count(out), in, cpu::panel_columns()}, DType::Float32,
                                weight.device());
  cpu::pack_panels(w.data_ptr<float>(), in, out, in, panels.data_ptr<float>());
  return panels;
}

// Drops the copies of weights that nothing else holds any more: a decoding's stacked projections
// once it has ended, the parameters of a model that is gone. A guard kept open around many
// decodings (a program translating a test set, batch after batch) would otherwise keep every
// decoding's copies until it closes. Only this handle holds such a weight's TensorImpl, and only
// that TensorImpl its storage, so no tensor of the program can reach the data, and the address
// the copy guarded may be reused.
void drop_unreachable(std::vector<PackedWeight>& copies) {
  std::erase_if(copies, [](const PackedWeight& copy) {
    return copy.weight.impl_ptr().use_count() == 1 &&
           copy.weight.impl()->storage().use_count() == 1;
  });
}

// Notes `weight` for packing (at its next use), after dropping what no one can reach.
void note(PackedWeights& state, const Tensor& weight) {
  drop_unreachable(state.copies);
  state.copies.push_back({weight, weight.version(), Tensor()});
}

}  // namespace

PackedWeightsGuard::PackedWeightsGuard() {
  PackedWeights& state = packed_weights();
  std::lock_guard lock(state.mutex);
  ++state.open;
}

PackedWeightsGuard::~PackedWeightsGuard() {
  PackedWeights& state = packed_weights();
  std::lock_guard lock(state.mutex);
  if (--state.open == 0) state.copies.clear();
}

int64_t PackedWeightsGuard::cached() {
  PackedWeights& state = packed_weights();
  std::lock_guard lock(state.mutex);
  return std::count_if(state.copies.begin(), state.copies.end(),
                       [](const PackedWeight& copy) { return copy.panels.defined(); });
}

void PackedWeightsGuard::keep(const Tensor& weight) {
  if (!weight.defined() || weight.device() != Device::CPU || weight.dtype() != DType::Float32 ||
      weight.dim() != 2)
    return;
  PackedWeights& state = packed_weights();
  std::lock_guard lock(state.mutex);
  if (state.open == 0) return;
  for (const PackedWeight& copy : state.copies)
    if (same_view(copy.weight, weight)) return;
  note(state, weight);  // packed at its first use
}

Tensor detail::packed_weight(const Tensor& weight, int64_t rows) {
  if (autograd::grad_mode_enabled() || weight.device() != Device::CPU ||
      weight.dtype() != DType::Float32 || weight.dim() != 2 || weight.size(1) == 0 ||
      !cpu::use_tiled_gemm(rows, weight.size(0)))
    return Tensor();
  PackedWeights& state = packed_weights();
  std::lock_guard lock(state.mutex);
  if (state.open == 0) return Tensor();
  for (PackedWeight& copy : state.copies) {
    if (!same_view(copy.weight, weight)) continue;
    // Used again (or kept): packed now, or again after an in-place change.
    if (!copy.panels.defined() || copy.version != weight.version()) {
      copy.panels = panels_of(weight);
      copy.version = weight.version();
    }
    return copy.panels;
  }
  // A parameter's first use: noted, and read as it is. Packing costs about as much as the
  // product copies of it, and a weight used once in the guard (an encoder's, run once per
  // decoding) would pay it for nothing.
  if (weight.requires_grad()) note(state, weight);
  return Tensor();
}

}  // namespace loom
