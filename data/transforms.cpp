#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace loom::data {

namespace transforms {

// --- randomness --------------------------------------------------------------------------------

double Rng::uniform() { return static_cast<double>(gen_.next() >> 11) * 0x1.0p-53; }

int64_t Rng::randint(int64_t low, int64_t high) {
  LOOM_CHECK(high > low, "Rng::randint: empty range [{}, {})", low, high);
  return low + static_cast<int64_t>(gen_.uniform(static_cast<uint64_t>(high - low)));
}

namespace {
thread_local Rng thread_rng{0};
}  // namespace

Rng& current_rng() { return thread_rng; }

RngScope::RngScope(uint64_t seed) : saved_(std::exchange(thread_rng, Rng(seed))) {}
RngScope::~RngScope() { thread_rng = saved_; }

// --- images on the host ------------------------------------------------------------------------

namespace {

// An image [C, H, W] or a batch [N, C, H, W] of float32 as a contiguous host tensor, seen as
// n images of c x h x w; the output of a transform is made with the same leading dims.
struct Images {
  Tensor host;
  int64_t n = 1, c = 0, h = 0, w = 0;
  bool batched = false;
  Device device = Device::CPU;

  Images(const Tensor& x, const char* op) {
    LOOM_CHECK(x.defined(), "{}: the image is an undefined tensor", op);
    LOOM_CHECK(x.dim() == 3 || x.dim() == 4,
               "{}: expects an image [C, H, W] or a batch [N, C, H, W], got shape {}", op,
               shape_str(x.shape()));
    LOOM_CHECK(x.dtype() == DType::Float32,
               "{}: expects float32 images, got {} (ToFloat converts integer pixels)", op,
               dtype_name(x.dtype()));
    batched = x.dim() == 4;
    device = x.device();
    host = x.detach().to(Device::CPU).contiguous();
    if (batched) n = x.size(0);
    c = x.size(-3), h = x.size(-2), w = x.size(-1);
  }

  const float* image(int64_t i) const { return host.data_ptr<float>() + i * c * h * w; }

  // An uninitialised result of n images c x oh x ow on the host.
  Tensor output(int64_t oh, int64_t ow) const {
    const Shape shape = batched ? Shape{n, c, oh, ow} : Shape{c, oh, ow};
    return Tensor::empty(shape, DType::Float32, Device::CPU);
  }
  // The result on the input's device.
  Tensor deliver(const Tensor& out) const { return device == Device::CPU ? out : out.to(device); }
};

}  // namespace

// --- the transforms ----------------------------------------------------------------------------

Compose::Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {
  for (size_t i = 0; i < transforms_.size(); ++i)
    LOOM_CHECK(transforms_[i] != nullptr, "Compose: transform {} is empty", i);
}

Tensor Compose::operator()(const Tensor& x) const {
  Tensor y = x;
  for (const Transform& t : transforms_) y = t(y);
  return y;
}

ToFloat::ToFloat(float max_value) : max_value_(max_value) {
  LOOM_CHECK(max_value != 0.0f, "ToFloat: max_value 0 would divide by zero");
}

Tensor ToFloat::operator()(const Tensor& x) const {
  LOOM_CHECK(x.defined(), "ToFloat: the image is an undefined tensor");
  if (x.dtype() == DType::Float32) return x;
  LOOM_CHECK(x.dtype() == DType::Int64, "ToFloat: expects int64 (or float32) pixels, got {}",
             dtype_name(x.dtype()));
  const Tensor host = x.detach().to(Device::CPU).contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::Float32, Device::CPU);
  const int64_t* src = host.data_ptr<int64_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = static_cast<float>(src[i]) / max_value_;
  return x.device() == Device::CPU ? out : out.to(x.device());
}

Normalize::Normalize(std::vector<float> mean, std::vector<float> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  LOOM_CHECK(!mean_.empty() && mean_.size() == std_.size(),
             "Normalize: mean has {} values and std {}; give one per channel (or one for all)",
             mean_.size(), std_.size());
  for (float s : std_)
    LOOM_CHECK(s != 0.0f, "Normalize: std holds a zero, which would divide by zero");
}

Tensor Normalize::operator()(const Tensor& x) const {
  const Images in(x, "Normalize");
  const auto channels = static_cast<size_t>(in.c);
  LOOM_CHECK(mean_.size() == 1 || mean_.size() == channels,
             "Normalize: {} means and stds for images of {} channels (shape {})", mean_.size(),
             in.c, shape_str(x.shape()));
  Tensor out = in.output(in.h, in.w);
  const int64_t plane = in.h * in.w;
  float* dst = out.data_ptr<float>();
  const float* src = in.host.data_ptr<float>();
  for (int64_t i = 0; i < in.n * in.c; ++i) {
    const size_t c = mean_.size() == 1 ? 0 : static_cast<size_t>(i % in.c);
    // (x - mean) / std in this order, as torchvision's sub_ then div_ (bit-identical).
    for (int64_t p = i * plane; p < (i + 1) * plane; ++p) dst[p] = (src[p] - mean_[c]) / std_[c];
  }
  return in.deliver(out);
}

namespace {

// {h, w} from a size given as {s} or {h, w}, each positive.
std::pair<int64_t, int64_t> height_width(const Shape& size, const char* op) {
  LOOM_CHECK(size.size() == 1 || size.size() == 2,
             "{}: size has {} values; give {{h, w}} or one value for both", op, size.size());
  const int64_t h = size[0], w = size.back();
  LOOM_CHECK(h >= 1 && w >= 1, "{}: size {} must be positive", op, shape_str(size));
  return {h, w};
}

}  // namespace

RandomCrop::RandomCrop(int64_t size, int64_t padding, float fill)
    : RandomCrop(Shape{size}, padding, fill) {}

RandomCrop::RandomCrop(Shape size, int64_t padding, float fill) : padding_(padding), fill_(fill) {
  std::tie(height_, width_) = height_width(size, "RandomCrop");
  LOOM_CHECK(padding >= 0, "RandomCrop: padding {} is negative", padding);
}

Tensor RandomCrop::operator()(const Tensor& x) const { return (*this)(x, current_rng()); }

Tensor RandomCrop::operator()(const Tensor& x, Rng& rng) const {
  const Images in(x, "RandomCrop");
  const int64_t p = padding_, padded_h = in.h + 2 * p, padded_w = in.w + 2 * p;
  LOOM_CHECK(height_ <= padded_h && width_ <= padded_w,
             "RandomCrop: a {}x{} crop does not fit in a {}x{} image padded by {} ({}x{})",
             height_, width_, in.h, in.w, p, padded_h, padded_w);
  Tensor out = in.output(height_, width_);
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < in.n; ++i) {
    // torchvision's RandomCrop.get_params: top, then left, uniform over every fitting offset.
    const int64_t top = rng.randint(0, padded_h - height_ + 1);
    const int64_t left = rng.randint(0, padded_w - width_ + 1);
    const float* src = in.image(i);
    for (int64_t c = 0; c < in.c; ++c)
      for (int64_t y = 0; y < height_; ++y) {
        const int64_t sy = y + top - p;  // the row of the unpadded image
        for (int64_t xx = 0; xx < width_; ++xx) {
          const int64_t sx = xx + left - p;
          const bool inside = sy >= 0 && sy < in.h && sx >= 0 && sx < in.w;
          *dst++ = inside ? src[(c * in.h + sy) * in.w + sx] : fill_;
        }
      }
  }
  return in.deliver(out);
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  LOOM_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: probability {} is outside [0, 1]", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x) const {
  return (*this)(x, current_rng());
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x, Rng& rng) const {
  const Images in(x, "RandomHorizontalFlip");
  Tensor out = in.output(in.h, in.w);
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < in.n; ++i) {
    const bool flip = rng.uniform() < p_;  // torchvision: torch.rand(1) < p
    const float* src = in.image(i);
    for (int64_t row = 0; row < in.c * in.h; ++row, src += in.w, dst += in.w) {
      if (flip)
        std::reverse_copy(src, src + in.w, dst);
      else
        std::copy(src, src + in.w, dst);
    }
  }
  return in.deliver(out);
}

Resize::Resize(int64_t size) : size_{size} { height_width(size_, "Resize"); }
Resize::Resize(Shape size) : size_(std::move(size)) { height_width(size_, "Resize"); }

namespace {

// PyTorch's bilinear sampling along one axis (align_corners = False): output index o reads
// the input at scale * (o + 0.5) - 0.5, clamped at 0, between i0 and i1 with weights l0, l1.
struct Tap {
  int64_t i0, i1;
  float l0, l1;
};

std::vector<Tap> bilinear_taps(int64_t in, int64_t out) {
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  std::vector<Tap> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const float src = std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
    const auto i0 = static_cast<int64_t>(src);
    const float l1 = src - static_cast<float>(i0);
    taps[static_cast<size_t>(o)] = {i0, i0 < in - 1 ? i0 + 1 : i0, 1.0f - l1, l1};
  }
  return taps;
}

}  // namespace

Tensor Resize::operator()(const Tensor& x) const {
  const Images in(x, "Resize");
  int64_t oh = size_[0], ow = size_.back();
  if (size_.size() == 1) {
    // torchvision: the shorter side becomes `size`, the longer int(size * long / short).
    const int64_t shorter = std::min(in.h, in.w), longer = std::max(in.h, in.w);
    const auto scaled = static_cast<int64_t>(static_cast<double>(size_[0]) *
                                             static_cast<double>(longer) /
                                             static_cast<double>(shorter));
    oh = in.h <= in.w ? size_[0] : scaled;
    ow = in.h <= in.w ? scaled : size_[0];
  }
  const std::vector<Tap> rows = bilinear_taps(in.h, oh), cols = bilinear_taps(in.w, ow);
  Tensor out = in.output(oh, ow);
  float* dst = out.data_ptr<float>();
  for (int64_t plane = 0; plane < in.n * in.c; ++plane) {
    const float* src = in.host.data_ptr<float>() + plane * in.h * in.w;
    for (const Tap& r : rows) {
      const float* row0 = src + r.i0 * in.w;
      const float* row1 = src + r.i1 * in.w;
      for (const Tap& c : cols)
        *dst++ = r.l0 * (c.l0 * row0[c.i0] + c.l1 * row0[c.i1]) +
                 r.l1 * (c.l0 * row1[c.i0] + c.l1 * row1[c.i1]);
    }
  }
  return in.deliver(out);
}

}  // namespace transforms

TransformDataset::TransformDataset(std::shared_ptr<const Dataset> dataset,
                                   transforms::Transform transform, int64_t field)
    : dataset_(std::move(dataset)), transform_(std::move(transform)), field_(field) {
  LOOM_CHECK(dataset_ != nullptr, "TransformDataset: the dataset is null");
  LOOM_CHECK(transform_ != nullptr, "TransformDataset: the transform is empty");
  LOOM_CHECK(field_ >= 0, "TransformDataset: field {} is negative", field_);
}

Example TransformDataset::get(int64_t index) const {
  Example example = dataset_->get(index);
  LOOM_CHECK(field_ < static_cast<int64_t>(example.size()),
             "TransformDataset: field {} of an example with {} fields", field_, example.size());
  Tensor& target = example[static_cast<size_t>(field_)];
  target = transform_(target);
  return example;
}

}  // namespace loom::data
