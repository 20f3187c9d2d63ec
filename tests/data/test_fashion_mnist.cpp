// Fashion-MNIST reader: IDX parsing and its validation on small generated files (raw and gzipped,
// written here with zlib), the real data set when installed, and the batch augmentation.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "data/data_test_util.h"
#include "data/gzip_util.h"
#include "data/dataloader.h"
#include "data/fashion_mnist.h"

using loom::DType;
using loom::Shape;
using loom::Tensor;
using loom::testing::check_error;
using loom::testing::TempDir;
using loom::testing::gzip;
using loom::testing::write_file;
namespace data = loom::data;

namespace {

// An IDX file: magic 00 00 08 ndim, big-endian sizes, then `payload`.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& payload,
                      uint8_t dtype = 0x08) {
  std::string out{'\0', '\0', static_cast<char>(dtype), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((d >> shift) & 0xff);
  return out + payload;
}

std::string bytes_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// A small data set of n images rows x cols: pixel k of image i is (7 i + k) mod 256, label
// i mod 10.
struct TinySet {
  std::vector<uint8_t> pixels, labels;
};
TinySet tiny_set(uint32_t n, uint32_t rows, uint32_t cols) {
  TinySet s;
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t k = 0; k < rows * cols; ++k) s.pixels.push_back(static_cast<uint8_t>(7 * i + k));
    s.labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return s;
}

// Writes a split's two files into dir (gzipped unless raw).
void write_split(const TempDir& dir, const std::string& prefix, const std::string& images,
                 const std::string& labels, bool raw = false) {
  const std::string ext = raw ? "" : ".gz";
  write_file(dir.file(prefix + "-images-idx3-ubyte" + ext), raw ? images : gzip(images));
  write_file(dir.file(prefix + "-labels-idx1-ubyte" + ext), raw ? labels : gzip(labels));
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

bool real_data_present() {
  if (std::filesystem::exists(std::string(data::kFashionMnistDir) + "/train-images-idx3-ubyte.gz"))
    return true;
  MESSAGE("skipped: " << data::kFashionMnistDir
                      << " is absent (apt-get install dataset-fashion-mnist)");
  return false;
}

}  // namespace

TEST_CASE("parse_idx reads sizes and bytes; read_idx reads raw and gzipped files") {
  const std::string payload = "\x01\x02\x03\x04\x05\x06";
  const data::IdxArray a = data::parse_idx(idx_bytes({2, 3}, payload), "mem");
  CHECK(a.dims == std::vector<int64_t>{2, 3});
  CHECK(bytes_of(a.data) == payload);
  CHECK(data::parse_idx(idx_bytes({0, 5}, ""), "mem").data.empty());

  TempDir dir;
  write_file(dir.file("a.idx"), idx_bytes({6}, payload));
  write_file(dir.file("a.idx.gz"), gzip(idx_bytes({6}, payload)));
  for (const char* name : {"a.idx", "a.idx.gz"}) {
    const data::IdxArray r = data::read_idx(dir.file(name));
    CHECK(r.dims == std::vector<int64_t>{6});
    CHECK(bytes_of(r.data) == payload);
  }
  // Two gzip members concatenated decompress to the concatenation (as gzip -d does).
  CHECK(data::gunzip(gzip("ab") + gzip("cd"), "mem") == "abcd");
}

TEST_CASE("parse_idx rejects bad headers and sizes, naming the source") {
  check_error([] { data::parse_idx("\0\0", "f.idx"); }, {"f.idx", "too short"});
  check_error([] { data::parse_idx(std::string("\x01\0\x08\x01\0\0\0\0", 8), "f.idx"); },
              {"f.idx", "magic"});
  check_error([] { data::parse_idx(idx_bytes({1}, "x", 0x0d), "f.idx"); },
              {"f.idx", "element type 0x0d"});
  check_error([] { data::parse_idx(idx_bytes({}, ""), "f.idx"); }, {"f.idx", "0 dimensions"});
  check_error([] { data::parse_idx(idx_bytes({2, 3}, "").substr(0, 9), "f.idx"); },
              {"f.idx", "header of 2 dimensions"});
  check_error([] { data::parse_idx(idx_bytes({2, 3}, "abcde"), "f.idx"); },
              {"f.idx", "truncated", "[2,3]"});
  check_error([] { data::parse_idx(idx_bytes({2, 3}, "abcdefg"), "f.idx"); },
              {"f.idx", "1 bytes of trailing data"});
  // Sizes whose product overflows 64 bits are rejected before any allocation.
  check_error(
      [] { data::parse_idx(idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, "ab"), "f.idx"); },
      {"f.idx", "truncated"});
  check_error([] { data::parse_idx(gzip(idx_bytes({1}, "a")), "f.idx"); }, {"gzipped"});
}

TEST_CASE("gunzip rejects truncated, corrupt and oversized streams") {
  const std::string gz = gzip(std::string(1000, 'z') + "tail");
  check_error([&] { data::gunzip(gz.substr(0, gz.size() - 5), "f.gz"); }, {"f.gz", "truncated"});
  check_error([&] { data::gunzip(gz.substr(0, 12), "f.gz"); }, {"f.gz", "truncated"});
  check_error([&] { data::gunzip("", "f.gz"); }, {"f.gz", "truncated"});
  std::string corrupt = gz;
  corrupt[gz.size() - 6] ^= 0x55;  // a CRC-32 byte of the trailer
  check_error([&] { data::gunzip(corrupt, "f.gz"); }, {"f.gz", "corrupt"});
  check_error([&] { data::gunzip(gz + "junk", "f.gz"); }, {"f.gz", "corrupt"});
  check_error([&] { data::gunzip(gz, "f.gz", 1003); }, {"f.gz", "more than 1003 bytes"});
  CHECK(data::gunzip(gz, "f.gz", 1004).size() == 1004);
  // A gzip bomb: 64 MiB of zeros compresses to ~64 KB and must stop at the cap.
  const std::string bomb = gzip(std::string(size_t{64} << 20, '\0'));
  check_error([&] { data::gunzip(bomb, "bomb.gz", size_t{1} << 20); }, {"bomb.gz", "more than"});

  TempDir dir;
  write_file(dir.file("t.idx.gz"), gzip(idx_bytes({4}, "abcd")).substr(0, 20));
  check_error([&] { data::read_idx(dir.file("t.idx.gz")); }, {"t.idx.gz", "truncated"});
}

TEST_CASE("FashionMNIST reads a split of small generated files, gzipped or raw") {
  const TinySet s = tiny_set(5, 4, 3);
  for (bool raw : {false, true}) {
    CAPTURE(raw);
    TempDir dir;
    write_split(dir, "t10k", idx_bytes({5, 4, 3}, bytes_of(s.pixels)),
                idx_bytes({5}, bytes_of(s.labels)), raw);
    for (const char* split : {"test", "t10k"}) {
      const data::FashionMNIST ds(dir.path().string(), split, /*normalize=*/false);
      CHECK(ds.size() == 5);
      CHECK(ds.rows() == 4);
      CHECK(ds.cols() == 3);
      CHECK(ds.pixels() == s.pixels);
      CHECK(ds.label_vector() == std::vector<int64_t>{0, 1, 2, 3, 4});
      const data::Example e = ds.get(2);
      CHECK(e[0].shape() == Shape{1, 4, 3});
      CHECK(e[1].shape() == Shape{});
      CHECK(e[1].dtype() == DType::Int64);
      CHECK(*e[1].data_ptr<int64_t>() == 2);
      CHECK(values(e[0])[5] == static_cast<float>(s.pixels[2 * 12 + 5]) / 255.0f);
      const Tensor imgs = ds.images(1, 3);
      CHECK(imgs.shape() == Shape{3, 1, 4, 3});
      CHECK(values(imgs)[12 + 7] == static_cast<float>(s.pixels[2 * 12 + 7]) / 255.0f);
      const Tensor labels = ds.labels(3, 2);
      CHECK(labels.shape() == Shape{2});
      CHECK(labels.data_ptr<int64_t>()[1] == 4);
      CHECK(ds.images(5, 0).shape() == Shape{0, 1, 4, 3});
      check_error([&] { ds.get(5); }, {"FashionMNIST::get", "index 5"});
      check_error([&] { ds.images(4, 2); }, {"FashionMNIST::images", "[4, 6)"});
      check_error([&] { ds.labels(-1, 1); }, {"FashionMNIST::labels"});
    }
  }
}

TEST_CASE("FashionMNIST::check_image_size names the file and both sizes") {
  const TinySet s = tiny_set(2, 32, 32);
  TempDir dir;
  write_split(dir, "t10k", idx_bytes({2, 32, 32}, bytes_of(s.pixels)),
              idx_bytes({2}, bytes_of(s.labels)));
  const data::FashionMNIST test(dir.path().string(), "test");
  CHECK_NOTHROW(test.check_image_size(32, 32, "train_toy", "of the model"));
  check_error([&] { test.check_image_size(28, 28, "train_toy", "of --model vit"); },
              {"train_toy: '", "t10k-images-idx3-ubyte.gz' holds 32x32 images, not the 28x28 "
               "of --model vit"});
}

TEST_CASE("FashionMNIST batches through the DataLoader: images [B,1,H,W], labels [B]") {
  const TinySet s = tiny_set(6, 2, 2);
  TempDir dir;
  write_split(dir, "train", idx_bytes({6, 2, 2}, bytes_of(s.pixels)),
              idx_bytes({6}, bytes_of(s.labels)));
  auto ds = std::make_shared<data::FashionMNIST>(dir.path().string(), "train");
  data::DataLoader loader(ds, 4, /*shuffle=*/false);
  int batches = 0;
  for (const data::Batch& batch : loader) {
    CHECK(batch[0].shape() == Shape{batch[1].size(0), 1, 2, 2});
    CHECK(batch[1].dim() == 1);
    ++batches;
  }
  CHECK(batches == 2);
}

TEST_CASE("FashionMNIST rejects missing, malformed and inconsistent files") {
  const TinySet s = tiny_set(3, 2, 2);
  const std::string images = idx_bytes({3, 2, 2}, bytes_of(s.pixels));
  const std::string labels = idx_bytes({3}, bytes_of(s.labels));
  {
    TempDir dir;
    check_error([&] { data::FashionMNIST(dir.path().string(), "train"); },
                {"train-images-idx3-ubyte.gz", "not found", "dataset-fashion-mnist", "--data"});
    check_error([&] { data::FashionMNIST(dir.path().string(), "val"); }, {"unknown split 'val'"});
  }
  const auto expect = [](const std::string& img, const std::string& lab,
                         const std::vector<std::string>& pieces) {
    TempDir dir;
    write_split(dir, "train", img, lab);
    check_error([&] { data::FashionMNIST(dir.path().string(), "train"); }, pieces);
  };
  expect(idx_bytes({12}, bytes_of(s.pixels)), labels,
         {"train-images-idx3-ubyte.gz", "3 dimensions", "[12]"});
  expect(images, idx_bytes({3, 1}, bytes_of(s.labels)),
         {"train-labels-idx1-ubyte.gz", "1 dimension", "[3,1]"});
  expect(images, idx_bytes({2}, bytes_of(s.labels).substr(0, 2)),
         {"holds 3 images", "holds 2 labels"});
  expect(images, idx_bytes({3}, std::string("\x01\x0a\x02", 3)),
         {"train-labels-idx1-ubyte.gz", "label 10 at index 1"});
  expect(idx_bytes({0, 2, 2}, ""), idx_bytes({0}, ""), {"no pixels"});
  expect(images.substr(0, images.size() - 1), labels, {"train-images-idx3-ubyte.gz", "truncated"});
  expect(images + "x", labels, {"train-images-idx3-ubyte.gz", "trailing"});
  expect("\x1f\x8b garbage", labels, {"train-images-idx3-ubyte.gz"});
  {  // a truncated gzip file
    TempDir dir;
    const std::string gz = gzip(images);
    write_file(dir.file("train-images-idx3-ubyte.gz"), gz.substr(0, gz.size() / 2));
    write_file(dir.file("train-labels-idx1-ubyte.gz"), gzip(labels));
    check_error([&] { data::FashionMNIST(dir.path().string(), "train"); },
                {"train-images-idx3-ubyte.gz", "truncated"});
  }
}

TEST_CASE("FashionMNIST: the installed data set") {
  if (!real_data_present()) return;
  const data::FashionMNIST train(data::kFashionMnistDir, "train");
  const data::FashionMNIST test(data::kFashionMnistDir, "test", /*normalize=*/false);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(train.rows() == 28);
  CHECK(train.cols() == 28);
  // Reference values from Python: gzip + numpy on the same files.
  const std::vector<int64_t> first(train.label_vector().begin(), train.label_vector().begin() + 5);
  CHECK(first == std::vector<int64_t>{9, 0, 0, 3, 0});
  CHECK(test.label_vector()[0] == 9);
  CHECK(test.label_vector()[1] == 2);
  const auto& px = train.pixels();
  CHECK(std::accumulate(px.begin(), px.begin() + 784, int64_t{0}) == 76247);
  CHECK(std::accumulate(px.begin(), px.end(), int64_t{0}) == 3431114169);
  CHECK(data::fashion_mnist_classes().size() == 10);
  CHECK(data::fashion_mnist_classes()[9] == "Ankle boot");

  // Normalisation: (pixel / 255 - 0.2860) / 0.3530; the sum over image 0 matches numpy's float32.
  const std::vector<float> x = values(train.images(0, 1));
  REQUIRE(x.size() == 784);
  double sum = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    CHECK(x[k] == (static_cast<float>(px[k]) / 255.0f - 0.2860f) / 0.3530f);
    sum += x[k];
  }
  CHECK(sum == doctest::Approx(211.85223795950878).epsilon(1e-9));
  CHECK(train.black_value() == doctest::Approx(-0.8101983666419983).epsilon(1e-7));
  CHECK(values(test.get(0)[0])[400] == static_cast<float>(test.pixels()[400]) / 255.0f);

  // The trainer's augmentation on real images: padding 4 filled with black, flips; shape kept,
  // reproducible, and the pixel sum can only lose what the crop cuts off (black adds nothing).
  const data::AugmentOptions options{4, true, train.black_value()};
  const Tensor batch = train.images(0, 8);
  const Tensor aug = data::augment_images(batch, options, 1234, 5);
  CHECK(aug.shape() == Shape{8, 1, 28, 28});
  CHECK(values(aug) == values(data::augment_images(batch, options, 1234, 5)));
  CHECK(values(aug) != values(batch));
  const auto raw_sum = [&](const std::vector<float>& v) {  // back to pixel units, black = 0
    double total = 0;
    for (float f : v) total += (f * data::kFashionMnistStd + data::kFashionMnistMean) * 255.0;
    return total;
  };
  CHECK(raw_sum(values(aug)) <= raw_sum(values(batch)) + 1.0);
}

TEST_CASE("augment_images: identity, determinism, flip and padded crop") {
  // Every element distinct: 1, 2, 3, ...
  const int64_t B = 6, C = 2, H = 5, W = 4;
  Tensor images = Tensor::empty({B, C, H, W}, DType::Float32);
  float* p = images.data_ptr<float>();
  for (int64_t i = 0; i < images.numel(); ++i) p[i] = static_cast<float>(i + 1);
  const auto at = [&](const std::vector<float>& v, int64_t b, int64_t c, int64_t y, int64_t x) {
    return v[static_cast<size_t>(((b * C + c) * H + y) * W + x)];
  };
  const std::vector<float> orig = values(images);

  // padding 0 and no flip: the same images.
  const Tensor same = data::augment_images(images, {}, 1, 2);
  CHECK(same.shape() == images.shape());
  CHECK(values(same) == orig);

  // Flip only: each image is either unchanged or has its columns reversed, both happen,
  // and the same (seed, counter) gives the same choices.
  data::AugmentOptions flip;
  flip.horizontal_flip = true;
  int flipped = 0, kept = 0;
  for (uint64_t counter = 0; counter < 4; ++counter) {
    const std::vector<float> v = values(data::augment_images(images, flip, 7, counter));
    CHECK(v == values(data::augment_images(images, flip, 7, counter)));
    for (int64_t b = 0; b < B; ++b) {
      const bool is_flipped = at(v, b, 0, 0, 0) == at(orig, b, 0, 0, W - 1);
      bool ok = true;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H; ++y)
          for (int64_t x = 0; x < W; ++x)
            ok = ok && at(v, b, c, y, x) == at(orig, b, c, y, is_flipped ? W - 1 - x : x);
      CHECK(ok);
      (is_flipped ? flipped : kept) += 1;
    }
  }
  CHECK(flipped > 0);
  CHECK(kept > 0);

  // Crop with padding 2: every output pixel is either the pad value or the source pixel at one
  // per-image offset (dy, dx) in [-2, 2]; some image is shifted; channels share the offset.
  data::AugmentOptions crop;
  crop.crop_padding = 2;
  crop.pad_value = -9.0f;
  const std::vector<float> v = values(data::augment_images(images, crop, 7, 11));
  CHECK(v == values(data::augment_images(images, crop, 7, 11)));
  CHECK(v != values(data::augment_images(images, crop, 7, 12)));
  CHECK(v != values(data::augment_images(images, crop, 8, 11)));
  int shifted = 0;
  for (int64_t b = 0; b < B; ++b) {
    bool found = false;
    for (int64_t dy = -2; dy <= 2 && !found; ++dy)
      for (int64_t dx = -2; dx <= 2 && !found; ++dx) {
        bool match = true;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t y = 0; y < H; ++y)
            for (int64_t x = 0; x < W; ++x) {
              const int64_t sy = y + dy, sx = x + dx;
              const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
              match = match && at(v, b, c, y, x) == (inside ? at(orig, b, c, sy, sx) : -9.0f);
            }
        if (match) {
          found = true;
          shifted += dy != 0 || dx != 0;  // a shift brings in pad_value
        }
      }
    CHECK_MESSAGE(found, "image " << b << " is not a padded crop of the original");
  }
  CHECK(shifted > 0);
  // Draws depend only on the image's index: a batch of the first 3 images augments them alike.
  Tensor first3 = Tensor::empty({3, C, H, W}, DType::Float32);
  std::memcpy(first3.raw_data(), images.raw_data(), sizeof(float) * 3 * C * H * W);
  const std::vector<float> v3 = values(data::augment_images(first3, crop, 7, 11));
  CHECK(std::vector<float>(v.begin(), v.begin() + 3 * C * H * W) == v3);

  check_error([&] { data::augment_images(images.reshape({B * C, H, W}), crop, 0, 0); },
              {"augment_images", "[B, C, H, W]"});
  data::AugmentOptions negative;
  negative.crop_padding = -1;
  check_error([&] { data::augment_images(images, negative, 0, 0); }, {"crop_padding"});
  // A padding of the image's side or more (--crop-padding 1000000 trained on blank
  // images) is refused; W = 4 is the smaller side here.
  data::AugmentOptions huge;
  huge.crop_padding = 1000000;
  check_error([&] { data::augment_images(images, huge, 0, 0); },
              {"crop_padding 1000000", "[0, 4)", "5 x 4"});
  huge.crop_padding = W;
  check_error([&] { data::augment_images(images, huge, 0, 0); }, {"crop_padding 4"});
  huge.crop_padding = W - 1;
  CHECK(data::augment_images(images, huge, 0, 0).shape() == images.shape());
}
