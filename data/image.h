// 8-bit images for the trainers' pictures: PNG in and out (through Debian's libstb), tensors
// mapped to gray or colour-mapped pixels, and the few drawing primitives the figures need
// (rectangles, text, blending, tiling, a labelled heat map for attention and confusion matrices).
//
// Conventions: an Image is row-major with its channels interleaved (pixel (x, y) starts at
// pixels[(y * width + x) * channels]); x grows to the right, y downwards; channels is 1 (gray),
// 2 (gray + alpha), 3 (RGB) or 4 (RGBA). Drawing clips to the image: anything outside is dropped.
// Every failure is a loom::Error naming the function and the file or values at fault.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace loom::data {

using RGB = std::array<uint8_t, 3>;

struct Image {
  int64_t width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels bytes

  Image() = default;
  // A width x height image with every byte set to `fill`; throws unless the sizes are positive
  // (at most kMaxImageSide each, and kMaxImagePixels together) and channels is 1..4.
  Image(int64_t width, int64_t height, int64_t channels, uint8_t fill = 0);

  // The first channel of pixel (x, y). Unchecked: callers stay inside [0, width) x [0, height).
  uint8_t* at(int64_t x, int64_t y) { return pixels.data() + (y * width + x) * channels; }
  const uint8_t* at(int64_t x, int64_t y) const {
    return pixels.data() + (y * width + x) * channels;
  }
  bool contains(int64_t x, int64_t y) const { return x >= 0 && y >= 0 && x < width && y < height; }
};

// The largest width or height read_image/decode_image accept (and Image allocates), and the most
// pixels: 8192 x 8192, 256 MB as RGBA. A 1 MB PNG can declare 16384 x 16384 (1 GB decoded, 4 s).
inline constexpr int64_t kMaxImageSide = 16384;
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// --- files ------------------------------------------------------------------
// Encodes `image` as PNG into `path` + ".tmp", then renames it over `path`.
void write_png(const Image& image, const std::string& path);
// PNG or binary PGM/PPM (P5/P6) (no JPEG: see image.cpp), 8 or 16 bit (16 is scaled to 8); the
// file's own channel count is kept, except gray + alpha which becomes RGBA. Throws naming `path`
// for a missing file, another format, bad or truncated data or a side above kMaxImageSide.
Image read_image(const std::string& path);
// The same from bytes in memory; `source` names them in errors.
Image decode_image(std::string_view bytes, const std::string& source);

// What a file's header declares (channels as read_image gives them), checked as read_image
// checks it -- format, chunk lengths, PGM/PPM header, the size caps -- without decoding a pixel.
struct ImageSize {
  int64_t width = 0, height = 0, channels = 0;
};
ImageSize decode_image_size(std::string_view bytes, const std::string& source);
// read_image of an image that must be `width` x `height` (a model's input): a file of another
// size is refused, naming it and both sizes, from its header, before any pixel is decoded.
Image read_image(const std::string& path, int64_t width, int64_t height);

// --- from tensors -----------------------------------------------------------
// A float tensor [H, W] or [C, H, W] (C = 1 or 3), on any device and layout, mapped linearly
// from [lo, hi] to 0..255 and clamped (NaN -> 0). Gives 1 or 3 channels.
Image to_image(const Tensor& t, float lo, float hi);
// A perceptual colour map: t in [0, 1] (clamped, NaN -> 0) -> viridis (dark blue to yellow).
RGB colormap(float t);
// values [H, W] mapped from [lo, hi] through colormap: an RGB image of W x H.
Image heatmap(const Tensor& values, float lo, float hi);

// --- pixels -----------------------------------------------------------------
// Gray (1), gray + alpha (2), RGB (3) or RGBA (4) -> RGB; alpha is dropped.
Image to_rgb(const Image& image);
// Each output pixel takes the input pixel its centre falls in.
Image resize_nearest(const Image& image, int64_t width, int64_t height);
// (1 - alpha) * base + alpha * overlay, per channel, both converted to RGB; same sizes.
Image blend(const Image& base, const Image& overlay, float alpha);
// Sets pixel (x, y) to `rgb` when it lies inside (gray images get its luminance; alpha is 255).
void set_pixel(Image& image, int64_t x, int64_t y, RGB rgb);
// Fills the rectangle [x0, x1] x [y0, y1] (inclusive corners, in any order).
void fill_rect(Image& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, RGB rgb);
// The outline of [x0, x1] x [y0, y1], `thickness` pixels wide, growing inwards.
void draw_rect(Image& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, RGB rgb,
               int64_t thickness = 1);
// A line from (x0, y0) to (x1, y1) (Bresenham), `thickness` pixels wide.
void draw_line(Image& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, RGB rgb,
               int64_t thickness = 1);

// --- text (stb_easy_font: a 7-pixel-high bitmap font, ASCII 32..126, '\n' starts a line) --
// Width and height in pixels of the ink of `text` drawn at `scale`.
std::array<int64_t, 2> text_size(const std::string& text, int64_t scale = 1);
// Draws `text` with its top-left corner at (x, y); every pixel changed lies inside
// [x, x + text_size[0]) x [y, y + text_size[1]).
void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, RGB rgb,
               int64_t scale = 1);
// Turned a quarter to the left (counter-clockwise): width and height swap. For vertical labels.
Image rotate_left(const Image& image);

// --- layouts ----------------------------------------------------------------
// Copies `src` with its top-left corner at (x, y) of `dst` (gray or RGB; src is converted to
// RGB for an RGB dst), clipped.
void paste(Image& dst, const Image& src, int64_t x, int64_t y);
// The images in a grid of `columns`, row by row, each in a cell of the largest width and
// height, `gap` pixels apart, on `background`. RGB unless every image is gray.
Image tile(const std::vector<Image>& images, int64_t columns, int64_t gap = 2,
           uint8_t background = 255);
// A heat map of values [rows, cols], `cell` pixels a cell, with the row labels on the left, the
// column labels written upwards above it, `title` on top and a colour bar with the min and max
// of the values on the right: attention between tokens (target x source), confusion matrices.
Image labelled_heatmap(const Tensor& values, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels, const std::string& title,
                       int64_t cell = 16);

}  // namespace loom::data
