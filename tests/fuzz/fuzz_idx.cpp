// Fuzz target of the IDX reader (Fashion-MNIST): whatever the bytes, parse_idx of them and
// parse_idx of gunzip of them either succeed or throw loom::Error -- never crash, hang,
// allocate absurdly or throw anything else.
//
//   As a ctest (any compiler): fuzz_idx tests/fuzz/corpus/idx
//     replays every file of the corpus; files named valid_* must be read (raw or gzipped),
//     bad_* rejected by both paths.
//   With libFuzzer (clang): CC=clang CXX=clang++ cmake -B build-fuzz -DLOOM_FUZZ=ON
//     -DLOOM_SANITIZE=ON, then build-fuzz/tests/fuzz_idx -max_len=4096 tests/fuzz/corpus/idx
//
// The corpus is written by tests/fuzz/make_idx_corpus.py.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/fashion_mnist.h"
#include "fuzz_replay.h"

namespace {

// Decompression cap while fuzzing: large enough for every corpus file, small enough that a
// gzip bomb costs milliseconds.
constexpr size_t kFuzzMaxBytes = size_t{1} << 20;

// An accepted array must be self-consistent.
void check_array(const loom::data::IdxArray& a) {
  size_t product = 1;
  for (int64_t d : a.dims) product *= static_cast<size_t>(d);
  if (a.dims.empty() || product != a.data.size())
    throw std::logic_error("parse_idx accepted an array whose sizes disagree with its data");
}

// true: read (by parse_idx directly or after gunzip); false: both paths rejected it with
// loom::Error (`why`: the gzip path's message for input starting with the gzip magic 1f 8b,
// else the raw path's). Anything else escapes.
bool read_or_reject(const uint8_t* data, size_t size, std::string& why) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const bool gzip_magic = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  bool read = false;
  try {
    check_array(loom::data::parse_idx(bytes, "fuzz input"));
    read = true;
  } catch (const loom::Error& e) {
    if (!gzip_magic) why = e.what();
  }
  try {
    const std::string raw = loom::data::gunzip(bytes, "fuzz input", kFuzzMaxBytes);
    if (raw.size() > kFuzzMaxBytes) throw std::logic_error("gunzip exceeded its cap");
    check_array(loom::data::parse_idx(raw, "fuzz input"));
    read = true;
  } catch (const loom::Error& e) {
    if (gzip_magic) why = e.what();
  }
  return read;
}

}  // namespace

LOOM_FUZZ_TARGET(read_or_reject, [] {})
