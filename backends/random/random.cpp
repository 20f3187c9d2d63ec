// Random tensors (random.h): Backend's checks, then the CPU loops.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "backends/backend.h"
#include "backends/contract.h"
#include "backends/cpu/loops.h"
#include "backends/random/random.h"
#include "core/rng.h"

namespace loom {

void Backend::rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "rand"}.output(out, DType::Float32, out.numel(), "out");
  if (out.numel() > 0)
    run(cpu::rand_uniform, LOOM_CUDA_IMPL(cuda::rand_uniform), out, seed, offset);
}

void Backend::rand_normal(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "randn"}.output(out, DType::Float32, out.numel(), "out");
  if (out.numel() > 0)
    run(cpu::rand_normal, LOOM_CUDA_IMPL(cuda::rand_normal), out, seed, offset);
}

void Backend::dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset, Tensor& out,
                      Tensor& mask) {
  const Contract c{device_, "dropout"};
  LOOM_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability {} outside [0, 1)", p);
  c.input(x, DType::Float32, x.numel(), "input");
  c.output(out, DType::Float32, x.numel(), "out");
  c.output(mask, DType::Float32, x.numel(), "mask");
  if (x.numel() > 0)
    run(cpu::dropout, LOOM_CUDA_IMPL(cuda::dropout), contiguous(x), p, seed, offset, out, mask);
}

void Backend::rand_bits(Tensor& out, uint64_t seed, uint64_t offset) {
  Contract{device_, "rand_bits"}.output(out, DType::Int64, out.numel(), "out");
  if (out.numel() > 0) run(cpu::rand_bits, LOOM_CUDA_IMPL(cuda::rand_bits), out, seed, offset);
}

void Backend::multinomial(const Tensor& weights, uint64_t seed, uint64_t offset, Tensor& out) {
  const Contract c{device_, "multinomial"};
  LOOM_CHECK(weights.dim() == 2 && weights.size(1) > 0 && out.dim() == 2 &&
                 out.size(0) == weights.size(0),
             "multinomial: expected weights [rows, k > 0] and out [rows, samples], got {} and {}",
             shape_str(weights.shape()), shape_str(out.shape()));
  c.input(weights, DType::Float32, weights.numel(), "weights");
  c.output(out, DType::Int64, out.numel(), "out");
  if (out.numel() > 0)
    run(cpu::multinomial, LOOM_CUDA_IMPL(cuda::multinomial), contiguous(weights), seed, offset,
        out);
}

// ---------------------------------------------------------------------------- the CPU
namespace {

#ifndef __AVX512F__
constexpr int64_t kPhiloxBlock = 64;  // dropout's chunk of uniforms
#else
// philox_uniform (core/rng.h) of the kPhiloxBlock counters first, first + 1, ..., which share
// their high 32 bits: eight vectors of eight Philox-4x32-10 streams, each stream's four words in
// 64-bit lanes, advanced round by round together (eight independent chains keep the multipliers
// busy). The rounds are philox4x32's. vpmuludq multiplies the low 32 bits of each 64-bit lane
// into all 64: the product's high half, shifted down, is the next round's word, and the product
// itself serves as its low half, since only a lane's low 32 bits are ever multiplied or kept (a
// lane's high half may hold anything). GCC vectorises philox4x32's uint64_t products as 64 x
// 64-bit multiplies, and the plain loop draws 2.6x slower; sixteen streams in 32-bit lanes,
// with their products split into even and odd lanes and blended back, drew 20% slower than
// this (0.69 against 0.84 G values/s on a Sapphire Rapids core). The numbers are the same to
// the bit.
constexpr int kPhiloxVectors = 8;
constexpr int64_t kPhiloxBlock = 8 * kPhiloxVectors;

// Eight 64-bit lanes, or sixteen 32-bit ones, of one AVX-512 register (GCC vector types, whose
// shifts and conversions need no intrinsic).
typedef uint64_t U64x8 __attribute__((vector_size(64)));
typedef uint32_t U32x16 __attribute__((vector_size(64)));
typedef int32_t I32x16 __attribute__((vector_size(64)));
typedef float F32x16 __attribute__((vector_size(64)));

// The 64-bit products of the low 32 bits of each lane of x and m. The zero-masking multiply
// keeps every lane: it is the same instruction as the plain one, whose undefined pass-through
// vector GCC 12 warns of (-Wmaybe-uninitialized).
inline U64x8 mul_low_words(U64x8 x, U64x8 m) {
  constexpr __mmask8 kAll = 0xFF;
  return (U64x8)_mm512_maskz_mul_epu32(kAll, (__m512i)x, (__m512i)m);
}

void philox_uniform_block(uint64_t first, uint64_t seed, float* y) {
  const U64x8 lanes = {0, 1, 2, 3, 4, 5, 6, 7};
  const U64x8 m0 = U64x8{} + 0xD2511F53u, m1 = U64x8{} + 0xCD9E8D57u;
  const auto low = static_cast<uint32_t>(first), high = static_cast<uint32_t>(first >> 32);
  U64x8 c0[kPhiloxVectors], c1[kPhiloxVectors], c2[kPhiloxVectors], c3[kPhiloxVectors];
  for (int w = 0; w < kPhiloxVectors; ++w) {  // vector w: counters first + 8w + lane
    c0[w] = lanes + (low + 8u * w);
    c1[w] = U64x8{} + high;
    c2[w] = c3[w] = U64x8{};
  }
  auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  // The first round, whose c2 and c3 are 0: c2 * m1 is 0, so c0 becomes c1 ^ key0 and c1 0,
  // with one product a stream where the other rounds take two.
  {
    const U64x8 key0 = U64x8{} + k0, key1 = U64x8{} + k1;
    for (int w = 0; w < kPhiloxVectors; ++w) {
      const U64x8 p0 = mul_low_words(c0[w], m0);
      c0[w] = c1[w] ^ key0;
      c2[w] = (p0 >> 32) ^ key1;
      c1[w] = U64x8{};
      c3[w] = p0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int round = 1; round < 9; ++round) {
    const U64x8 key0 = U64x8{} + k0, key1 = U64x8{} + k1;
    for (int w = 0; w < kPhiloxVectors; ++w) {
      const U64x8 p0 = mul_low_words(c0[w], m0), p2 = mul_low_words(c2[w], m1);
      c0[w] = (p2 >> 32) ^ c1[w] ^ key0;
      c2[w] = (p0 >> 32) ^ c3[w] ^ key1;
      c1[w] = p2;
      c3[w] = p0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // The last round: only v[0], its new c0, is used, so only c2 * m1 is taken.
  {
    const U64x8 key0 = U64x8{} + k0;
    for (int w = 0; w < kPhiloxVectors; ++w)
      c0[w] = (mul_low_words(c2[w], m1) >> 32) ^ c1[w] ^ key0;
  }
  // v[0]'s top 24 bits, as a float in [0, 1): the low words of two vectors, side by side.
  const __m512i low_words =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int w = 0; w < kPhiloxVectors; w += 2) {
    const auto v = (U32x16)_mm512_permutex2var_epi32((__m512i)c0[w], low_words,
                                                     (__m512i)c0[w + 1]);
    const F32x16 u = __builtin_convertvector((I32x16)(v >> 8), F32x16) * (1.0f / 16777216.0f);
    std::memcpy(y + 8 * w, &u, sizeof u);
  }
}
#endif

// y[i] = philox_uniform(first + i, seed) for i in [from, to).
void plain_uniforms(uint64_t first, uint64_t seed, int64_t from, int64_t to, float* y) {
#pragma omp simd
  for (int64_t i = from; i < to; ++i) y[i] = philox_uniform(first + static_cast<uint64_t>(i), seed);
}

// y[0, count) = philox_uniform(first + i, seed): in AVX-512 blocks where the build has them.
void uniforms(uint64_t first, uint64_t seed, int64_t count, float* y) {
  int64_t i = 0;
#ifdef __AVX512F__
  for (; i + kPhiloxBlock <= count; i += kPhiloxBlock) {
    const uint64_t block = first + static_cast<uint64_t>(i);
    if (static_cast<uint32_t>(block) <= UINT32_MAX - (kPhiloxBlock - 1))
      philox_uniform_block(block, seed, y + i);
    else  // the block whose counters cross into the next high word
      plain_uniforms(first, seed, i, i + kPhiloxBlock, y);
  }
#endif
  plain_uniforms(first, seed, i, count, y);
}

}  // namespace

void cpu::rand_uniform(Tensor& out, uint64_t seed, uint64_t offset) {
  float* y = out.data_ptr<float>();
  cpu::parallel_for(0, out.numel(), cpu::kGrainHeavy, [=](int64_t b, int64_t e) LOOM_FLATTEN {
    uniforms(offset + static_cast<uint64_t>(b), seed, e - b, y + b);
  });
}

// mask = (u >= p) * scale and out = x * mask, as x * (ge(rand, p) * scale) computes them (to
// the bit), but in one pass: the uniforms of kPhiloxBlock elements at a time stay in registers
// and the L1 cache, never written out.
void cpu::dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset, Tensor& out,
                  Tensor& mask) {
  const float scale = 1.0f / (1.0f - p);
  const float* xs = x.data_ptr<float>();
  float* y = out.data_ptr<float>();
  float* m = mask.data_ptr<float>();
  cpu::parallel_for(0, x.numel(), cpu::kGrainHeavy, [=](int64_t b, int64_t e) LOOM_FLATTEN {
    float u[kPhiloxBlock];
    for (int64_t i = b; i < e; i += kPhiloxBlock) {
      const int64_t count = std::min<int64_t>(kPhiloxBlock, e - i);
      uniforms(offset + static_cast<uint64_t>(i), seed, count, u);
#pragma omp simd
      for (int64_t j = 0; j < count; ++j) {
        m[i + j] = u[j] >= p ? scale : 0.0f;
        y[i + j] = xs[i + j] * m[i + j];
      }
    }
  });
}

void cpu::rand_normal(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  float* y = out.data_ptr<float>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = philox_normal(offset + static_cast<uint64_t>(i), seed);
  });
}

void cpu::rand_bits(Tensor& out, uint64_t seed, uint64_t offset) {
  const int64_t n = out.numel();
  int64_t* y = out.data_ptr<int64_t>();
  cpu::parallel_for(0, n, cpu::kGrainHeavy, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = philox_bits63(offset + static_cast<uint64_t>(i), seed);
  });
}

// Each row's running sums once, then a binary search per draw: the first category whose sum
// exceeds the target (a zero weight never does: its sum equals the one before it).
void cpu::multinomial(const Tensor& weights, uint64_t seed, uint64_t offset, Tensor& out) {
  const int64_t rows = weights.size(0), k = weights.size(1), samples = out.size(1);
  const float* w = weights.data_ptr<float>();
  int64_t* y = out.data_ptr<int64_t>();
  cpu::parallel_for(0, rows, cpu::row_grain(k + samples), [=](int64_t b, int64_t e) {
    std::vector<double> running(static_cast<size_t>(k));
    for (int64_t r = b; r < e; ++r) {
      double sum = 0.0;
      int64_t last_positive = 0;
      for (int64_t c = 0; c < k; ++c) {
        sum += w[r * k + c];
        running[c] = sum;
        if (w[r * k + c] > 0.0f) last_positive = c;
      }
      for (int64_t s = 0; s < samples; ++s) {
        const uint64_t counter = offset + static_cast<uint64_t>(r * samples + s);
        const double target = philox_uniform_double(counter, seed) * sum;
        const int64_t c = std::upper_bound(running.begin(), running.end(), target) -
                          running.begin();
        y[r * samples + s] = c < k ? c : last_positive;  // u * sum rounded up to sum
      }
    }
  });
}

}  // namespace loom
