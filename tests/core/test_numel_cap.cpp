// A shape whose element count overflows int64_t must never size a buffer
// (numel used to wrap to 0, a 0-byte buffer was allocated and a fill wrote past it).
#include <doctest/doctest.h>

#include "loom.h"

using namespace loom;

namespace {
// Runs fn, which must throw a loom::Error whose message contains `piece`.
template <typename Fn>
void check_throws(Fn fn, const std::string& piece) {
  try {
    fn();
    FAIL("expected a loom::Error containing '" << piece << "'");
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(piece) != std::string::npos, e.what());
  }
}
}  // namespace

TEST_CASE("zeros of a shape whose numel overflows int64 is an error, not a 0-byte buffer") {
  // The exact reproduction: zeros({2^62, 4}) then a fill of its first 2^20 rows.
  check_throws([] { zeros({int64_t{1} << 62, 4}).narrow(0, 0, 1 << 20).fill_(7.f); },
               "numel cap");
  check_throws([] { zeros({int64_t{1} << 31, int64_t{1} << 31, 4}); }, "[2147483648,2147483648,4]");
  check_throws([] { Tensor::empty({int64_t{1} << 61}); }, "numel cap");
}

TEST_CASE("a shape with a zero dim is still refused when its other dims overflow") {
  CHECK_FALSE(shape_fits({0, int64_t{1} << 62, int64_t{1} << 62}));
  check_throws([] { zeros({0, int64_t{1} << 62, int64_t{1} << 62}); }, "numel cap");
  CHECK(shape_fits({0, int64_t{1} << 30, 4}));
  CHECK(zeros({0, int64_t{1} << 30, 4}).numel() == 0);
  CHECK(shape_numel({kMaxNumel}) == kMaxNumel);
  CHECK_FALSE(shape_fits({kMaxNumel, 2}));
  CHECK_FALSE(shape_fits({-1, 2}));
}

TEST_CASE("views cannot build an overflowing shape: expand, reshape, view") {
  const Tensor s = zeros({1, 1});
  check_throws([&] { s.expand({int64_t{1} << 62, int64_t{1} << 62}); }, "numel cap");
  check_throws([&] { s.reshape({-1, int64_t{1} << 62, int64_t{1} << 62, 0}); }, "reshape");
  const Tensor e = zeros({0});
  check_throws([&] { e.view({0, int64_t{1} << 62, int64_t{1} << 62}); }, "");
}
