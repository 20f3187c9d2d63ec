#include "data/image.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <memory>
#include <optional>

#include "core/error.h"
#include "data/text_file.h"

// The stb decoders and the PNG encoder come compiled in Debian's libstb.so; the easy font is a
// header of static functions (data tables and a quad generator), compiled here.
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wconversion"
#include <stb/stb_easy_font.h>
#pragma GCC diagnostic pop

namespace loom::data {

namespace {

uint8_t to_byte(float v) {  // 0..1 -> 0..255, clamped, NaN -> 0
  if (!(v > 0.0f)) return 0;
  return v >= 1.0f ? 255 : static_cast<uint8_t>(std::lround(v * 255.0f));
}

void check_size(const std::string& op, int64_t width, int64_t height) {
  LOOM_CHECK(width > 0 && height > 0 && width <= kMaxImageSide && height <= kMaxImageSide,
             "{}: image size {} x {} is outside 1..{}", op, width, height, kMaxImageSide);
  LOOM_CHECK(width * height <= kMaxImagePixels,
             "{}: image size {} x {} is {} pixels, over the cap of {} (8192 x 8192)", op, width,
             height, width * height, kMaxImagePixels);
}

// Only the formats loom's data sets and figures use are handed to stb_image, which also knows
// JPEG, BMP, GIF, PSD, TGA, HDR and PIC: a smaller surface for bad files to reach. JPEG is out on
// purpose: fuzzing Debian's stb_image (2022-09) found its Huffman table builder writing one past
// an array on a hostile file (stb_image.h:1990), so loom never hands it JPEG bytes.
bool is_pnm(std::string_view b) {
  return b.size() >= 2 && (b.substr(0, 2) == "P5" || b.substr(0, 2) == "P6");
}

bool known_format(std::string_view b) {
  const bool png = b.size() >= 8 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8);
  return png || is_pnm(b);
}

// Every PNG chunk's declared length must fit in the bytes that follow it. stb_image grows its
// buffer for the image data (IDAT) to the declared length before reading it, so a 40-byte file
// claiming a 1 GB chunk would make it allocate 2 GB (found by fuzzing).
bool png_chunks_fit(std::string_view b) {
  size_t pos = 8;  // after the signature
  while (pos + 12 <= b.size()) {  // length (4), type (4), data, CRC (4)
    const auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(b[i])); };
    const uint64_t length =
        byte(pos) << 24 | byte(pos + 1) << 16 | byte(pos + 2) << 8 | byte(pos + 3);
    if (length > b.size() - pos - 12) return false;
    const bool end = b.substr(pos + 4, 4) == "IEND";
    pos += 12 + static_cast<size_t>(length);
    if (end) return true;
  }
  return false;  // no IEND chunk: truncated
}

// A binary PGM/PPM header: "P5|P6 <width> <height> <maxval>" with whitespace and '#' comments
// between, then one whitespace byte and height * width * channels samples of 1 byte (maxval <
// 256) or 2. Parsed here, before stb_image sees it: stb reads each number into an int without an
// overflow check (UBSan flags "P5 99999999999 ..."), and it pads a raster that is cut short.
struct PnmHeader {
  int64_t width = 0, height = 0, maxval = 0;
  size_t end = 0;  // the offset of the whitespace byte before the raster
};

std::optional<PnmHeader> parse_pnm_header(std::string_view b) {
  size_t pos = 2;
  int64_t fields[3] = {0, 0, 0};
  for (int64_t& field : fields) {
    // Whitespace and comments; as in stb, \r or \n ends a comment (npos ends the loop below).
    while (pos < b.size() && (std::isspace(static_cast<unsigned char>(b[pos])) || b[pos] == '#'))
      pos = b[pos] == '#' ? b.find_first_of("\r\n", pos) : pos + 1;
    if (pos >= b.size() || !std::isdigit(static_cast<unsigned char>(b[pos]))) return std::nullopt;
    for (int digits = 0; pos < b.size() && std::isdigit(static_cast<unsigned char>(b[pos]));
         ++pos, ++digits) {
      if (digits == 9) return std::nullopt;  // >= 10^9: far past any size accepted below
      field = field * 10 + (b[pos] - '0');
    }
  }
  if (pos >= b.size()) return std::nullopt;
  return PnmHeader{fields[0], fields[1], fields[2], pos};
}

// What is wrong with a PGM/PPM's header or raster; empty if nothing.
std::string pnm_problem(std::string_view b) {
  const std::optional<PnmHeader> h = parse_pnm_header(b);
  if (!h) return "bad PGM/PPM header (three numbers below 10^9 expected)";
  if (h->width < 1 || h->height < 1 || h->width > kMaxImageSide || h->height > kMaxImageSide)
    return fmt::format("{} x {} pixels, outside 1..{} per side", h->width, h->height,
                       kMaxImageSide);
  if (h->maxval < 1 || h->maxval > 65535)
    return fmt::format("maxval {} outside 1..65535", h->maxval);
  const int64_t samples = h->width * h->height * (b[1] == '6' ? 3 : 1);
  const int64_t raster = samples * (h->maxval > 255 ? 2 : 1);
  if (static_cast<int64_t>(b.size() - h->end - 1) < raster)
    return "the PGM/PPM pixel data is cut short";
  return "";
}

}  // namespace

Image::Image(int64_t w, int64_t h, int64_t c, uint8_t fill) : width(w), height(h), channels(c) {
  check_size("Image", w, h);
  LOOM_CHECK(c >= 1 && c <= 4, "Image: channels must be 1..4, got {}", c);
  pixels.assign(static_cast<size_t>(w * h * c), fill);
}

// --- files ------------------------------------------------------------------

void write_png(const Image& image, const std::string& path) {
  LOOM_CHECK(
      image.channels >= 1 && image.channels <= 4 && image.width > 0 && image.height > 0 &&
          image.pixels.size() == static_cast<size_t>(image.width * image.height * image.channels),
      "write_png: '{}': image of {} x {} x {} has {} bytes", path, image.width, image.height,
      image.channels, image.pixels.size());
  std::string png;
  auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data),
                                               static_cast<size_t>(size));
  };
  const int ok =
      stbi_write_png_to_func(append, &png, static_cast<int>(image.width),
                             static_cast<int>(image.height), static_cast<int>(image.channels),
                             image.pixels.data(), static_cast<int>(image.width * image.channels));
  LOOM_CHECK(ok != 0, "write_png: cannot encode '{}'", path);
  write_file_atomic(path, png, "write_png");
}

namespace {

// What the header declares, after the checks that keep hostile bytes from stb_image; the sizes
// are not checked against the caps yet.
ImageSize read_header(std::string_view bytes, const std::string& source) {
  LOOM_CHECK(known_format(bytes),
             "read_image: '{}' is not a PNG or binary PGM/PPM file (JPEG is not read: convert it "
             "to PNG)",
             source);
  LOOM_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), "read_image: '{}' is too large", source);
  const auto* data = reinterpret_cast<const stbi_uc*>(bytes.data());
  const int len = static_cast<int>(bytes.size());
  LOOM_CHECK(is_pnm(bytes) || png_chunks_fit(bytes),
             "read_image: '{}': a PNG chunk is longer than the file, or the file is cut short",
             source);
  if (is_pnm(bytes)) {
    const std::string problem = pnm_problem(bytes);
    LOOM_CHECK(problem.empty(), "read_image: '{}': {}", source, problem);
  }
  int w = 0, h = 0, c = 0;
  LOOM_CHECK(stbi_info_from_memory(data, len, &w, &h, &c) != 0,
             "read_image: '{}': bad or truncated header (stb_image: {})", source,
             stbi_failure_reason());
  return {w, h, c == 2 ? 4 : c};  // gray + alpha is read as RGBA
}

}  // namespace

ImageSize decode_image_size(std::string_view bytes, const std::string& source) {
  // The header alone: its sizes are checked before stb_image allocates for them.
  const ImageSize size = read_header(bytes, source);
  check_size("read_image: '" + source + "'", size.width, size.height);
  return size;
}

Image decode_image(std::string_view bytes, const std::string& source) {
  const ImageSize size = decode_image_size(bytes, source);
  const auto wanted = static_cast<int>(size.channels);  // RGBA for gray + alpha
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                            static_cast<int>(bytes.size()), &w, &h, &c, wanted),
      stbi_image_free);
  LOOM_CHECK(pixels != nullptr, "read_image: '{}': bad or truncated data (stb_image: {})", source,
             stbi_failure_reason());
  LOOM_CHECK(w == size.width && h == size.height,
             "read_image: '{}': the data is {} x {} but the header said {} x {}", source, w, h,
             size.width, size.height);
  Image image(w, h, wanted);
  std::copy_n(pixels.get(), image.pixels.size(), image.pixels.begin());
  return image;
}

Image read_image(const std::string& path) {
  return decode_image(read_file_bytes(path, "read_image"), path);
}

Image read_image(const std::string& path, int64_t width, int64_t height) {
  const std::string bytes = read_file_bytes(path, "read_image");
  const ImageSize size = read_header(bytes, path);
  LOOM_CHECK(size.width == width && size.height == height,
             "read_image: '{}' is {} x {}, not the {} x {} expected", path, size.width, size.height,
             width, height);
  return decode_image(bytes, path);
}

// --- from tensors -----------------------------------------------------------

Image to_image(const Tensor& t, float lo, float hi) {
  const Shape& s = t.shape();
  LOOM_CHECK(t.dim() == 2 || (t.dim() == 3 && (s[0] == 1 || s[0] == 3)),
             "to_image: expected [H, W] or [C, H, W] with C = 1 or 3, got {}", shape_str(s));
  LOOM_CHECK(hi > lo, "to_image: need lo < hi, got [{}, {}]", lo, hi);
  const int64_t c = t.dim() == 2 ? 1 : s[0], h = s[t.dim() - 2], w = s[t.dim() - 1];
  const std::vector<float> v = t.to_vector();  // [C, H, W] row-major
  Image image(w, h, c);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        image.at(x, y)[ch] = to_byte((v[(ch * h + y) * w + x] - lo) / (hi - lo));
  return image;
}

RGB colormap(float t) {
  // viridis (van der Walt & Smith 2015, matplotlib's default map, CC0): entries
  // round(k * 255 / 16), k = 0..16, of matplotlib's 256-entry _viridis_data, interpolated.
  static constexpr float kViridis[17][3] = {
      {0.267004f, 0.004874f, 0.329415f}, {0.282327f, 0.094955f, 0.417331f},
      {0.278826f, 0.175490f, 0.483397f}, {0.258965f, 0.251537f, 0.524736f},
      {0.229739f, 0.322361f, 0.545706f}, {0.199430f, 0.387607f, 0.554642f},
      {0.172719f, 0.448791f, 0.557885f}, {0.149039f, 0.508051f, 0.557250f},
      {0.127568f, 0.566949f, 0.550556f}, {0.120081f, 0.622161f, 0.534946f},
      {0.153894f, 0.680203f, 0.504172f}, {0.239374f, 0.735588f, 0.455688f},
      {0.360741f, 0.785964f, 0.387814f}, {0.506271f, 0.828786f, 0.300362f},
      {0.668054f, 0.861999f, 0.196293f}, {0.835270f, 0.886029f, 0.102646f},
      {0.993248f, 0.906157f, 0.143936f}};
  const float u = (t > 0.0f ? std::min(t, 1.0f) : 0.0f) * 16.0f;  // NaN -> 0
  const int k = std::min(static_cast<int>(u), 15);
  const float f = u - static_cast<float>(k);
  RGB rgb;
  for (int i = 0; i < 3; ++i) rgb[i] = to_byte(kViridis[k][i] * (1 - f) + kViridis[k + 1][i] * f);
  return rgb;
}

Image heatmap(const Tensor& values, float lo, float hi) {
  LOOM_CHECK(values.dim() == 2, "heatmap: expected values [H, W], got {}",
             shape_str(values.shape()));
  LOOM_CHECK(hi > lo, "heatmap: need lo < hi, got [{}, {}]", lo, hi);
  const int64_t h = values.size(0), w = values.size(1);
  const std::vector<float> v = values.to_vector();
  Image image(w, h, 3);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const RGB rgb = colormap((v[y * w + x] - lo) / (hi - lo));
      std::copy(rgb.begin(), rgb.end(), image.at(x, y));
    }
  return image;
}

// --- pixels -----------------------------------------------------------------

Image to_rgb(const Image& image) {
  Image out(image.width, image.height, 3);
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) {
      const uint8_t* p = image.at(x, y);
      uint8_t* q = out.at(x, y);
      for (int i = 0; i < 3; ++i) q[i] = image.channels >= 3 ? p[i] : p[0];
    }
  return out;
}

Image resize_nearest(const Image& image, int64_t width, int64_t height) {
  Image out(width, height, image.channels);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t sy = (2 * y + 1) * image.height / (2 * height);  // centre of the output pixel
    for (int64_t x = 0; x < width; ++x) {
      const int64_t sx = (2 * x + 1) * image.width / (2 * width);
      std::copy_n(image.at(sx, sy), image.channels, out.at(x, y));
    }
  }
  return out;
}

Image blend(const Image& base, const Image& overlay, float alpha) {
  LOOM_CHECK(base.width == overlay.width && base.height == overlay.height,
             "blend: sizes differ: {} x {} and {} x {}", base.width, base.height, overlay.width,
             overlay.height);
  LOOM_CHECK(alpha >= 0.0f && alpha <= 1.0f, "blend: alpha must be in [0, 1], got {}", alpha);
  Image out = to_rgb(base);
  const Image top = to_rgb(overlay);
  for (size_t i = 0; i < out.pixels.size(); ++i)
    out.pixels[i] =
        static_cast<uint8_t>(std::lround((1.0f - alpha) * out.pixels[i] + alpha * top.pixels[i]));
  return out;
}

void set_pixel(Image& image, int64_t x, int64_t y, RGB rgb) {
  if (!image.contains(x, y)) return;
  uint8_t* p = image.at(x, y);
  if (image.channels >= 3) {
    std::copy(rgb.begin(), rgb.end(), p);
  } else {  // ITU-R BT.601 luma
    p[0] = static_cast<uint8_t>(std::lround(0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2]));
  }
  if (image.channels == 2 || image.channels == 4) p[image.channels - 1] = 255;
}

void fill_rect(Image& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, RGB rgb) {
  if (x0 > x1) std::swap(x0, x1);
  if (y0 > y1) std::swap(y0, y1);
  x0 = std::max<int64_t>(x0, 0), y0 = std::max<int64_t>(y0, 0);
  x1 = std::min(x1, image.width - 1), y1 = std::min(y1, image.height - 1);
  for (int64_t y = y0; y <= y1; ++y)
    for (int64_t x = x0; x <= x1; ++x) set_pixel(image, x, y, rgb);
}

void draw_rect(Image& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, RGB rgb,
               int64_t thickness) {
  LOOM_CHECK(thickness >= 1, "draw_rect: thickness must be >= 1, got {}", thickness);
  if (x0 > x1) std::swap(x0, x1);
  if (y0 > y1) std::swap(y0, y1);
  const int64_t t = thickness - 1;
  fill_rect(image, x0, y0, x1, std::min(y0 + t, y1), rgb);  // top
  fill_rect(image, x0, std::max(y1 - t, y0), x1, y1, rgb);  // bottom
  fill_rect(image, x0, y0, std::min(x0 + t, x1), y1, rgb);  // left
  fill_rect(image, std::max(x1 - t, x0), y0, x1, y1, rgb);  // right
}

void draw_line(Image& image, int64_t x0, int64_t y0, int64_t x1, int64_t y1, RGB rgb,
               int64_t thickness) {
  LOOM_CHECK(thickness >= 1, "draw_line: thickness must be >= 1, got {}", thickness);
  // Bresenham's line algorithm (all octants); each point is stamped as a thickness-square.
  const int64_t dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int64_t sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  const int64_t lo = -(thickness - 1) / 2, hi = thickness / 2;
  for (int64_t err = dx + dy;;) {
    fill_rect(image, x0 + lo, y0 + lo, x0 + hi, y0 + hi, rgb);
    if (x0 == x1 && y0 == y1) break;
    const int64_t e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

// --- text -------------------------------------------------------------------

namespace {

// stb_easy_font's quads (axis-aligned, in font pixels from the text's top-left corner) as
// {x0, y0, x1, y1}, half-open. Characters outside ASCII 32..126 are drawn as '?'.
std::vector<std::array<int64_t, 4>> text_quads(const std::string& text) {
  std::string printable = text;
  for (char& ch : printable)
    if (ch != '\n' && (ch < 32 || ch > 126)) ch = '?';
  struct Vertex {  // the layout stb_easy_font writes: x, y, z, rgba
    float x, y, z;
    uint8_t color[4];
  };
  std::vector<Vertex> vertices(printable.size() * 64 + 4);  // at most ~16 quads a character
  const int quads = stb_easy_font_print(0, 0, printable.data(), nullptr, vertices.data(),
                                        static_cast<int>(vertices.size() * sizeof(Vertex)));
  std::vector<std::array<int64_t, 4>> out;
  for (int q = 0; q < quads; ++q) {  // vertices 0 and 2 of a quad are opposite corners
    const Vertex& a = vertices[static_cast<size_t>(4 * q)];
    const Vertex& b = vertices[static_cast<size_t>(4 * q + 2)];
    out.push_back({std::lround(a.x), std::lround(a.y), std::lround(b.x), std::lround(b.y)});
  }
  return out;
}

}  // namespace

std::array<int64_t, 2> text_size(const std::string& text, int64_t scale) {
  LOOM_CHECK(scale >= 1, "text_size: scale must be >= 1, got {}", scale);
  std::array<int64_t, 2> size{0, 0};
  for (const auto& q : text_quads(text))
    size = {std::max(size[0], q[2] * scale), std::max(size[1], q[3] * scale)};
  return size;
}

void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, RGB rgb,
               int64_t scale) {
  LOOM_CHECK(scale >= 1, "draw_text: scale must be >= 1, got {}", scale);
  for (const auto& q : text_quads(text))
    fill_rect(image, x + q[0] * scale, y + q[1] * scale, x + q[2] * scale - 1, y + q[3] * scale - 1,
              rgb);
}

Image rotate_left(const Image& image) {
  Image out(image.height, image.width, image.channels);
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x)  // (x, y) -> (y, width - 1 - x)
      std::copy_n(image.at(x, y), image.channels, out.at(y, image.width - 1 - x));
  return out;
}

// --- layouts ----------------------------------------------------------------

void paste(Image& dst, const Image& src, int64_t x, int64_t y) {
  LOOM_CHECK(dst.channels == 1 || dst.channels == 3,
             "paste: the destination must be gray or RGB, has {} channels", dst.channels);
  const Image converted = dst.channels == 3 && src.channels != 3 ? to_rgb(src) : src;
  LOOM_CHECK(converted.channels == dst.channels, "paste: cannot paste {} channels into gray",
             src.channels);
  for (int64_t sy = 0; sy < converted.height; ++sy)
    for (int64_t sx = 0; sx < converted.width; ++sx)
      if (dst.contains(x + sx, y + sy))
        std::copy_n(converted.at(sx, sy), dst.channels, dst.at(x + sx, y + sy));
}

Image tile(const std::vector<Image>& images, int64_t columns, int64_t gap, uint8_t background) {
  LOOM_CHECK(!images.empty(), "tile: no images");
  LOOM_CHECK(columns >= 1 && gap >= 0, "tile: need columns >= 1 and gap >= 0, got {} and {}",
             columns, gap);
  int64_t cell_w = 0, cell_h = 0;
  bool gray = true;
  for (const Image& im : images) {
    cell_w = std::max(cell_w, im.width), cell_h = std::max(cell_h, im.height);
    gray = gray && im.channels == 1;
  }
  const int64_t n = static_cast<int64_t>(images.size());
  const int64_t cols = std::min(columns, n), rows = (n + cols - 1) / cols;
  Image out(cols * cell_w + (cols - 1) * gap, rows * cell_h + (rows - 1) * gap, gray ? 1 : 3,
            background);
  for (int64_t i = 0; i < n; ++i)
    paste(out, images[static_cast<size_t>(i)], (i % cols) * (cell_w + gap),
          (i / cols) * (cell_h + gap));
  return out;
}

Image labelled_heatmap(const Tensor& values, const std::vector<std::string>& row_labels,
                       const std::vector<std::string>& col_labels, const std::string& title,
                       int64_t cell) {
  LOOM_CHECK(values.dim() == 2, "labelled_heatmap: expected values [rows, cols], got {}",
             shape_str(values.shape()));
  const int64_t rows = values.size(0), cols = values.size(1);
  LOOM_CHECK(static_cast<int64_t>(row_labels.size()) == rows &&
                 static_cast<int64_t>(col_labels.size()) == cols,
             "labelled_heatmap: values {} but {} row and {} column labels",
             shape_str(values.shape()), row_labels.size(), col_labels.size());
  LOOM_CHECK(cell >= 1, "labelled_heatmap: cell must be >= 1, got {}", cell);
  const std::vector<float> v = values.to_vector();
  float lo = INFINITY, hi = -INFINITY;
  for (float x : v)
    if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
  if (!(lo < hi)) hi = (std::isfinite(lo) ? lo : (lo = 0.0f)) + 1.0f;  // constant or empty

  // Layout: margin | row labels | grid | colour bar and its labels | margin; title and the
  // upright column labels above the grid.
  const int64_t margin = 6, pad = 4;
  int64_t label_w = 0, label_h = 0;
  for (const auto& s : row_labels) label_w = std::max(label_w, text_size(s)[0]);
  for (const auto& s : col_labels) label_h = std::max(label_h, text_size(s)[0]);
  const std::string lo_text = fmt::format("{:.3g}", lo), hi_text = fmt::format("{:.3g}", hi);
  const int64_t bar_w = 12, bar_text_w = std::max(text_size(lo_text)[0], text_size(hi_text)[0]);
  const int64_t title_h = title.empty() ? 0 : text_size(title)[1] + pad;
  const int64_t grid_x = margin + label_w + pad, grid_y = margin + title_h + label_h + pad;
  const int64_t grid_w = cols * cell, grid_h = rows * cell;
  const int64_t width = std::max(grid_x + grid_w + pad + bar_w + pad + bar_text_w + margin,
                                 2 * margin + text_size(title)[0]);
  Image image(width, grid_y + std::max<int64_t>(grid_h, 24) + margin, 3, 255);
  const RGB black{0, 0, 0};

  draw_text(image, margin, margin, title, black);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      fill_rect(image, grid_x + c * cell, grid_y + r * cell, grid_x + (c + 1) * cell - 1,
                grid_y + (r + 1) * cell - 1, colormap((v[r * cols + c] - lo) / (hi - lo)));
  for (int64_t r = 0; r < rows; ++r) {  // right-aligned, centred on the row
    const auto size = text_size(row_labels[r]);
    draw_text(image, grid_x - pad - size[0], grid_y + r * cell + (cell - size[1]) / 2,
              row_labels[r], black);
  }
  for (int64_t c = 0; c < cols; ++c) {  // written upwards, ending just above the grid
    const auto size = text_size(col_labels[c]);
    if (size[0] == 0) continue;
    Image label(size[0], size[1], 3, 255);
    draw_text(label, 0, 0, col_labels[c], black);
    paste(image, rotate_left(label), grid_x + c * cell + (cell - size[1]) / 2,
          grid_y - pad - size[0]);
  }
  // The colour bar: hi at the top, lo at the bottom.
  const int64_t bar_x = grid_x + grid_w + pad, bar_h = std::max<int64_t>(grid_h, 24);
  for (int64_t y = 0; y < bar_h; ++y)
    fill_rect(image, bar_x, grid_y + y, bar_x + bar_w - 1, grid_y + y,
              colormap(1.0f - static_cast<float>(y) / static_cast<float>(bar_h - 1)));
  draw_text(image, bar_x + bar_w + pad, grid_y, hi_text, black);
  draw_text(image, bar_x + bar_w + pad, grid_y + bar_h - text_size(lo_text)[1], lo_text, black);
  return image;
}

}  // namespace loom::data
