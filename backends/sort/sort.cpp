// The sorting kernel (sort.h): Backend's checks, then the CPU loops.
//
// Each row becomes an array of keys that compare as the order wants, so one std:: algorithm
// over plain integers does the work: a value's key is an unsigned integer with the same order
// (a float's bits with the sign handled, every NaN made the largest key, -0 made +0; an int64
// with its sign bit flipped), complemented for a descending order, and the index is the
// tie-break. For float32 both fit in one uint64 (key << 32 | index), so a comparison is one
// integer compare: this is what keeps topk on a [256, 1024] row block as fast as PyTorch's
// (which compares (value, index) pairs with NaN tests). The selection is PyTorch's: a partial
// heap sort for a small k (std::partial_sort, ~n log k), else std::nth_element and a sort of the
// first k; k = n is a full std::sort. Rows go to threads in parallel; each thread reuses one
// buffer.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/sort/sort.h"
#include "core/error.h"

namespace loom {

void Backend::sort(const Tensor& x, const SortArgs& args, Tensor& values, Tensor& indices) {
  const Contract c{device_, "sort"};
  c.extents(args.outer, args.n, args.inner);
  LOOM_CHECK(args.k >= 0 && args.k <= args.n, "sort: k = {} is outside [0, {}] (the row length)",
             args.k, args.n);
  // float32 keys pack the index into 32 bits.
  LOOM_CHECK(args.n <= (int64_t{1} << 32), "sort: rows of {} elements are longer than 2^32",
             args.n);
  c.on_device(x, "input");
  LOOM_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Int64,
             "sort: expected a float32 or int64 input, got {} of shape {}", dtype_name(x.dtype()),
             shape_str(x.shape()));
  c.numel(x, args.outer * args.n * args.inner, "input");
  const int64_t count = args.outer * args.k * args.inner;
  c.output(values, x.dtype(), count, "values");
  c.output(indices, DType::Int64, count, "indices");
  if (count > 0) run(cpu::sort, LOOM_CUDA_IMPL(cuda::sort), contiguous(x), args, values, indices);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

// Unsigned keys in the order of the values (the same mapping as sort.cu's).
uint32_t order_key(float v) {
  if (v != v) return 0xFFFFFFFFu;  // every NaN above +inf
  if (v == 0.0f) v = 0.0f;         // -0 == +0
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
uint64_t order_key(int64_t v) { return static_cast<uint64_t>(v) ^ (uint64_t{1} << 63); }

// A float32 row's entries: (key << 32 | index), in one integer. flip complements the key for
// a descending order (all ones) or leaves it (zero).
struct PackedEntries {
  using Entry = uint64_t;
  uint32_t flip;
  Entry make(float v, int64_t i) const {
    return (static_cast<uint64_t>(order_key(v) ^ flip) << 32) | static_cast<uint64_t>(i);
  }
  static int64_t index(Entry e) { return static_cast<int64_t>(e & 0xFFFFFFFFu); }
};

// An int64 row's entries: the 64-bit key, then the index.
struct PairEntries {
  struct Entry {
    uint64_t key;
    int64_t index;
    bool operator<(const Entry& o) const {
      return key < o.key || (key == o.key && index < o.index);
    }
  };
  uint64_t flip;
  Entry make(int64_t v, int64_t i) const { return {order_key(v) ^ flip, i}; }
  static int64_t index(const Entry& e) { return e.index; }
};

// Sorts every row of x with entries of `Entries`, keeping the first k of each. (The loop takes
// its sizes by value: through references, every store to the int64 buffer could change them,
// and the compiler would reload them per element.)
template <class T, class Entries>
void sort_rows(const T* x, const SortArgs& a, Entries entries, T* values, int64_t* indices) {
  using Entry = typename Entries::Entry;
  const int64_t n = a.n, k = a.k, inner = a.inner;
  cpu::parallel_for(0, a.outer * inner, cpu::row_grain(n), [=](int64_t begin, int64_t end) {
    std::vector<Entry> buffer(static_cast<size_t>(n));
    Entry* first = buffer.data();
    Entry* last = first + n;
    for (int64_t r = begin; r < end; ++r) {  // row r = (o, i): elements x[o, :, i]
      const int64_t o = r / inner, i = r % inner;
      const T* row = x + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) first[j] = entries.make(row[j * inner], j);
      if (k == n) {
        std::sort(first, last);
      } else if (k * 64 <= n) {  // PyTorch's switch between the two selections
        std::partial_sort(first, first + k, last);
      } else {
        std::nth_element(first, first + (k - 1), last);
        std::sort(first, first + (k - 1));
      }
      T* out_values = values + o * k * inner + i;
      int64_t* out_indices = indices + o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t from = Entries::index(first[j]);
        out_indices[j * inner] = from;
        out_values[j * inner] = row[from * inner];
      }
    }
  });
}

}  // namespace

void cpu::sort(const Tensor& x, const SortArgs& args, Tensor& values, Tensor& indices) {
  if (x.dtype() == DType::Float32)
    sort_rows(x.data_ptr<float>(), args, PackedEntries{args.descending ? ~0u : 0u},
              values.data_ptr<float>(), indices.data_ptr<int64_t>());
  else
    sort_rows(x.data_ptr<int64_t>(), args, PairEntries{args.descending ? ~uint64_t{0} : 0},
              values.data_ptr<int64_t>(), indices.data_ptr<int64_t>());
}

}  // namespace loom
