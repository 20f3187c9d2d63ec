// Fashion-MNIST scenes: numpy's default_rng repeated bit for bit, PyTorch's resize, the scene
// rules (counts, tight boxes, the IoU rule, split separation, determinism, purity in the index)
// on small generated data sets, the PNG view, and -- when the data set is installed -- every one
// of bench/reference/train.py's 1000 evaluation scenes plus training and per-scene streams, pixels
// included, against tests/golden/fashion_mnist_scenes.txt (tests/golden/gen_metrics.py).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "data/data_test_util.h"
#include "data/fashion_mnist_scenes.h"
#include "data/image.h"

using loom::Tensor;
using loom::testing::check_error;
using loom::testing::TempDir;
using loom::testing::write_file;
namespace data = loom::data;

namespace {

std::vector<std::string> fixture_lines() {
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/fashion_mnist_scenes.txt");
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The tab-separated fields of a fixture line.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, '\t');) out.push_back(f);
  return out;
}

uint64_t fnv1a64(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = reinterpret_cast<const unsigned char*>(c.data_ptr<float>());
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t i = 0; i < c.numel() * 4; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// A raw IDX data set of n 28x28 images: image i is a filled rectangle of intensity `value`
// (rows and columns depending on i), on black; labels i mod 10.
void write_tiny_split(const TempDir& dir, const std::string& prefix, uint32_t n, uint8_t value) {
  const auto header = [](std::vector<uint32_t> dims) {
    std::string h{'\0', '\0', '\x08', static_cast<char>(dims.size())};
    for (uint32_t d : dims)
      for (int s = 24; s >= 0; s -= 8) h += static_cast<char>((d >> s) & 0xff);
    return h;
  };
  std::string images = header({n, 28, 28}), labels = header({n});
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r0 = 2 + i % 7, r1 = 14 + (i * 5) % 13, c0 = 1 + (i * 3) % 9, c1 = 16 + i % 11;
    for (uint32_t y = 0; y < 28; ++y)
      for (uint32_t x = 0; x < 28; ++x)
        images += static_cast<char>(y >= r0 && y <= r1 && x >= c0 && x <= c1 ? value : 0);
    labels += static_cast<char>(i % 10);
  }
  write_file(dir.file(prefix + "-images-idx3-ubyte"), images);
  write_file(dir.file(prefix + "-labels-idx1-ubyte"), labels);
}

std::string tiny_dir(const TempDir& dir) {
  write_tiny_split(dir, "train", 40, 200);
  write_tiny_split(dir, "t10k", 30, 100);
  return dir.path().string();
}

// Small train (intensity 200) and test (intensity 100) splits in a temporary directory.
struct TinyData {
  TempDir dir;
  std::string path = tiny_dir(dir);
  data::FashionMNIST train{path, "train", false}, test{path, "test", false};
};

std::vector<float> values(const Tensor& t) { return t.contiguous().to_vector(); }

}  // namespace

TEST_CASE("NumpyPCG64 repeats numpy's default_rng: raw draws, integers, uniform") {
  const auto lines = fixture_lines();
  int checked = 0;
  for (size_t i = 0; i + 2 < lines.size(); ++i) {
    if (lines[i].rfind("rng\t", 0) != 0) continue;
    std::vector<uint32_t> words;
    std::istringstream w(fields(lines[i])[1]);
    for (uint64_t v; w >> v;) words.push_back(static_cast<uint32_t>(v));
    data::NumpyPCG64 raw(words), rng(words);
    std::istringstream r(fields(lines[i + 1])[1]), d(fields(lines[i + 2])[1]);
    for (int k = 0; k < 4; ++k) {
      uint64_t want = 0;
      r >> want;
      CHECK(raw.next_uint64() == want);
    }
    for (int round = 0; round < 12; ++round) {
      int64_t a, b, c, e;
      std::string u;
      d >> a >> b >> u >> c >> e;
      CHECK(rng.integers(1, 5) == a);
      CHECK(rng.integers(0, 60000) == b);
      CHECK(rng.uniform(0.6, 1.4) == std::strtod(u.c_str(), nullptr));
      CHECK(rng.integers(0, 26) == c);
      CHECK(rng.integers(0, 4294967295LL) == e);
    }
    ++checked;
  }
  CHECK(checked == 7);
  CHECK(data::numpy_int_words(0) == std::vector<uint32_t>{0});
  CHECK(data::numpy_int_words((uint64_t{256} << 32) | 7) == std::vector<uint32_t>{7, 256});
  data::NumpyPCG64 g({1});
  CHECK(g.integers(5, 6) == 5);  // a one-value range draws nothing, as numpy
  check_error([&] { g.integers(3, 3); }, {"NumpyPCG64::integers", "[3, 3)"});
  check_error([] { data::NumpyPCG64({}); }, {"empty entropy"});
}

TEST_CASE("resize_bilinear: identity at the same size, constants kept, corners from corners") {
  std::vector<float> src(28 * 28);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 255) / 255.0f;
  CHECK(data::resize_bilinear(src.data(), 28, 28) == src);
  const std::vector<float> flat(28 * 28, 0.25f);
  for (int64_t side : {17, 23, 39})
    for (float v : data::resize_bilinear(flat.data(), 28, side))
      CHECK(v == doctest::Approx(0.25f).epsilon(1e-7));
  // upsampling 2 -> 4: source index (i + .5) / 2 - .5 = -.25 (clamped to 0), .25, .75, 1.25
  const std::vector<float> two = {0, 1, 2, 3};
  const auto four = data::resize_bilinear(two.data(), 2, 4);
  CHECK(four[0] == 0.0f);
  CHECK(four[1] == 0.25f);
  CHECK(four[3] == 1.0f);
  CHECK(four[15] == 3.0f);
}

TEST_CASE("FashionMnistScenes: counts in range, boxes tight around visible pixels, IoU rule") {
  TinyData d;
  const data::FashionMnistScenes scenes(d.train, 60, 11);
  CHECK(scenes.size() == 60);
  int64_t items = 0;
  for (int64_t i = 0; i < scenes.size(); ++i) {
    const data::Scene s = scenes.scene(i);
    const int64_t n = s.labels.numel();
    CHECK(s.image.shape() == loom::Shape{1, 64, 64});
    CHECK(n >= 1);  // the first item always fits
    CHECK(n <= 4);
    CHECK(s.boxes.shape() == loom::Shape{n, 4});
    REQUIRE(s.pixel_boxes.size() == static_cast<size_t>(n));
    items += n;
    const auto px = values(s.image);
    const auto labels = s.labels.to_vector_i64();
    const auto boxes = values(s.boxes);
    for (int64_t k = 0; k < n; ++k) {
      const auto& b = s.pixel_boxes[k];
      CHECK(labels[k] == d.train.label_vector()[s.sources[k]]);
      CHECK((b[0] >= 0 && b[1] >= 0 && b[2] <= 64 && b[3] <= 64 && b[0] < b[2] && b[1] < b[3]));
      // normalised (cx, cy, w, h)
      CHECK(boxes[k * 4 + 0] == static_cast<float>((b[0] + b[2]) / 2.0 / 64));
      CHECK(boxes[k * 4 + 3] == static_cast<float>((b[3] - b[1]) / 64.0));
      // tight: each edge row / column of the box holds a visible pixel (the canvas is the max
      // over items, so the item's own visible pixels show there)
      const auto visible = [&](int64_t x, int64_t y) { return px[y * 64 + x] > 0.1f; };
      bool top = false, bottom = false, left = false, right = false;
      for (int64_t x = b[0]; x < b[2]; ++x) top |= visible(x, b[1]), bottom |= visible(x, b[3] - 1);
      for (int64_t y = b[1]; y < b[3]; ++y) left |= visible(b[0], y), right |= visible(b[2] - 1, y);
      CHECK((top && bottom && left && right));
      // the placement rule: IoU <= 0.3 with every earlier box
      for (int64_t j = 0; j < k; ++j) {
        const auto& a = s.pixel_boxes[j];
        const double iw = std::min(a[2], b[2]) - std::max(a[0], b[0]);
        const double ih = std::min(a[3], b[3]) - std::max(a[1], b[1]);
        const double inter = iw > 0 && ih > 0 ? iw * ih : 0;
        const double uni = double(a[2] - a[0]) * (a[3] - a[1]) + double(b[2] - b[0]) * (b[3] - b[1]) - inter;
        CHECK(inter / uni <= 0.3);
      }
    }
    // every visible canvas pixel lies in some box
    for (int64_t y = 0; y < 64; ++y)
      for (int64_t x = 0; x < 64; ++x) {
        if (px[y * 64 + x] <= 0.1f) continue;
        bool inside = false;
        for (const auto& b : s.pixel_boxes) inside |= x >= b[0] && x < b[2] && y >= b[1] && y < b[3];
        CHECK(inside);
      }
  }
  CHECK(items > 60);  // several items per scene on average
}

TEST_CASE("FashionMnistScenes: a pure function of (seed, index); batches stack scenes") {
  TinyData d;
  const data::FashionMnistScenes a(d.train, 20, 5), b(d.train, 20, 5), c(d.train, 20, 6);
  CHECK(values(a.scene(7).image) == values(b.scene(7).image));
  CHECK(a.scene(7).pixel_boxes == b.scene(7).pixel_boxes);
  const auto later_first = b.scene(19);  // any order: nothing is carried between scenes
  CHECK(values(a.scene(19).image) == values(later_first.image));
  CHECK(values(a.scene(7).image) != values(c.scene(7).image));
  CHECK(values(a.scene(7).image) != values(a.scene(8).image));
  const data::SceneBatch batch = a.batch({3, 1, 3});
  CHECK(batch.images.shape() == loom::Shape{3, 1, 64, 64});
  REQUIRE(batch.targets.size() == 3);
  const auto all = values(batch.images);
  const auto s1 = values(a.scene(1).image);
  CHECK(std::vector<float>(all.begin() + 4096, all.begin() + 8192) == s1);
  CHECK(batch.targets[1].labels.to_vector_i64() == a.scene(1).labels.to_vector_i64());
  CHECK(values(batch.targets[2].boxes) == values(a.scene(3).boxes));
  // the sequential stream keeps its start states: scene i is the same in any order too
  const auto seq = data::FashionMnistScenes::pytorch_train(d.train, 10, 3);
  const auto seq2 = data::FashionMnistScenes::pytorch_train(d.train, 10, 3);
  CHECK(values(seq.scene(9).image) == values(seq2.scene(9).image));
  CHECK(seq.scene(4).pixel_boxes == seq2.scene(4).pixel_boxes);
}

TEST_CASE("FashionMnistScenes: test scenes use the test split only") {
  TinyData d;  // train images have intensity 200, test images 100
  const auto test_scenes = data::FashionMnistScenes::pytorch_eval(d.test, 30);
  const data::FashionMnistScenes train_scenes(d.train, 30, 1);
  float test_max = 0, train_max = 0;
  for (int64_t i = 0; i < 30; ++i) {
    for (float v : values(test_scenes.scene(i).image)) test_max = std::max(test_max, v);
    for (float v : values(train_scenes.scene(i).image)) train_max = std::max(train_max, v);
    for (int64_t k : test_scenes.scene(i).sources) CHECK(k < d.test.size());
  }
  CHECK(test_max < 150.0f / 255.0f);  // 100 / 255 up to rounding in the resize
  CHECK(train_max > 150.0f / 255.0f);
}

TEST_CASE("write_scene_png draws the scene, its boxes and predictions, scaled up") {
  TinyData d;
  const data::FashionMnistScenes scenes(d.train, 2, 9);
  const data::Scene s = scenes.scene(0);
  TempDir out;
  data::write_scene_png(out.file("scene.png"), s);
  const data::Image img = data::read_image(out.file("scene.png"));
  CHECK(img.width == 256);
  CHECK(img.height == 256);
  CHECK(img.channels == 3);
  const auto& b = s.pixel_boxes[0];
  const uint8_t* corner = img.at(b[0] * 4, b[1] * 4);
  CHECK(corner[1] > corner[0]);  // ground truth in green
  data::SceneDetections det{s.boxes, s.labels, loom::full({s.labels.numel()}, 0.9f), 0.5f};
  data::write_scene_png(out.file("pred.png"), s, det, 3);
  const data::Image pred = data::read_image(out.file("pred.png"));
  CHECK(pred.width == 192);
  const uint8_t* p = pred.at(b[0] * 3, b[1] * 3);
  CHECK(p[0] > p[2]);  // a prediction on the same box, drawn last, in orange
  check_error([&] { data::write_scene_png(out.file("x.png"), s, det, 0); }, {"scale 0"});
  data::SceneDetections bad{s.boxes, s.labels, loom::full({7}, 0.9f), 0.0f};
  check_error([&] { data::write_scene_png(out.file("x.png"), s, bad); }, {"scores [q]"});
}

TEST_CASE("FashionMnistScenes rejects bad configurations and indices") {
  TinyData d;
  data::SceneConfig small;
  small.canvas = 32;  // the largest item is 39 px
  check_error([&] { data::FashionMnistScenes(d.train, 5, 1, small); }, {"canvas 32", "39"});
  data::SceneConfig items;
  items.min_items = 3;
  items.max_items = 2;
  check_error([&] { data::FashionMnistScenes(d.train, 5, 1, items); }, {"items [3, 2]"});
  const data::FashionMnistScenes scenes(d.train, 5, 1);
  check_error([&] { scenes.scene(5); }, {"index 5", "[0, 5)"});
  check_error([&] { scenes.batch({}); }, {"no indices"});
  check_error([&] { data::FashionMnistScenes(d.train, -1, 1); }, {"count -1"});
}

TEST_CASE("FashionMnistScenes equal bench/reference/train.py's scenes on the installed data set") {
  if (!std::filesystem::exists(std::string(data::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz")) {
    MESSAGE("skipped: " << data::kFashionMnistDir << " is absent");
    return;
  }
  const data::FashionMNIST test(data::kFashionMnistDir, "t10k", false);
  const data::FashionMNIST train(data::kFashionMnistDir, "train", false);
  const auto lines = fixture_lines();
  int blocks = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto f = fields(lines[i]);
    if (f[0] != "scenes") continue;
    const data::FashionMNIST& split = f[1] == "t10k" ? test : train;
    const uint64_t seed = std::stoull(f[3]);
    const int64_t count = std::stoll(f[4]);
    const auto scenes = f[2] == "per_scene" ? data::FashionMnistScenes(split, count, seed)
                        : f[1] == "t10k"    ? data::FashionMnistScenes::pytorch_eval(split, count)
                                            : data::FashionMnistScenes::pytorch_train(split, count, seed);
    int mismatches = 0;
    for (int64_t k = 0; k < count; ++k) {
      const auto g = fields(lines[i + 1 + k]);
      const data::Scene s = scenes.scene(k);
      std::ostringstream items, hash;
      const auto labels = s.labels.to_vector_i64();
      for (size_t j = 0; j < labels.size(); ++j) {
        const auto& b = s.pixel_boxes[j];
        items << (j ? " " : "") << labels[j] << " " << b[0] << " " << b[1] << " " << b[2] << " " << b[3];
      }
      hash << std::hex;
      hash.width(16);
      hash.fill('0');
      hash << fnv1a64(s.image);
      const bool same = std::stoll(g[1]) == s.labels.numel() && g[2] == hash.str() &&
                        (g.size() > 3 ? g[3] : "") == items.str();
      if (!same && ++mismatches <= 3)
        FAIL_CHECK(f[1] << " " << f[2] << " seed " << seed << " scene " << k << ": torch '"
                        << g[2] << " " << (g.size() > 3 ? g[3] : "") << "', loom '" << hash.str()
                        << " " << items.str() << "'");
    }
    CHECK(mismatches == 0);
    ++blocks;
  }
  CHECK(blocks == 5);
}
