// PackedWeightsGuard (packed_weights.h): per thread, how many guards are open and the copies of
// W^T they hold.
#include "autograd/packed_weights.h"

#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "backends/gemm/tiled_gemm.h"

namespace loom {
namespace {

// One weight's copy: the weight as it was seen (holding its storage, so no other tensor can
// take its address while the copy lives), its version then, and W^T.
struct PackedWeight {
  Tensor weight;
  uint64_t version;
  Tensor weight_t;
};

struct PackedWeights {
  int open = 0;  // guards open on this thread
  std::vector<PackedWeight> copies;
};

PackedWeights& packed_weights() {
  thread_local PackedWeights state;
  return state;
}

// The same view of the same data: address, shape and strides.
bool same_view(const Tensor& a, const Tensor& b) {
  return a.data_ptr<float>() == b.data_ptr<float>() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

// W^T [in, out] in rows of whole vectors and one more: out rounded up to whole vectors would
// put the rows of a power-of-two width (256, 1,024) in the same few sets of the L1 cache, as
// tiled_gemm.cpp's kRowSkew says of the rows it copies. One pass over the threads: W transposed
// in 8 x 8 register blocks, zeros after column `out` (no garbage reaches the products' padded
// lanes).
Tensor transposed_copy(const Tensor& weight) {
  const Tensor w = weight.detach().contiguous();  // [out, in]
  const int64_t out = w.size(0), in = w.size(1);
  const int64_t row = cpu::tile_gemm_padded(out) + cpu::kTileLanes;
  Tensor rows = Tensor::empty({in, row}, DType::Float32, weight.device());
  cpu::pack_b_transposed(w.data_ptr<float>(), in, out, in, rows.data_ptr<float>(), row);
  return rows.narrow(1, 0, out);
}

}  // namespace

PackedWeightsGuard::PackedWeightsGuard() { ++packed_weights().open; }

PackedWeightsGuard::~PackedWeightsGuard() {
  PackedWeights& state = packed_weights();
  if (--state.open == 0) state.copies.clear();
}

int64_t PackedWeightsGuard::cached() {
  return static_cast<int64_t>(packed_weights().copies.size());
}

Tensor detail::packed_weight_t(const Tensor& weight, int64_t rows) {
  PackedWeights& state = packed_weights();
  if (state.open == 0 || autograd::grad_mode_enabled() || weight.device() != Device::CPU ||
      weight.dtype() != DType::Float32 || weight.dim() != 2 || !weight.requires_grad() ||
      !cpu::copies_transposed_b(rows, weight.size(0)))
    return Tensor();
  for (PackedWeight& copy : state.copies) {
    if (!same_view(copy.weight, weight)) continue;
    if (copy.version != weight.version()) {  // changed in place since: copied again
      copy.weight_t = transposed_copy(weight);
      copy.version = weight.version();
    }
    return copy.weight_t;
  }
  state.copies.push_back({weight, weight.version(), transposed_copy(weight)});
  return state.copies.back().weight_t;
}

}  // namespace loom
