// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011).
// Element i of a random tensor is a pure function of (seed, offset + i), so the numbers are
// the same on every run, for every thread count, and on the CPU and the GPU.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace loom {

struct Philox4 {
  uint32_t v[4];
};

LOOM_HOST_DEVICE Philox4 philox4x32(uint64_t counter, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits.
LOOM_HOST_DEVICE float philox_uniform(uint64_t counter, uint64_t seed) {
  return static_cast<float>(philox4x32(counter, seed).v[0] >> 8) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller from two of the four words.
LOOM_HOST_DEVICE float philox_normal(uint64_t counter, uint64_t seed) {
  const Philox4 r = philox4x32(counter, seed);
  const float u1 = (static_cast<float>(r.v[0] >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = static_cast<float>(r.v[1] >> 8) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

// Uniform in [0, 1) with 53 random bits (a double's precision), from two of the four words.
LOOM_HOST_DEVICE double philox_uniform_double(uint64_t counter, uint64_t seed) {
  const Philox4 r = philox4x32(counter, seed);
  const uint64_t bits = ((static_cast<uint64_t>(r.v[0]) << 32) | r.v[1]) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

// 63 random bits, a non-negative int64 (randperm's sort keys).
LOOM_HOST_DEVICE int64_t philox_bits63(uint64_t counter, uint64_t seed) {
  const Philox4 r = philox4x32(counter, seed);
  return static_cast<int64_t>(((static_cast<uint64_t>(r.v[0]) << 32) | r.v[1]) >> 1);
}

// The global generator: a seed plus a running offset. Each random op reserves `n` counters.
// The offset is taken atomically, so that random ops in several threads at once (a program's
// own threads, each sampling its generation) get blocks of their own; which block each gets
// then depends on their order, as with PyTorch's generator. Seeding is one thread's affair.
class Generator {
 public:
  void manual_seed(uint64_t seed) { set_state(seed, 0); }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_.load(std::memory_order_relaxed); }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_.store(offset, std::memory_order_relaxed);
  }
  // Returns the first counter of a block of n fresh counters.
  uint64_t reserve(uint64_t n) { return offset_.fetch_add(n, std::memory_order_relaxed); }

 private:
  uint64_t seed_ = 0x5eed;
  std::atomic<uint64_t> offset_{0};
};

Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace loom
