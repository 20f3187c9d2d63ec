#include "data/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/rng.h"

namespace loom::data {

namespace {

constexpr const char* kInstallHint =
    "install it with `apt-get install dataset-fashion-mnist` (or scripts/install_deps.sh), or "
    "point --data at a directory holding the Fashion-MNIST IDX files";

// --- IDX ------------------------------------------------------------------------------------

uint32_t big_endian_u32(std::string_view bytes, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + at;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// The whole file, refusing files larger than max_bytes before reading them.
std::string read_bytes(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  LOOM_CHECK(std::filesystem::is_regular_file(path, ec),
             "Fashion-MNIST: file {} not found; {}", path, kInstallHint);
  const uintmax_t size = std::filesystem::file_size(path, ec);
  LOOM_CHECK(!ec, "read_idx: cannot stat {}: {}", path, ec.message());
  LOOM_CHECK(size <= max_bytes, "read_idx: {} is {} bytes, more than the limit of {}", path, size,
             max_bytes);
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  LOOM_CHECK(in.good() || (size == 0 && in.eof()), "read_idx: cannot read {}", path);
  return bytes;
}

// --- Fashion-MNIST files --------------------------------------------------------------------

// "train" -> "train", "test"/"t10k" -> "t10k".
std::string file_prefix(const std::string& split) {
  if (split == "train") return "train";
  if (split == "test" || split == "t10k") return "t10k";
  LOOM_FAIL("FashionMNIST: unknown split '{}' (expected \"train\", \"test\" or \"t10k\")", split);
}

// dir/name.gz, or dir/name when only the uncompressed file is there.
std::string data_file(const std::string& dir, const std::string& name) {
  const std::filesystem::path gz = std::filesystem::path(dir) / (name + ".gz");
  const std::filesystem::path raw = std::filesystem::path(dir) / name;
  std::error_code ec;
  if (!std::filesystem::exists(gz, ec) && std::filesystem::exists(raw, ec)) return raw.string();
  return gz.string();
}

}  // namespace

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                 "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

float normalize_fashion_mnist_pixel(uint8_t pixel) {
  // Same float32 operations as ToTensor (x / 255) then Normalize ((x - mean) / std).
  return (static_cast<float>(pixel) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
}

IdxArray parse_idx(std::string_view bytes, const std::string& source) {
  LOOM_CHECK(bytes.size() >= 4, "parse_idx: {} is {} bytes, too short for an IDX header (4)",
             source, bytes.size());
  const auto byte = [&](size_t i) { return static_cast<unsigned>(static_cast<uint8_t>(bytes[i])); };
  LOOM_CHECK(byte(0) == 0 && byte(1) == 0,
             "parse_idx: {} does not start with the IDX magic 00 00 (got {:02x} {:02x}); "
             "not an IDX file{}",
             source, byte(0), byte(1), is_gzip(bytes) ? " (it is gzipped: use read_idx)" : "");
  LOOM_CHECK(byte(2) == 0x08,
             "parse_idx: {} has element type 0x{:02x}; only 0x08 (unsigned byte) is supported",
             source, byte(2));
  const size_t ndim = byte(3);
  LOOM_CHECK(ndim >= 1, "parse_idx: {} has 0 dimensions", source);
  const size_t header = 4 + 4 * ndim;
  LOOM_CHECK(bytes.size() >= header,
             "parse_idx: {} is {} bytes, too short for the header of {} dimensions ({} bytes)",
             source, bytes.size(), ndim, header);
  // The product of the sizes must equal the bytes present; compared before any allocation,
  // and stopping as soon as it exceeds them, so absurd sizes cannot overflow.
  const size_t present = bytes.size() - header;
  IdxArray array;
  bool any_zero = false;
  size_t product = 1;
  for (size_t d = 0; d < ndim; ++d) {
    const uint32_t size = big_endian_u32(bytes, 4 + 4 * d);
    array.dims.push_back(size);
    if (size == 0) any_zero = true;
    if (!any_zero && product <= present)
      product = product > present / size ? present + 1 : product * size;
  }
  if (any_zero) product = 0;
  LOOM_CHECK(product <= present,
             "parse_idx: {} is truncated: its sizes {} need more than the {} data bytes present",
             source, shape_str(array.dims), present);
  LOOM_CHECK(product == present,
             "parse_idx: {} has {} bytes of trailing data after the {} elements of sizes {}",
             source, present - product, product, shape_str(array.dims));
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data()) + header;
  array.data.assign(data, data + present);
  return array;
}

std::string gunzip(std::string_view bytes, const std::string& source, size_t max_bytes) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip wrapper (header and CRC-32 trailer) around deflate data.
  LOOM_CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "gunzip: {}: zlib init failed", source);
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};

  std::string out;
  std::vector<char> chunk(size_t{1} << 16);
  size_t fed = 0;  // input bytes handed to zlib so far
  for (;;) {
    if (zs.avail_in == 0 && fed < bytes.size()) {  // avail_in is 32-bit: feed at most 1 GiB
      const size_t n = std::min(bytes.size() - fed, size_t{1} << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + fed));
      zs.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_out = static_cast<uInt>(chunk.size());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = chunk.size() - zs.avail_out;
    LOOM_CHECK(produced <= max_bytes - out.size(),
               "gunzip: {} decompresses to more than {} bytes; refusing it", source, max_bytes);
    out.append(chunk.data(), produced);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 && fed == bytes.size()) break;
      // More input: the next member of a multi-member gzip file (anything else is an error).
      LOOM_CHECK(inflateReset(&zs) == Z_OK, "gunzip: {}: zlib reset failed", source);
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && fed == bytes.size())
      LOOM_FAIL("gunzip: {} is truncated: the gzip stream ends early, after all {} input "
                "bytes ({} bytes out)",
                source, bytes.size(), out.size());
    LOOM_CHECK(rc == Z_OK, "gunzip: {} is corrupt: zlib error {} ({}) at input byte {}", source,
               rc, zs.msg ? zs.msg : "no message", fed - zs.avail_in);
  }
  return out;
}

IdxArray read_idx(const std::string& path) {
  const std::string bytes = read_bytes(path, kMaxIdxBytes);
  if (is_gzip(bytes)) return parse_idx(gunzip(bytes, path), path);
  return parse_idx(bytes, path);
}

// --- the data set ---------------------------------------------------------------------------

FashionMNIST::FashionMNIST(const std::string& dir, const std::string& split, bool normalize)
    : normalize_(normalize) {
  const std::string prefix = file_prefix(split);
  const std::string image_path = data_file(dir, prefix + "-images-idx3-ubyte");
  const std::string label_path = data_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(image_path);
  IdxArray labels = read_idx(label_path);
  LOOM_CHECK(images.dims.size() == 3,
             "FashionMNIST: {} should hold images [N, rows, cols] (3 dimensions), got sizes {}",
             image_path, shape_str(images.dims));
  LOOM_CHECK(labels.dims.size() == 1,
             "FashionMNIST: {} should hold labels [N] (1 dimension), got sizes {}", label_path,
             shape_str(labels.dims));
  LOOM_CHECK(images.dims[0] == labels.dims[0],
             "FashionMNIST: {} holds {} images but {} holds {} labels", image_path,
             images.dims[0], label_path, labels.dims[0]);
  LOOM_CHECK(images.dims[0] > 0 && images.dims[1] > 0 && images.dims[2] > 0,
             "FashionMNIST: {} holds no pixels (sizes {})", image_path, shape_str(images.dims));
  for (size_t i = 0; i < labels.data.size(); ++i)
    LOOM_CHECK(labels.data[i] < kFashionMnistClasses,
               "FashionMNIST: {} has label {} at index {}; labels must be 0..{}", label_path,
               static_cast<int>(labels.data[i]), i, kFashionMnistClasses - 1);
  image_path_ = image_path;
  rows_ = images.dims[1];
  cols_ = images.dims[2];
  pixels_ = std::move(images.data);
  labels_.assign(labels.data.begin(), labels.data.end());
  for (int v = 0; v < 256; ++v)
    lut_[v] = normalize_ ? normalize_fashion_mnist_pixel(static_cast<uint8_t>(v))
                         : static_cast<float>(v) / 255.0f;
}

int64_t FashionMNIST::size() const { return static_cast<int64_t>(labels_.size()); }

void FashionMNIST::check_range(const char* what, int64_t start, int64_t count) const {
  LOOM_CHECK(start >= 0 && count >= 0 && start <= size() && count <= size() - start,
             "FashionMNIST::{}: range [{}, {}) out of [0, {})", what, start, start + count, size());
}

void FashionMNIST::fill_images(float* out, int64_t start, int64_t count) const {
  const size_t n = static_cast<size_t>(count * rows_ * cols_);
  const uint8_t* src = pixels_.data() + start * rows_ * cols_;
  for (size_t i = 0; i < n; ++i) out[i] = lut_[src[i]];
}

Example FashionMNIST::get(int64_t index) const {
  LOOM_CHECK(index >= 0 && index < size(), "FashionMNIST::get: index {} out of range [0, {})",
             index, size());
  Tensor image = Tensor::empty({1, rows_, cols_}, DType::Float32, Device::CPU);  // [1, H, W]
  fill_images(image.data_ptr<float>(), index, 1);
  Tensor label = Tensor::empty(Shape{}, DType::Int64, Device::CPU);  // []
  *label.data_ptr<int64_t>() = labels_[static_cast<size_t>(index)];
  return {image, label};
}

void FashionMNIST::check_image_size(int64_t rows, int64_t cols, const std::string& who,
                                    const std::string& of_what) const {
  LOOM_CHECK(rows_ == rows && cols_ == cols, "{}: '{}' holds {}x{} images, not the {}x{} {}", who,
             image_path_, rows_, cols_, rows, cols, of_what);
}

Tensor FashionMNIST::images(int64_t start, int64_t count) const {
  check_range("images", start, count);
  Tensor out = Tensor::empty({count, 1, rows_, cols_}, DType::Float32, Device::CPU);
  fill_images(out.data_ptr<float>(), start, count);
  return out;
}

Tensor FashionMNIST::labels(int64_t start, int64_t count) const {
  check_range("labels", start, count);
  Tensor out = Tensor::empty({count}, DType::Int64, Device::CPU);  // [count]
  std::memcpy(out.raw_data(), labels_.data() + start, static_cast<size_t>(count) * sizeof(int64_t));
  return out;
}

// --- augmentation ---------------------------------------------------------------------------

Tensor augment_images(const Tensor& images, const AugmentOptions& options, uint64_t seed,
                      uint64_t counter) {
  LOOM_CHECK(images.defined() && images.dim() == 4 && images.dtype() == DType::Float32,
             "augment_images: expected float32 images [B, C, H, W], got {} {}",
             images.defined() ? dtype_name(images.dtype()) : "undefined",
             images.defined() ? shape_str(images.shape()) : "");
  const int64_t H = images.size(2), W = images.size(3);
  // A padding of H or W or more can shift an image out of its crop entirely (all padding): a
  // model would train on blank images. Bounded so, 2p + 1 cannot overflow either.
  LOOM_CHECK(options.crop_padding == 0 ||
                 (options.crop_padding > 0 && options.crop_padding < std::min(H, W)),
             "augment_images: crop_padding {} must be in [0, {}) for images of {} x {}",
             options.crop_padding, std::min(H, W), H, W);
  const Tensor src = images.detach().to(Device::CPU).contiguous();
  const int64_t B = src.size(0), C = src.size(1);
  const int64_t p = options.crop_padding;
  Tensor out = Tensor::empty(src.shape(), DType::Float32, Device::CPU);  // [B, C, H, W]
  const float* in = src.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  // One Philox key per call, one block of four words per image.
  const Philox4 k = philox4x32(counter, seed);
  const uint64_t key = (uint64_t{k.v[1]} << 32) | k.v[0];
  for (int64_t b = 0; b < B; ++b) {
    const Philox4 r = philox4x32(static_cast<uint64_t>(b), key);
    const uint64_t span = static_cast<uint64_t>(2 * p + 1);
    const int64_t dy = static_cast<int64_t>(r.v[0] % span) - p;  // content moves by -dy rows
    const int64_t dx = static_cast<int64_t>(r.v[1] % span) - p;
    const bool flip = options.horizontal_flip && (r.v[2] & 1u);
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = in + (b * C + c) * H * W;
      float* o = dst + (b * C + c) * H * W;
      for (int64_t y = 0; y < H; ++y) {
        const int64_t sy = y + dy;  // source row of output row y
        for (int64_t x = 0; x < W; ++x) {
          const int64_t sx = (flip ? W - 1 - x : x) + dx;  // flip after crop
          const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
          o[y * W + x] = inside ? plane[sy * W + sx] : options.pad_value;
        }
      }
    }
  }
  return images.device() == Device::CPU ? out : out.to(images.device());
}

}  // namespace loom::data
