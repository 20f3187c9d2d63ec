// Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, arXiv:1708.07747): 70,000 grey 28x28 images of
// clothing in 10 classes, 60,000 for training and 10,000 for testing, stored like LeCun's MNIST
// in gzipped IDX files. Debian: `apt-get install dataset-fashion-mnist` puts them in
// /usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
//
// IDX format (http://yann.lecun.com/exdb/mnist/): two zero bytes, a dtype byte (0x08 = uint8,
// the only one these files use), the number of dimensions n, then n big-endian uint32 sizes,
// then the elements in row-major order. Images are [N, 28, 28] (n = 3), labels [N] (n = 1).
//
// Every reader here validates what it reads and throws loom::Error naming the file and the fault
// (missing file, bad magic or dtype, wrong rank, short or trailing data, corrupt or truncated
// gzip, mismatched counts, labels out of range); sizes from a header are checked against the
// bytes actually present before anything is allocated, and decompression is capped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"

namespace loom::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Mean and standard deviation of the training pixels scaled to [0, 1] (bench/reference/train.py's).
inline constexpr float kFashionMnistMean = 0.2860f, kFashionMnistStd = 0.3530f;
inline constexpr int64_t kFashionMnistClasses = 10;
// The most bytes a gzip stream or IDX file may expand to (the training images are 47 MB).
inline constexpr size_t kMaxIdxBytes = size_t{1} << 30;

// The class names, index = label: "T-shirt/top", "Trouser", ..., "Ankle boot".
const std::vector<std::string>& fashion_mnist_classes();

// A pixel 0..255 normalised as torchvision's ToTensor + Normalize(mean, std) would:
// (pixel / 255 - kFashionMnistMean) / kFashionMnistStd. A black pixel (0) gives about -0.810.
float normalize_fashion_mnist_pixel(uint8_t pixel);

// An IDX array of uint8 elements: its sizes and its row-major bytes.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Parses the bytes of an uncompressed IDX file. `source` names the file in errors.
IdxArray parse_idx(std::string_view bytes, const std::string& source);

// Decompresses a gzip stream (one or more members) held in memory. Throws loom::Error naming
// `source` if the stream is corrupt, ends early, or would expand past max_bytes.
std::string gunzip(std::string_view bytes, const std::string& source,
                   size_t max_bytes = kMaxIdxBytes);

// Reads and parses an IDX file, gzipped (recognised by the gzip magic 1f 8b) or raw.
IdxArray read_idx(const std::string& path);

// One split of Fashion-MNIST as a map-style dataset of {image, label}:
//   image float [1, rows, cols]  pixels / 255, then normalised if `normalize`
//   label int64 []               0..9 (0-d, so the DataLoader stacks labels to [B])
// split "train" reads train-*-ubyte.gz (60,000 images), "test" or "t10k" t10k-*-ubyte.gz
// (10,000). Uncompressed files (the same names without .gz) are read when no .gz is present.
// The pixels are kept as bytes (47 MB for train); get/images convert on demand.
class FashionMNIST : public Dataset {
 public:
  FashionMNIST(const std::string& dir, const std::string& split, bool normalize = true);
  int64_t size() const override;
  Example get(int64_t index) const override;  // {image [1, rows, cols], label []}
  std::vector<std::string> field_names() const override { return {"image", "label"}; }

  Tensor images(int64_t start, int64_t count) const;  // float [count, 1, rows, cols]
  Tensor labels(int64_t start, int64_t count) const;  // int64 [count]

  const std::vector<uint8_t>& pixels() const { return pixels_; }  // raw N * rows * cols bytes
  const std::vector<int64_t>& label_vector() const { return labels_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool normalized() const { return normalize_; }
  // The value a black pixel has in images(): the pad value for augment_images.
  float black_value() const { return normalize_ ? normalize_fashion_mnist_pixel(0) : 0.0f; }
  const std::string& image_path() const { return image_path_; }
  // Throws loom::Error "<who>: '<image file>' holds 32x32 images, not the 28x28 <of_what>" unless
  // the images are rows x cols: a trainer checks every split against its model before the first
  // step, rather than finding a misfit split at its first evaluation.
  void check_image_size(int64_t rows, int64_t cols, const std::string& who,
                        const std::string& of_what) const;

 private:
  void check_range(const char* what, int64_t start, int64_t count) const;
  void fill_images(float* out, int64_t start, int64_t count) const;

  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  std::string image_path_;
  int64_t rows_ = 0, cols_ = 0;
  bool normalize_ = true;
  float lut_[256];  // pixel byte -> the float it becomes
};

// Training augmentation of a batch of images float [B, C, H, W], as torchvision's
// RandomCrop(H, padding=p) then RandomHorizontalFlip(0.5), each image with its own draws:
//   crop: pad p pixels of pad_value on every side, then cut H x W at offsets (dy, dx) drawn
//         uniformly from 0..2p, so the content shifts by (p - dy, p - dx);
//   flip: with probability 1/2, reverse the columns (after the crop).
// The draws of image b are a pure function of (seed, counter, b) through Philox-4x32
// (core/rng.h): key = philox(counter, seed), draws = philox(b, key). A trainer passing
// counter = step therefore gets bit-identical batches after resuming from a checkpoint.
// pad_value should be what a black pixel is in the images: normalize_fashion_mnist_pixel(0) for
// normalised images (FashionMNIST::black_value()), not 0. Runs on the host; the result is on the
// device of `images`. crop_padding 0 and no flip return a copy of the images; crop_padding must
// be below H and W (a larger one could crop an image to nothing but padding).
struct AugmentOptions {
  int64_t crop_padding = 0;
  bool horizontal_flip = false;
  float pad_value = 0.0f;
};
Tensor augment_images(const Tensor& images, const AugmentOptions& options, uint64_t seed,
                      uint64_t counter);

}  // namespace loom::data
