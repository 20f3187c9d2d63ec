// Images: PNG round trips and atomic writes, read errors, tensor -> pixel mappings, the colour map,
// the drawing primitives (pixels inside their boxes only), tiling and the labelled heat map.
#include <doctest/doctest.h>

#include <filesystem>

#include "autograd/ops.h"
#include "data/image.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;
using loom::testing::TempDir;
using loom::testing::write_file;
namespace fs = std::filesystem;

namespace {

// A w x h image whose bytes count up (mod 251), so that every pixel and channel differs.
Image ramp(int64_t w, int64_t h, int64_t c) {
  Image image(w, h, c);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i % 251);
  return image;
}

// The bounding box {x0, y0, x1, y1} (inclusive) of the pixels where a and b differ; x0 = -1 if
// none.
std::array<int64_t, 4> changed_box(const Image& a, const Image& b) {
  std::array<int64_t, 4> box{-1, -1, -1, -1};
  for (int64_t y = 0; y < a.height; ++y)
    for (int64_t x = 0; x < a.width; ++x)
      if (!std::equal(a.at(x, y), a.at(x, y) + a.channels, b.at(x, y))) {
        if (box[0] < 0) box = {x, y, x, y};
        box = {std::min(box[0], x), std::min(box[1], y), std::max(box[2], x), std::max(box[3], y)};
      }
  return box;
}

std::string png_bytes(const Image& image) {
  TempDir dir;
  write_png(image, dir.file("a.png"));
  return loom::testing::read_file(dir.file("a.png"));
}

}  // namespace

TEST_CASE("write_png then read_image gives the same pixels: gray, RGB, RGBA") {
  TempDir dir;
  for (int64_t c : {1, 3, 4}) {
    const Image image = ramp(37, 11, c);
    const std::string path = dir.file("ramp" + std::to_string(c) + ".png");
    write_png(image, path);
    const Image back = read_image(path);
    CHECK(back.width == 37);
    CHECK(back.height == 11);
    CHECK(back.channels == c);
    CHECK(back.pixels == image.pixels);
    // decode_image reads the same bytes from memory.
    CHECK(decode_image(loom::testing::read_file(path), "mem").pixels == image.pixels);
  }
}

TEST_CASE("write_png is atomic: no temp file is left, and an unwritable path is named") {
  TempDir dir;
  write_png(ramp(4, 3, 3), dir.file("a.png"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename());
  CHECK(names == std::vector<std::string>{"a.png"});
  const std::string bad = dir.file("no/such/dir/b.png");
  check_error([&] { write_png(ramp(4, 3, 3), bad); }, {"write_png", bad});
  Image broken = ramp(4, 3, 3);
  broken.pixels.pop_back();
  check_error([&] { write_png(broken, dir.file("c.png")); }, {"write_png", "c.png", "4 x 3 x 3"});
}

TEST_CASE("read_image rejects a missing file, garbage, truncated data and absurd sizes") {
  TempDir dir;
  check_error([&] { read_image(dir.file("missing.png")); }, {"read_image", "missing.png"});
  write_file(dir.file("garbage.png"), "this is not an image at all");
  check_error([&] { read_image(dir.file("garbage.png")); }, {"read_image", "garbage.png"});
  const std::string png = png_bytes(ramp(64, 64, 3));
  write_file(dir.file("truncated.png"), png.substr(0, png.size() / 2));
  check_error([&] { read_image(dir.file("truncated.png")); }, {"read_image", "truncated.png"});
  check_error([&] { decode_image(png.substr(0, 20), "header only"); }, {"header only"});
  // A PGM header claiming 100000 x 100000 pixels is refused before anything is allocated.
  check_error([&] { decode_image("P5\n100000 100000\n255\n\x01\x02", "huge.pgm"); },
              {"huge.pgm", "100000 x 100000"});
  check_error([&] { decode_image("", "empty"); }, {"empty"});
  // stb_image would pad a PPM whose pixels are cut short; it is refused instead.
  check_error([&] { decode_image("P6\n4 4\n255\n\x01\x02\x03", "short.ppm"); },
              {"short.ppm", "cut short"});
  check_error([&] { decode_image("BM\x01\x02 a bitmap", "x.bmp"); }, {"x.bmp", "not a PNG"});
}

TEST_CASE("read_image reads binary PGM and PPM") {
  const Image gray = decode_image(std::string("P5\n3 2\n255\n\x00\x10\x20\x30\x40\xff", 17), "g");
  CHECK(gray.channels == 1);
  CHECK(gray.width == 3);
  CHECK(gray.pixels == std::vector<uint8_t>{0x00, 0x10, 0x20, 0x30, 0x40, 0xff});
  const Image rgb =
      decode_image(std::string("P6\n# made by hand\n1 1\n255\n\x01\x02\x03", 29), "c");
  CHECK(rgb.channels == 3);
  CHECK(rgb.pixels == std::vector<uint8_t>{1, 2, 3});
}

TEST_CASE("Image checks its sizes and channels") {
  check_error([] { Image(0, 5, 3); }, {"Image", "0 x 5"});
  check_error([] { Image(20000, 5, 3); }, {"Image", "20000 x 5"});
  check_error([] { Image(5, 5, 5); }, {"Image", "channels", "5"});
  const Image filled(2, 3, 3, 7);
  CHECK(filled.pixels == std::vector<uint8_t>(18, 7));
}

TEST_CASE("to_image maps [lo, hi] linearly to 0..255 and clamps; [C, H, W] and views work") {
  const auto t = loom::tensor({-1.0f, 0.0f, 0.5f, 1.0f, 2.0f, NAN}, {2, 3});
  const Image gray = to_image(t, 0.0f, 1.0f);
  CHECK(gray.width == 3);
  CHECK(gray.height == 2);
  CHECK(gray.channels == 1);
  CHECK(gray.pixels == std::vector<uint8_t>{0, 0, 128, 255, 255, 0});
  // A transposed (non-contiguous) view reads in its own row-major order.
  CHECK(to_image(t.transpose(0, 1), 0.0f, 1.0f).pixels ==
        std::vector<uint8_t>{0, 255, 0, 255, 128, 0});
  // [3, 1, 2]: channel planes become interleaved pixels.
  const auto chw = loom::tensor({0.0f, 1.0f, 0.5f, 0.5f, 1.0f, 0.0f}, {3, 1, 2});
  const Image rgb = to_image(chw, 0.0f, 1.0f);
  CHECK(rgb.channels == 3);
  CHECK(rgb.pixels == std::vector<uint8_t>{0, 128, 255, 255, 128, 0});
  check_error([&] { to_image(loom::zeros({2, 2, 2}), 0, 1); }, {"to_image", "[2,2,2]"});
  check_error([&] { to_image(t, 1, 1); }, {"to_image", "lo < hi"});
}

TEST_CASE("colormap runs from viridis' dark purple to its yellow; heatmap uses it at lo and hi") {
  CHECK(colormap(0.0f) == RGB{68, 1, 84});
  CHECK(colormap(1.0f) == RGB{253, 231, 37});
  CHECK(colormap(-3.0f) == colormap(0.0f));
  CHECK(colormap(NAN) == colormap(0.0f));
  CHECK(colormap(7.0f) == colormap(1.0f));
  CHECK(colormap(0.5f) == RGB{33, 145, 140});  // matplotlib: viridis(0.5) = #21918c
  // Brightness rises monotonically (a perceptual map): the green channel never falls.
  for (int i = 1; i <= 100; ++i) CHECK(colormap(i / 100.0f)[1] >= colormap((i - 1) / 100.0f)[1]);
  const Image h = heatmap(loom::tensor({0.0f, 10.0f, 5.0f, 20.0f}, {2, 2}), 0.0f, 10.0f);
  CHECK(h.channels == 3);
  CHECK(RGB{h.at(0, 0)[0], h.at(0, 0)[1], h.at(0, 0)[2]} == colormap(0.0f));
  CHECK(RGB{h.at(1, 0)[0], h.at(1, 0)[1], h.at(1, 0)[2]} == colormap(1.0f));
  CHECK(RGB{h.at(1, 1)[0], h.at(1, 1)[1], h.at(1, 1)[2]} == colormap(1.0f));
  check_error([] { heatmap(loom::zeros({4}), 0, 1); }, {"heatmap", "[4]"});
}

TEST_CASE("to_rgb, resize_nearest and blend") {
  Image gray(2, 1, 1);
  gray.pixels = {10, 200};
  CHECK(to_rgb(gray).pixels == std::vector<uint8_t>{10, 10, 10, 200, 200, 200});
  const Image big = resize_nearest(gray, 4, 3);
  CHECK(big.width == 4);
  CHECK(big.height == 3);
  CHECK(big.pixels == std::vector<uint8_t>{10, 10, 200, 200, 10, 10, 200, 200, 10, 10, 200, 200});
  const Image small = resize_nearest(ramp(8, 8, 3), 2, 2);  // centres of the 4 x 4 blocks
  CHECK(std::equal(small.at(1, 1), small.at(1, 1) + 3, ramp(8, 8, 3).at(6, 6)));
  const Image base = ramp(5, 4, 3);
  const Image top(5, 4, 3, 255);
  CHECK(blend(base, top, 0.0f).pixels == base.pixels);
  CHECK(blend(base, top, 1.0f).pixels == top.pixels);
  CHECK(blend(Image(1, 1, 1, 0), Image(1, 1, 3, 200), 0.5f).pixels ==
        std::vector<uint8_t>{100, 100, 100});
  check_error([&] { blend(base, Image(4, 4, 3), 0.5f); }, {"blend", "5 x 4", "4 x 4"});
  check_error([&] { blend(base, top, 1.5f); }, {"blend", "alpha"});
}

TEST_CASE("draw_rect draws exactly the outline, thickness growing inwards, clipped") {
  Image image(10, 8, 3, 0);
  draw_rect(image, 2, 1, 6, 5, {255, 0, 0});
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 10; ++x) {
      const bool on_outline =
          x >= 2 && x <= 6 && y >= 1 && y <= 5 && (x == 2 || x == 6 || y == 1 || y == 5);
      CHECK(image.at(x, y)[0] == (on_outline ? 255 : 0));
      CHECK(image.at(x, y)[1] == 0);
    }
  Image thick(10, 8, 3, 0);
  draw_rect(thick, 6, 5, 2, 1, {0, 255, 0}, 2);  // corners in any order
  CHECK(thick.at(3, 2)[1] == 255);
  CHECK(thick.at(4, 3)[1] == 0);  // the inside stays
  Image clipped(4, 4, 1, 0);
  draw_rect(clipped, -5, -5, 100, 100, {255, 255, 255});  // entirely outside: nothing drawn
  CHECK(clipped.pixels == std::vector<uint8_t>(16, 0));
  draw_rect(clipped, -5, 1, 100, 1, {255, 255, 255});  // a clipped line, gray luminance
  CHECK(clipped.at(0, 1)[0] == 255);
  CHECK(clipped.at(3, 1)[0] == 255);
  CHECK(clipped.at(0, 2)[0] == 0);
}

TEST_CASE("draw_text changes pixels inside its text_size box only") {
  for (int64_t scale : {1, 3}) {
    Image image(200, 100, 3, 255);
    const Image before = image;
    const std::string text = "loss 0.25\nAcc";
    draw_text(image, 7, 5, text, {0, 0, 0}, scale);
    const auto size = text_size(text, scale);
    const auto box = changed_box(before, image);
    REQUIRE(box[0] >= 0);
    CHECK(box[0] >= 7);
    CHECK(box[1] >= 5);
    CHECK(box[2] < 7 + size[0]);
    CHECK(box[3] < 5 + size[1]);
    CHECK(box[2] == 7 + size[0] - 1);  // the box is tight
    CHECK(box[3] == 5 + size[1] - 1);
  }
  CHECK(text_size("")[0] == 0);
  CHECK(text_size("ab")[0] > text_size("a")[0]);
  Image image(40, 20, 3, 255);
  draw_text(image, 2, 2, "\xc3\xa9\t", {0, 0, 0});  // non-ASCII bytes draw as '?', no crash
  CHECK(changed_box(Image(40, 20, 3, 255), image)[0] >= 2);
}

TEST_CASE("rotate_left turns a quarter counter-clockwise") {
  const Image image = ramp(3, 2, 1);  // 0 1 2 / 3 4 5
  const Image r = rotate_left(image);
  CHECK(r.width == 2);
  CHECK(r.height == 3);
  CHECK(r.pixels == std::vector<uint8_t>{2, 5, 1, 4, 0, 3});
}

TEST_CASE("tile lays images out in a grid of the largest cell") {
  const std::vector<Image> images = {Image(10, 5, 1, 0), Image(4, 8, 1, 0), Image(6, 6, 1, 0)};
  const Image two = tile(images, 2, 3, 255);
  CHECK(two.width == 2 * 10 + 3);
  CHECK(two.height == 2 * 8 + 3);
  CHECK(two.channels == 1);
  CHECK(two.at(11, 0)[0] == 255);  // the gap
  CHECK(two.at(13, 0)[0] == 0);    // the second image
  const Image row = tile(images, 10, 0);
  CHECK(row.width == 30);
  CHECK(row.height == 8);
  CHECK(tile({Image(2, 2, 1), Image(2, 2, 3)}, 1).channels == 3);
  check_error([] { tile({}, 2); }, {"tile", "no images"});
}

TEST_CASE("labelled_heatmap draws the cells, their labels and checks its arguments") {
  const auto values = loom::tensor({0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f}, {2, 3});
  const Image image =
      labelled_heatmap(values, {"der", "Hund"}, {"the", "dog", "barks"}, "cross-attention", 16);
  CHECK(image.channels == 3);
  CHECK(image.width > 3 * 16);
  CHECK(image.height > 2 * 16);
  // The min and max cells carry the ends of the colour map.
  int found_lo = 0, found_hi = 0;
  for (int64_t y = 0; y < image.height; ++y)
    for (int64_t x = 0; x < image.width; ++x) {
      const RGB p{image.at(x, y)[0], image.at(x, y)[1], image.at(x, y)[2]};
      found_lo += p == colormap(0.0f);
      found_hi += p == colormap(1.0f);
    }
  CHECK(found_lo >= 16 * 16);
  CHECK(found_hi >= 16 * 16);
  check_error(
      [&] {
        labelled_heatmap(values, {"a"}, {"a", "b", "c"}, "t");
      },
      {"labelled_heatmap", "[2,3]", "1 row"});
  // Constant values do not divide by zero.
  CHECK(labelled_heatmap(loom::zeros({1, 1}), {"x"}, {"y"}, "").width > 0);
}

namespace {

// A PNG that declares width x height in its header, followed by an IDAT chunk of garbage: stb
// reads the header (stbi_info) without complaint, and would fail only when decoding.
std::string png_declaring(uint32_t width, uint32_t height) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  auto chunk = [&](const std::string& type, const std::string& data) {
    return be32(static_cast<uint32_t>(data.size())) + type + data + be32(0);  // CRC unchecked
  };
  const std::string ihdr = be32(width) + be32(height) + std::string("\x08\x00\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) +
         chunk("IDAT", "not deflate data") + chunk("IEND", "");
}

}  // namespace

TEST_CASE("decode_image_size reads the header only; read_image(w, h) refuses another size first") {
  TempDir dir;
  // detect read a 16384 x 16384 PNG (1 MB) into 2.3 GB over 4.5 s before refusing its size.
  const std::string big = png_declaring(16384, 16384);
  const ImageSize size = decode_image_size(png_declaring(300, 200), "small.png");
  CHECK(size.width == 300);
  CHECK(size.height == 200);
  CHECK(size.channels == 1);
  write_file(dir.file("big.png"), big);
  // The size is refused from the header: the garbage pixel data is never reached.
  check_error([&] { read_image(dir.file("big.png"), 64, 64); },
              {"big.png", "is 16384 x 16384, not the 64 x 64 expected"});
  // Beyond kMaxImagePixels (8192 x 8192) nothing is decoded at all, whatever the caller wants.
  check_error([&] { decode_image_size(big, "big.png"); },
              {"big.png", "16384 x 16384", "over the cap"});
  check_error([&] { Image(16384, 16384, 1); }, {"Image", "over the cap"});
  // A real image of the expected size reads as before; the header's channels are what it gets.
  const Image ramp64 = ramp(64, 64, 3);
  write_png(ramp64, dir.file("ok.png"));
  CHECK(read_image(dir.file("ok.png"), 64, 64).pixels == ramp64.pixels);
  CHECK(decode_image_size(png_bytes(ramp(5, 4, 2)), "ga").channels == 4);  // gray+alpha -> RGBA
  check_error([&] { read_image(dir.file("ok.png"), 32, 64); }, {"ok.png", "not the 32 x 64"});
}
