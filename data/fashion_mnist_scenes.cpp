// Fashion-MNIST scenes (see fashion_mnist_scenes.h): numpy's PCG64 stream, PyTorch's bilinear
// resize, bench/reference/train.py's make_scene, and the PNG view of a scene.
#include "data/fashion_mnist_scenes.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "autograd/ops.h"
#include "core/error.h"
#include "data/image.h"

namespace loom::data {

// ------------------------------------------------------------------ numpy's default_rng
namespace {

using u128 = unsigned __int128;

// numpy/random/bit_generator.pyx: SeedSequence's hash constants (Melissa O'Neill's seed_seq).
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd,
                   kMultB = 0x58f38ded, kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kPoolSize = 4, kXShift = 16;

// SeedSequence(entropy).generate_state(4, uint64): the PCG64 seed words.
std::array<uint64_t, 4> seed_sequence_state(const std::vector<uint32_t>& entropy) {
  uint32_t hash_const = kInitA;
  const auto hashmix = [&](uint32_t value) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    return value ^ (value >> kXShift);
  };
  const auto mix = [](uint32_t x, uint32_t y) {
    const uint32_t r = kMixMultL * x - kMixMultR * y;
    return r ^ (r >> kXShift);
  };
  std::array<uint32_t, kPoolSize> pool{};
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0);
  for (size_t src = 0; src < pool.size(); ++src)
    for (size_t dst = 0; dst < pool.size(); ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
  for (size_t src = pool.size(); src < entropy.size(); ++src)
    for (size_t dst = 0; dst < pool.size(); ++dst)
      pool[dst] = mix(pool[dst], hashmix(entropy[src]));
  // generate_state: 8 uint32 words cycling over the pool, viewed little-endian as 4 uint64
  std::array<uint64_t, 4> out{};
  uint32_t hash_b = kInitB;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_b;
    hash_b *= kMultB;
    v *= hash_b;
    v ^= v >> kXShift;
    out[i / 2] |= static_cast<uint64_t>(v) << (32 * (i % 2));
  }
  return out;
}

constexpr u128 kPcgMultiplier = (static_cast<u128>(0x2360ED051FC65DA4ULL) << 64) |
                                0x4385DF649FCCF645ULL;

// `a * b` rounded once, never fused into a following addition (numpy and Python round twice).
double product(double a, double b) {
  volatile double p = a * b;
  return p;
}

}  // namespace

std::vector<uint32_t> numpy_int_words(uint64_t value) {
  if (value == 0) return {0};
  std::vector<uint32_t> words;
  for (; value > 0; value >>= 32) words.push_back(static_cast<uint32_t>(value));
  return words;
}

NumpyPCG64::NumpyPCG64(const std::vector<uint32_t>& entropy) {
  LOOM_CHECK(!entropy.empty(), "NumpyPCG64: empty entropy (numpy_int_words(0) is {{0}})");
  const auto s = seed_sequence_state(entropy);
  const u128 initstate = (static_cast<u128>(s[0]) << 64) | s[1];
  const u128 initseq = (static_cast<u128>(s[2]) << 64) | s[3];
  // pcg_setseq_128_srandom_r
  inc_ = (initseq << 1) | 1;
  state_ = 0;
  state_ = state_ * kPcgMultiplier + inc_;
  state_ += initstate;
  state_ = state_ * kPcgMultiplier + inc_;
}

uint64_t NumpyPCG64::next_uint64() {
  // pcg_setseq_128_xsl_rr_64_random_r: step, then xor-shift-low and a random rotation
  state_ = state_ * kPcgMultiplier + inc_;
  const auto hi = static_cast<uint64_t>(state_ >> 64), lo = static_cast<uint64_t>(state_);
  const unsigned rot = static_cast<unsigned>(state_ >> 122);
  const uint64_t x = hi ^ lo;
  return (x >> rot) | (x << ((-rot) & 63));
}

uint32_t NumpyPCG64::next_uint32() {
  if (has_uint32_) {
    has_uint32_ = false;
    return uinteger_;
  }
  const uint64_t next = next_uint64();
  has_uint32_ = true;
  uinteger_ = static_cast<uint32_t>(next >> 32);
  return static_cast<uint32_t>(next);
}

double NumpyPCG64::next_double() {
  return static_cast<double>(next_uint64() >> 11) * (1.0 / 9007199254740992.0);
}

int64_t NumpyPCG64::integers(int64_t low, int64_t high) {
  LOOM_CHECK(high > low && static_cast<uint64_t>(high - low) <= 0xFFFFFFFFULL,
             "NumpyPCG64::integers: [{}, {}) is empty or wider than 2^32 - 1", low, high);
  const auto rng = static_cast<uint32_t>(high - low - 1);  // numpy's inclusive range
  if (rng == 0) return low;                                // no draw, as numpy
  // buffered_bounded_lemire_uint32 (Lemire 2019, arXiv:1805.10941)
  const uint32_t rng_excl = rng + 1;
  uint64_t m = static_cast<uint64_t>(next_uint32()) * rng_excl;
  auto leftover = static_cast<uint32_t>(m);
  if (leftover < rng_excl) {
    const uint32_t threshold = (0xFFFFFFFFU - rng) % rng_excl;
    while (leftover < threshold) {
      m = static_cast<uint64_t>(next_uint32()) * rng_excl;
      leftover = static_cast<uint32_t>(m);
    }
  }
  return low + static_cast<int64_t>(m >> 32);
}

double NumpyPCG64::uniform(double low, double high) {
  return low + product(high - low, next_double());
}

// ------------------------------------------------------------------ PyTorch's bilinear resize
std::vector<float> resize_bilinear(const float* src, int64_t n, int64_t side) {
  LOOM_CHECK(n >= 1 && side >= 1, "resize_bilinear: sizes {} -> {} must be positive", n, side);
  // compute_source_index_and_lambda: scale in float, source index in double, weights in float
  const float scale = static_cast<float>(n) / static_cast<float>(side);
  std::vector<int64_t> i0(side), i1(side);
  std::vector<float> l0(side), l1(side);
  for (int64_t i = 0; i < side; ++i) {
    double real = static_cast<double>(scale) * (static_cast<double>(i) + 0.5) - 0.5;  // exact
    if (real < 0) real = 0;
    i0[i] = static_cast<int64_t>(real);
    i1[i] = i0[i] + (i0[i] < n - 1 ? 1 : 0);
    l1[i] = static_cast<float>(std::min(std::max(real - static_cast<double>(i0[i]), 0.0), 1.0));
    l0[i] = 1.0f - l1[i];
  }
  // out = a w00 + b w01 + c w10 + d w11, weights float products, summed in double (every
  // product of two floats is exact in double, so fusing cannot change the result)
  std::vector<float> out(side * side);
  for (int64_t y = 0; y < side; ++y) {
    const float* r0 = src + i0[y] * n;
    const float* r1 = src + i1[y] * n;
    for (int64_t x = 0; x < side; ++x) {
      const float w00 = l0[y] * l0[x], w01 = l0[y] * l1[x], w10 = l1[y] * l0[x],
                  w11 = l1[y] * l1[x];
      double acc = static_cast<double>(r0[i0[x]]) * w00;
      acc += static_cast<double>(r0[i1[x]]) * w01;
      acc += static_cast<double>(r1[i0[x]]) * w10;
      acc += static_cast<double>(r1[i1[x]]) * w11;
      out[y * side + x] = static_cast<float>(acc);
    }
  }
  return out;
}

// ------------------------------------------------------------------ scenes
namespace {

void check_config(const SceneConfig& c, int64_t source_side, const char* fn) {
  LOOM_CHECK(c.min_items >= 0 && c.max_items >= c.min_items && c.max_items <= 1000,
             "{}: items [{}, {}] must satisfy 0 <= min_items <= max_items <= 1000", fn,
             c.min_items, c.max_items);
  LOOM_CHECK(std::isfinite(c.min_scale) && std::isfinite(c.max_scale) && c.min_scale > 0 &&
                 c.max_scale > c.min_scale,
             "{}: scales [{}, {}) must satisfy 0 < min_scale < max_scale", fn, c.min_scale,
             c.max_scale);
  const double largest = std::floor(static_cast<double>(source_side) * c.max_scale + 0.5);
  LOOM_CHECK(c.canvas >= 1 && c.canvas <= 4096 && largest <= static_cast<double>(c.canvas),
             "{}: canvas {} must be in 1..4096 and hold the largest item ({} px at scale {})", fn,
             c.canvas, largest, c.max_scale);
  LOOM_CHECK(c.max_attempts >= 1 && c.max_attempts <= 100000,
             "{}: max_attempts {} is not in 1..100000", fn, c.max_attempts);
  LOOM_CHECK(std::isfinite(c.max_iou) && std::isfinite(c.visible_threshold),
             "{}: max_iou {} and visible_threshold {} must be finite", fn, c.max_iou,
             c.visible_threshold);
}

// IoU of two pixel boxes as bench/reference/train.py's box_iou_xyxy (pycocotools' bbIou),
// in double.
double box_iou(const std::array<int64_t, 4>& a, const std::array<int64_t, 4>& b) {
  const double ax = a[0], ay = a[1], aw = a[2] - a[0], ah = a[3] - a[1];
  const double bx = b[0], by = b[1], bw = b[2] - b[0], bh = b[3] - b[1];
  const double w = std::fmin(aw + ax, bw + bx) - std::fmax(ax, bx);
  const double h = std::fmin(ah + ay, bh + by) - std::fmax(ay, by);
  if (w <= 0 || h <= 0) return 0.0;
  const double i = w * h;
  return i / ((aw * ah + bw * bh) - i);
}

}  // namespace

Scene draw_scene(const FashionMNIST& split, NumpyPCG64& rng, const SceneConfig& config) {
  const int64_t n_src = split.rows(), C = config.canvas, count = split.size();
  LOOM_CHECK(split.rows() == split.cols() && count > 0,
             "draw_scene: needs a non-empty split of square images, got {} images of {}x{}", count,
             split.rows(), split.cols());
  check_config(config, n_src, "draw_scene");
  std::vector<float> canvas(C * C, 0.0f);
  std::vector<int64_t> labels;
  Scene scene;
  const int64_t n = rng.integers(config.min_items, config.max_items + 1);
  std::vector<float> pixels(n_src * n_src);
  for (int64_t item = 0; item < n; ++item) {
    const int64_t k = rng.integers(0, count);
    const double s = rng.uniform(config.min_scale, config.max_scale);
    const auto side =
        static_cast<int64_t>(std::floor(product(static_cast<double>(n_src), s) + 0.5));
    const uint8_t* bytes = split.pixels().data() + k * n_src * n_src;
    for (int64_t p = 0; p < n_src * n_src; ++p) pixels[p] = static_cast<float>(bytes[p]) / 255.0f;
    const std::vector<float> resized = resize_bilinear(pixels.data(), n_src, side);
    // the tight extent of the visible pixels (> threshold, compared in float32 as numpy does)
    int64_t r0 = side, r1 = -1, c0 = side, c1 = -1;
    for (int64_t y = 0; y < side; ++y)
      for (int64_t x = 0; x < side; ++x)
        if (resized[y * side + x] > config.visible_threshold) {
          r0 = std::min(r0, y), r1 = std::max(r1, y), c0 = std::min(c0, x), c1 = std::max(c1, x);
        }
    for (int64_t attempt = 0; attempt < config.max_attempts; ++attempt) {
      const int64_t px = rng.integers(0, C - side + 1), py = rng.integers(0, C - side + 1);
      if (r1 < 0) continue;  // nothing visible: every attempt fails (never with Fashion-MNIST)
      const std::array<int64_t, 4> box = {px + c0, py + r0, px + c1 + 1, py + r1 + 1};
      const bool overlaps =
          std::any_of(scene.pixel_boxes.begin(), scene.pixel_boxes.end(),
                      [&](const auto& b) { return box_iou(box, b) > config.max_iou; });
      if (overlaps) continue;
      for (int64_t y = 0; y < side; ++y)  // canvas = max(canvas, item) over the square
        for (int64_t x = 0; x < side; ++x) {
          float& dst = canvas[(py + y) * C + px + x];
          dst = std::max(dst, resized[y * side + x]);
        }
      labels.push_back(split.label_vector()[k]);
      scene.pixel_boxes.push_back(box);
      scene.sources.push_back(k);
      break;
    }
  }
  // targets: ((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0) / canvas, in double, then float
  std::vector<float> boxes;
  for (const auto& b : scene.pixel_boxes) {
    const double x0 = b[0], y0 = b[1], x1 = b[2], y1 = b[3], c = static_cast<double>(C);
    for (double v : {(x0 + x1) / 2 / c, (y0 + y1) / 2 / c, (x1 - x0) / c, (y1 - y0) / c})
      boxes.push_back(static_cast<float>(v));
  }
  const auto items = static_cast<int64_t>(labels.size());
  scene.image = tensor(std::move(canvas), {1, C, C});
  scene.labels = tensor_i64(std::move(labels), {items});
  scene.boxes = tensor(std::move(boxes), {items, 4});
  return scene;
}

FashionMnistScenes::FashionMnistScenes(const FashionMNIST& split, int64_t count,
                                       const SceneConfig& config)
    : split_(&split), count_(count), config_(config) {
  LOOM_CHECK(count >= 0, "FashionMnistScenes: count {} is negative", count);
  LOOM_CHECK(split.size() > 0 && split.rows() == split.cols(),
             "FashionMnistScenes: needs a non-empty split of square images, got {} images of "
             "{}x{}", split.size(), split.rows(), split.cols());
  check_config(config, split.rows(), "FashionMnistScenes");
}

FashionMnistScenes::FashionMnistScenes(const FashionMNIST& split, int64_t count, uint64_t seed,
                                       const SceneConfig& config)
    : FashionMnistScenes(split, count, config) {
  seed_ = seed;
}

namespace {

// A sequential stream default_rng([stream, seed]) run through `count` scenes, keeping the state
// at the start of each.
std::vector<NumpyPCG64> stream_starts(const FashionMNIST& split, int64_t count, uint32_t stream,
                                      uint64_t seed, const SceneConfig& config) {
  std::vector<uint32_t> entropy = {stream};
  for (uint32_t w : numpy_int_words(seed)) entropy.push_back(w);
  NumpyPCG64 rng(entropy);
  std::vector<NumpyPCG64> starts;
  starts.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    starts.push_back(rng);
    draw_scene(split, rng, config);
  }
  return starts;
}

}  // namespace

FashionMnistScenes FashionMnistScenes::pytorch_eval(const FashionMNIST& t10k, int64_t count) {
  FashionMnistScenes scenes(t10k, count, SceneConfig{});
  scenes.starts_ = stream_starts(t10k, count, 0, 0, scenes.config_);
  return scenes;
}

FashionMnistScenes FashionMnistScenes::pytorch_train(const FashionMNIST& train, int64_t count,
                                                     uint64_t seed) {
  FashionMnistScenes scenes(train, count, SceneConfig{});
  scenes.seed_ = seed;
  scenes.starts_ = stream_starts(train, count, 1, seed, scenes.config_);
  return scenes;
}

NumpyPCG64 FashionMnistScenes::generator(int64_t index) const {
  if (!starts_.empty()) return starts_[static_cast<size_t>(index)];
  const auto words = [](uint64_t v) {
    return std::array<uint32_t, 2>{static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32)};
  };
  const auto s = words(seed_), i = words(static_cast<uint64_t>(index));
  return NumpyPCG64({3, s[0], s[1], i[0], i[1]});
}

Scene FashionMnistScenes::scene(int64_t index) const {
  LOOM_CHECK(index >= 0 && index < count_, "FashionMnistScenes::scene: index {} is not in [0, {})",
             index, count_);
  NumpyPCG64 rng = generator(index);
  return draw_scene(*split_, rng, config_);
}

SceneBatch FashionMnistScenes::batch(const std::vector<int64_t>& indices) const {
  LOOM_CHECK(!indices.empty(), "FashionMnistScenes::batch: no indices");
  std::vector<Tensor> images;
  SceneBatch out;
  for (int64_t i : indices) {
    Scene s = scene(i);
    images.push_back(s.image);
    out.targets.push_back({s.labels, s.boxes});
  }
  out.images = stack(images, 0);  // [B, 1, canvas, canvas]
  return out;
}

// ------------------------------------------------------------------ pictures
void write_scene_png(const std::string& path, const Scene& scene,
                     const SceneDetections& detections, int64_t scale) {
  const char* fn = "write_scene_png";
  LOOM_CHECK(scale >= 1 && scale <= 32, "{}: scale {} is not in 1..32", fn, scale);
  LOOM_CHECK(scene.image.defined() && scene.image.dim() == 3 && scene.image.size(0) == 1,
             "{}: scene.image must be [1, H, W]", fn);
  const int64_t H = scene.image.size(1), W = scene.image.size(2);
  Image img = resize_nearest(to_rgb(to_image(scene.image, 0.0f, 1.0f)), W * scale, H * scale);
  const auto& names = fashion_mnist_classes();
  const auto name = [&](int64_t label) {
    return label >= 0 && label < static_cast<int64_t>(names.size()) ? names[label]
                                                                    : std::to_string(label);
  };
  // a box given in canvas pixels (x0, y0, x1, y1), captioned above it (ground truth) or below
  // it (predictions), inside the box where the picture ends
  const auto draw = [&](double x0, double y0, double x1, double y1, const std::string& text,
                        RGB rgb, bool caption_below) {
    const auto X0 = std::lround(x0 * scale), Y0 = std::lround(y0 * scale);
    const auto X1 = std::lround(x1 * scale) - 1, Y1 = std::lround(y1 * scale) - 1;
    draw_rect(img, X0, Y0, X1, Y1, rgb, scale >= 3 ? 2 : 1);
    const int64_t h = text_size(text)[1];
    const int64_t y = caption_below ? (Y1 + 3 + h <= img.height ? Y1 + 3 : Y1 - h - 2)
                                    : (Y0 - h - 2 >= 0 ? Y0 - h - 2 : Y0 + 3);
    draw_text(img, X0 + 1, y, text, rgb);
  };
  const auto labels =
      scene.labels.defined() ? scene.labels.to_vector_i64() : std::vector<int64_t>{};
  LOOM_CHECK(labels.size() == scene.pixel_boxes.size(), "{}: {} labels but {} pixel boxes", fn,
             labels.size(), scene.pixel_boxes.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& b = scene.pixel_boxes[i];
    draw(b[0], b[1], b[2], b[3], name(labels[i]), RGB{60, 220, 60}, false);
  }
  if (!detections.boxes.defined()) return write_png(img, path);
  const int64_t q = detections.boxes.dim() == 2 ? detections.boxes.size(0) : -1;
  LOOM_CHECK(q >= 0 && detections.boxes.size(1) == 4 && detections.labels.defined() &&
                 detections.scores.defined() && detections.labels.numel() == q &&
                 detections.scores.numel() == q,
             "{}: detections need boxes [q, 4], labels [q] and scores [q]", fn);
  const auto boxes = detections.boxes.to_vector();
  const auto pred = detections.labels.to_vector_i64();
  const auto scores = detections.scores.to_vector();
  for (int64_t i = 0; i < q; ++i) {
    if (!(scores[i] >= detections.min_score)) continue;
    const double cx = boxes[i * 4] * W, cy = boxes[i * 4 + 1] * H, w = boxes[i * 4 + 2] * W,
                 h = boxes[i * 4 + 3] * H;
    const std::string caption =
        name(pred[i]) + " " + std::to_string(std::lround(scores[i] * 100)) + "%";
    draw(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, caption, RGB{255, 150, 30}, true);
  }
  write_png(img, path);
}

}  // namespace loom::data
