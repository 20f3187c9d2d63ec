// The positions of advanced indexing (mask_index.h): Backend's checks, then the CPU loops.
// nonzero is one pass that counts per thread chunk and a second that writes each chunk's
// positions from its start (the exclusive sum of the counts before it), so the positions come
// out in row-major order on any number of threads.
#include <cstring>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/mask_index/mask_index.h"
#include "core/error.h"

namespace loom {

// ---------------------------------------------------------------------------- the public methods
namespace {

// Contiguous x on the host: x itself on the CPU, else a host copy of its bytes (nonzero on
// CUDA, whose count the host must wait for anyway).
Tensor on_host(Backend& backend, const Tensor& dense) {
  if (dense.device() == Device::CPU || dense.numel() == 0) return dense;
  Tensor host = Tensor::empty(dense.shape(), dense.dtype(), Device::CPU);
  backend.copy_to_host(host.raw_data(), dense.raw_data(),
                       static_cast<size_t>(dense.numel()) * element_size(dense.dtype()));
  return host;
}

}  // namespace

Tensor Backend::nonzero(const Tensor& x, bool flat) {
  const Contract c{device_, "nonzero", /*takes_bfloat16=*/true};
  c.on_device(x, "input");
  Tensor positions = cpu::nonzero(on_host(*this, contiguous(x)), x.shape(), flat);
  if (device_ == Device::CPU) return positions;
  Tensor out = Tensor::empty(positions.shape(), DType::Int64, device_);
  if (out.numel() > 0)
    copy_from_host(out.raw_data(), positions.raw_data(),
                   static_cast<size_t>(out.numel()) * sizeof(int64_t));
  return out;
}

void Backend::add_flat_index(const char* op, const Tensor& index, int64_t n, int64_t step,
                             Tensor& out) {
  const Contract c{device_, op};
  c.output(out, DType::Int64, out.numel(), "out");
  c.input(index, DType::Int64, out.numel(), "index");
  LOOM_CHECK(n >= 0 && step >= 0, "{}: invalid dimension size {} or step {}", op, n, step);
  if (out.numel() > 0)
    run(cpu::add_flat_index, LOOM_CUDA_IMPL(cuda::add_flat_index), op, contiguous(index), n, step,
        out);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

// Runs body(p) with p the typed pointer to x's elements; bfloat16 and bool are read as their
// raw 2 and 1 bytes, nonzero exactly when the value is (but for bfloat16's -0.0, checked apart).
template <class Body>
void with_elements(const Tensor& x, const Body& body) {
  switch (x.dtype()) {
    case DType::Float32:
      return body(x.data_ptr<float>());
    case DType::Int64:
      return body(x.data_ptr<int64_t>());
    case DType::BFloat16:
      return body(x.data_ptr<uint16_t>());
    case DType::Bool:
      return body(x.data_ptr<uint8_t>());
  }
}

template <class T>
bool is_nonzero(T v) {
  if constexpr (std::is_same_v<T, uint16_t>) return (v & 0x7fff) != 0;  // bfloat16 bits: +-0
  return v != T{0};
}

// The chunks nonzero's two passes share: one per thread, of at least kGrainCheap elements.
struct Chunks {
  int64_t count, size;
};
Chunks chunks_of(int64_t numel) {
  const int64_t count = std::max<int64_t>(
      1, std::min<int64_t>(cpu::max_threads(), numel / cpu::kGrainCheap));
  return {count, (numel + count - 1) / count};
}

// The nonzero count of each chunk.
std::vector<int64_t> chunk_counts(const Tensor& x, const Chunks& chunks) {
  std::vector<int64_t> counts(static_cast<size_t>(chunks.count), 0);
  const int64_t numel = x.numel();
  with_elements(x, [&](const auto* v) {
    cpu::parallel_region(chunks.count > 1, [&] {
#pragma omp for schedule(static) nowait
      for (int64_t c = 0; c < chunks.count; ++c) {
        const int64_t end = std::min(numel, (c + 1) * chunks.size);
        int64_t n = 0;
        for (int64_t i = c * chunks.size; i < end; ++i) n += is_nonzero(v[i]);
        counts[static_cast<size_t>(c)] = n;
      }
    });
  });
  return counts;
}

}  // namespace

Tensor cpu::nonzero(const Tensor& x, const Shape& shape, bool flat) {
  const Chunks chunks = chunks_of(x.numel());
  std::vector<int64_t> starts = chunk_counts(x, chunks);  // then their exclusive sums
  int64_t count = 0;
  for (int64_t& s : starts) count += std::exchange(s, count);
  const int64_t dims = static_cast<int64_t>(shape.size()), numel = x.numel();
  Tensor out = Tensor::empty(flat ? Shape{count} : Shape{count, dims}, DType::Int64, Device::CPU);
  int64_t* to = out.data_ptr<int64_t>();
  with_elements(x, [&](const auto* v) {
    cpu::parallel_region(chunks.count > 1, [&] {
#pragma omp for schedule(static) nowait
      for (int64_t c = 0; c < chunks.count; ++c) {
        int64_t row = starts[static_cast<size_t>(c)];
        const int64_t end = std::min(numel, (c + 1) * chunks.size);
        for (int64_t i = c * chunks.size; i < end; ++i) {
          if (!is_nonzero(v[i])) continue;
          if (flat) {
            to[row++] = i;
            continue;
          }
          int64_t rest = i;  // row-major coordinates of i, last dim first
          for (int64_t d = dims - 1; d >= 0; --d) {
            to[row * dims + d] = rest % shape[d];
            rest /= shape[d];
          }
          ++row;
        }
      }
    });
  });
  return out;
}

void cpu::add_flat_index(const char* op, const Tensor& idx, int64_t n, int64_t step, Tensor& out) {
  const int64_t* index = idx.data_ptr<int64_t>();
  int64_t* to = out.data_ptr<int64_t>();
  const int64_t count = out.numel();
  bool bad = false;
  cpu::parallel_for(0, count, cpu::kGrainCheap, [&](int64_t b, int64_t e) {
    bool bad_here = false;
    for (int64_t j = b; j < e; ++j) {
      const int64_t i = index[j];
      bad_here = bad_here || i < -n || i >= n;
      to[j] += (i < 0 ? i + n : i) * step;
    }
    if (bad_here) {
#pragma omp atomic write
      bad = true;
    }
  });
  if (!bad) return;
  for (int64_t j = 0; j < count; ++j)
    LOOM_CHECK(index[j] >= -n && index[j] < n,
               "{}: index {} (at position {}) is out of range for a dimension of size {}; "
               "valid indices are [{}, {})",
               op, index[j], j, n, -n, n);
}

}  // namespace loom
