// The image transforms of data/transforms.h: the deterministic ones against PyTorch goldens
// (tests/golden/gen_data_api.py), the random ones for their draws (repeatable, per image,
// uniform over the offsets), TransformDataset, and the errors each one raises.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "data_test_util.h"
#include "loom.h"

using namespace loom;
using namespace loom::data;
namespace T = loom::data::transforms;
using loom::testing::check_error;

namespace {

const std::map<std::string, Tensor>& goldens() {
  static const std::map<std::string, Tensor> tensors = [] {
    std::map<std::string, Tensor> m;
    for (auto& [name, t] : nn::read_safetensors(LOOM_TEST_DATA "/data_api.safetensors"))
      m.emplace(name, t);
    return m;
  }();
  return tensors;
}

// transform(in) of golden case `name` equals its out to float32 rounding.
void check_golden(const std::string& name, const T::Transform& transform) {
  INFO("case " << name);
  const Tensor in = goldens().at(name + ".in"), expected = goldens().at(name + ".out");
  const Tensor got = transform(in);
  REQUIRE(got.shape() == expected.shape());
  const std::vector<float> a = got.to_vector(), b = expected.to_vector();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
}

Tensor iota_image(Shape shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(n).reshape(shape).to(DType::Float32);
}

}  // namespace

TEST_CASE("transforms: Normalize matches torchvision, per channel or one value for all") {
  check_golden("normalize_rgb", T::Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}));
  check_golden("normalize_batch", T::Normalize({0.5f, 0.25f, -0.1f}, {0.5f, 2.0f, 0.3f}));
  check_golden("normalize_one_value", T::Normalize({0.2860f}, {0.3530f}));
}

TEST_CASE("transforms: Resize is PyTorch's bilinear interpolation, both size forms") {
  check_golden("resize_up_8x10", T::Resize({8, 10}));
  check_golden("resize_down_3x4", T::Resize({3, 4}));
  check_golden("resize_batch_7x5", T::Resize({7, 5}));
  check_golden("resize_short_side_9", T::Resize(9));
  check_golden("resize_short_side_4", T::Resize(4));
  check_golden("resize_same_size", T::Resize({5, 7}));
}

TEST_CASE("transforms: RandomCrop pads with the fill, RandomHorizontalFlip(1) is flip") {
  check_golden("crop_pad_2", T::RandomCrop({10, 9}, /*padding=*/2));
  check_golden("crop_pad_1_fill", T::RandomCrop({6, 8}, 1, -0.5f));
  check_golden("flip", T::RandomHorizontalFlip(1.0));
  check_golden("flip_batch", T::RandomHorizontalFlip(1.0));
  const Tensor x = iota_image({2, 3, 4});
  CHECK(T::RandomHorizontalFlip(0.0)(x).to_vector() == x.to_vector());
  CHECK(T::RandomCrop(Shape{3, 4})(x).to_vector() == x.to_vector());  // one offset: itself
}

TEST_CASE("transforms: a crop is a window of the padded image at a uniform offset") {
  // Image values are 1 + index, so each output pixel names its source (0 = padding).
  const Tensor x = iota_image({1, 4, 4}) + 1.0f;
  const T::RandomCrop crop(4, /*padding=*/1);
  T::Rng rng(3);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<float> out = crop(x, rng).to_vector();
    // The pixel that landed at the top-left of the content gives the shift.
    int64_t dy = -9, dx = -9;
    for (int64_t y = 0; y < 4 && dy == -9; ++y)
      for (int64_t c = 0; c < 4; ++c)
        if (out[static_cast<size_t>(y * 4 + c)] > 0) {
          const auto v = static_cast<int64_t>(out[static_cast<size_t>(y * 4 + c)]) - 1;
          dy = y - v / 4, dx = c - v % 4;
          break;
        }
    REQUIRE(std::abs(dy) <= 1);
    REQUIRE(std::abs(dx) <= 1);
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t c = 0; c < 4; ++c) {
        const int64_t sy = y - dy, sx = c - dx;
        const float want = (sy >= 0 && sy < 4 && sx >= 0 && sx < 4) ? float(sy * 4 + sx + 1) : 0;
        REQUIRE(out[static_cast<size_t>(y * 4 + c)] == want);
      }
    offsets.insert({dy, dx});
  }
  CHECK(offsets.size() == 9);  // every one of the 3 x 3 offsets is drawn
}

TEST_CASE("transforms: random transforms repeat under a seed and draw per image") {
  const Tensor batch = rand({16, 1, 6, 6});
  const T::Compose augment({T::RandomCrop(6, 2), T::RandomHorizontalFlip()});
  Tensor a, b, c;
  {
    T::RngScope scope(42);
    a = augment(batch);
  }
  {
    T::RngScope scope(42);
    b = augment(batch);
  }
  {
    T::RngScope scope(43);
    c = augment(batch);
  }
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());
  // Image i of the batch is what image i alone gets from the same stream position: the draws
  // go image by image (crop of image 0, ..., then the flips of each).
  T::Rng rng(7);
  const Tensor cropped = T::RandomCrop(6, 2)(batch, rng);
  T::Rng rng2(7);
  for (int64_t i = 0; i < 16; ++i) {
    const Tensor one = T::RandomCrop(6, 2)(batch.narrow(0, i, 1).reshape({1, 6, 6}), rng2);
    CHECK(one.to_vector() == cropped.narrow(0, i, 1).contiguous().to_vector());
  }
  // About half of 400 images are flipped.
  const Tensor ramp = iota_image({400, 1, 1, 2});
  const std::vector<float> flipped = T::RandomHorizontalFlip()(ramp).to_vector();
  int count = 0;
  for (size_t i = 0; i < 400; ++i) count += flipped[2 * i] > flipped[2 * i + 1];
  CHECK(count > 160);
  CHECK(count < 240);
}

TEST_CASE("transforms: ToFloat scales integer pixels, Compose chains, TransformDataset maps") {
  const Tensor pixels = tensor_i64({0, 51, 255, 128}, {1, 2, 2});
  const Tensor f = T::ToFloat()(pixels);
  CHECK(f.dtype() == DType::Float32);
  CHECK(f.to_vector() == std::vector<float>{0.0f, 51 / 255.0f, 1.0f, 128 / 255.0f});
  CHECK(T::ToFloat(1.0f)(pixels).to_vector() == std::vector<float>{0, 51, 255, 128});
  const Tensor already = rand({1, 2, 2});
  CHECK(T::ToFloat()(already).to_vector() == already.to_vector());

  const T::Compose chain({T::ToFloat(), T::Normalize({0.5f}, {0.5f}), T::RandomHorizontalFlip(1)});
  CHECK(chain(pixels).to_vector() ==
        std::vector<float>{(51 / 255.0f - 0.5f) / 0.5f, -1.0f, (128 / 255.0f - 0.5f) / 0.5f,
                           1.0f});
  CHECK(T::Compose({})(pixels).to_vector_i64() == pixels.to_vector_i64());

  auto images = std::make_shared<TensorDataset>(
      std::vector<Tensor>{tensor_i64({0, 255, 0, 255}, {2, 1, 1, 2}), tensor_i64({4, 5}, {2})},
      std::vector<std::string>{"image", "label"});
  TransformDataset mapped(images, T::Compose({T::ToFloat(), T::RandomHorizontalFlip(1)}));
  CHECK(mapped.size() == 2);
  CHECK(mapped.field_names() == std::vector<std::string>{"image", "label"});
  const Example e = mapped.get(1);
  CHECK(e[0].to_vector() == std::vector<float>{1.0f, 0.0f});
  CHECK(e[1].to_vector_i64()[0] == 5);
  TransformDataset labels(images, [](const Tensor& y) { return y.to(DType::Float32); }, 1);
  CHECK(labels.get(0)[1].to_vector() == std::vector<float>{4.0f});
}

TEST_CASE("transforms: misuse is a loom::Error naming the transform and the shapes") {
  const Tensor image = rand({3, 4, 4});
  check_error([] { T::Normalize({0.5f, 0.5f}, {0.5f}); }, {"Normalize", "2", "1"});
  check_error([] { T::Normalize({}, {}); }, {"Normalize"});
  check_error([] { T::Normalize({0.5f}, {0.0f}); }, {"Normalize", "zero"});
  check_error([&] { T::Normalize({0.1f, 0.2f}, {1.0f, 1.0f})(image); },
              {"Normalize", "2 means", "3 channels", shape_str({3, 4, 4})});
  check_error([&] { T::Normalize({0.1f}, {1.0f})(rand({4, 4})); },
              {"Normalize", "[C, H, W]", shape_str({4, 4})});
  check_error([&] { T::Normalize({0.1f}, {1.0f})(tensor_i64({1, 2}, {1, 1, 2})); },
              {"Normalize", "float32", "int64"});
  check_error([&] { T::RandomCrop(7, 1)(image); },
              {"RandomCrop", "7x7", "4x4", "padded by 1", "6x6"});
  check_error([] { T::RandomCrop(4, -1); }, {"RandomCrop", "padding", "-1"});
  check_error([] { T::RandomCrop(Shape{0, 3}); }, {"RandomCrop", "positive"});
  check_error([] { T::RandomCrop(Shape{1, 2, 3}); }, {"RandomCrop", "3 values"});
  check_error([] { T::RandomHorizontalFlip(1.5); }, {"RandomHorizontalFlip", "1.5"});
  check_error([] { T::Resize(0); }, {"Resize", "positive"});
  check_error([&] { T::Resize(2)(rand({2, 2, 2, 2, 2})); }, {"Resize", "[N, C, H, W]"});
  check_error([] { T::ToFloat()(Tensor::empty({2}, DType::BFloat16)); }, {"ToFloat", "bfloat16"});
  check_error([] { T::ToFloat(0.0f); }, {"ToFloat", "zero"});
  check_error([] { T::Compose({T::Transform()}); }, {"Compose", "transform 0"});
  auto one = std::make_shared<TensorDataset>(std::vector<Tensor>{rand({2, 1, 2, 2})});
  check_error([&] { TransformDataset(one, T::ToFloat(), 1).get(0); },
              {"TransformDataset", "field 1", "1 fields"});
  check_error([&] { TransformDataset(one, nullptr); }, {"TransformDataset", "empty"});
}
