// Next-token sampling (sample.h): Backend's checks, then the reference algorithm (a sort of each
// row), which models::sample_token also runs; the CUDA kernel (sample.cu) reaches the same token
// without sorting.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/sample/sample.h"
#include "core/error.h"
#include "core/rng.h"

namespace loom {

// ---------------------------------------------------------------------------- the public method
void Backend::sample(const Tensor& logits, float temperature, int64_t top_k, float top_p,
                     uint64_t seed, uint64_t offset, Tensor& out, const Tensor& offset_by) {
  const Contract c{device_, "sample"};
  c.dtype(logits, DType::Float32, "logits");
  LOOM_CHECK(logits.dim() == 2 && logits.size(1) > 0 && logits.size(1) < (int64_t{1} << 31),
             "sample: logits must be [rows, n] with 0 < n < 2^31, got shape {}",
             shape_str(logits.shape()));
  LOOM_CHECK(temperature >= 0.0f && std::isfinite(temperature),
             "sample: temperature {} is negative or not finite", temperature);
  LOOM_CHECK(top_k >= 0, "sample: top_k {} is negative", top_k);
  LOOM_CHECK(top_p > 0.0f && top_p <= 1.0f, "sample: top_p {} outside (0, 1]", top_p);
  c.output(out, DType::Int64, logits.size(0), "out");
  if (offset_by.defined()) {
    c.dtype(offset_by, DType::Int64, "offset_by");
    c.numel(offset_by, 1, "offset_by");
  }
  if (out.numel() > 0)
    run(cpu::sample, LOOM_CUDA_IMPL(cuda::sample), contiguous(logits), temperature, top_k, top_p,
        seed, offset, offset_by.defined() ? contiguous(offset_by) : offset_by, out);
}

// ---------------------------------------------------------------------------- the CPU
namespace cpu {

int64_t sample_row(const float* logits, int64_t n, float temperature, int64_t top_k, float top_p,
                   float uniform) {
  if (temperature == 0.0f) return std::max_element(logits, logits + n) - logits;  // first maximum
  // Token ids from most to least likely (ties: smaller id first).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  auto logit = [&](size_t rank) { return static_cast<double>(logits[order[rank]]); };
  size_t keep = order.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < keep) {  // the k largest, with ties at the k-th
    keep = static_cast<size_t>(top_k);
    while (keep < order.size() && logit(keep) == logit(keep - 1)) ++keep;
  }
  // softmax(logits / T) over the kept tokens, in double.
  std::vector<double> probs(keep);
  double total = 0.0;
  for (size_t r = 0; r < keep; ++r)
    total += probs[r] = std::exp((logit(r) - logit(0)) / temperature);
  if (top_p < 1.0f) {  // Holtzman et al. 2020: the smallest prefix whose mass reaches top_p
    double mass = 0.0;
    size_t r = 0;
    while (r < keep && mass < top_p * total) mass += probs[r++];
    keep = std::max<size_t>(r, 1);
    total = mass;
  }
  // Inverse CDF at `uniform`.
  const double target = static_cast<double>(uniform) * total;
  double cumulative = 0.0;
  for (size_t r = 0; r < keep; ++r) {
    cumulative += probs[r];
    if (target < cumulative) return order[r];
  }
  return order[keep - 1];  // rounding at the very top of the range
}

}  // namespace cpu

void cpu::sample(const Tensor& logits, float temperature, int64_t top_k, float top_p, uint64_t seed,
                 uint64_t offset, const Tensor& offset_by, Tensor& out) {
  const int64_t rows = out.numel(), n = logits.numel() / rows;
  if (offset_by.defined()) offset += static_cast<uint64_t>(offset_by.data_ptr<int64_t>()[0]);
  const float* x = logits.data_ptr<float>();
  int64_t* y = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows * n; ++i)
    LOOM_CHECK(!std::isnan(x[i]), "sample: logit {} of row {} is NaN", i % n, i / n);
  cpu::parallel_for(0, rows, 1, [=](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const float u =
          temperature > 0.0f ? philox_uniform(offset + static_cast<uint64_t>(row), seed) : 0.0f;
      y[row] = cpu::sample_row(x + row * n, n, temperature, top_k, top_p, u);
    }
  });
}

}  // namespace loom
