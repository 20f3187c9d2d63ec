// SplitMix64: the tiny seeded generator behind every shuffle in data/ (train/validation
// splits, DataLoader epoch orders). It is written out here rather than taken from <random>
// because std::shuffle and std::uniform_int_distribution are allowed to give different
// results on different standard libraries; this one gives the same numbers everywhere.
// Generator: Steele, Lea and Flood, "Fast splittable pseudorandom number generators"
// (OOPSLA 2014), with the constants of Vigna's reference implementation.
#pragma once

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace loom::data {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias: draws below 2^64 mod n are rejected so
  // that every residue is hit by the same number of 64-bit values.
  uint64_t uniform(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // == 2^64 mod n
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

 private:
  uint64_t state_;
};

// One 64-bit seed from two (e.g. a user seed and an epoch number), so that neighbouring
// pairs give unrelated streams.
inline uint64_t mix_seeds(uint64_t a, uint64_t b) {
  SplitMix64 g(a ^ SplitMix64(b).next());
  return g.next();
}

// 0..n-1 in a seeded random order (Fisher-Yates, Knuth TAOCP vol. 2, Algorithm 3.4.2P).
inline std::vector<int64_t> random_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  SplitMix64 gen(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(gen.uniform(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

}  // namespace loom::data
