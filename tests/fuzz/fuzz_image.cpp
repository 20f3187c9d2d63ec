// Fuzz target of the image decoder: whatever the bytes, decode_image either returns an image whose
// sizes agree with its pixels or throws loom::Error -- never crash, hang, allocate absurdly or
// throw anything else. The decoding itself is stb_image's (Debian's libstb); this pins down
// loom's side: the format gate (PNG and binary PGM/PPM only; JPEG refused), the size cap checked
// before stb allocates, and the conversion of stb's failures into loom::Error.
//
//   As a ctest (any compiler): fuzz_image tests/fuzz/corpus/image
//     replays every file of the corpus; files named valid_* must be decoded, bad_* rejected.
//   With libFuzzer (clang): cmake -DCMAKE_CXX_COMPILER=clang++ -DLOOM_FUZZ=ON -DLOOM_SANITIZE=ON
//     then build/tests/fuzz_image -max_len=4096 tests/fuzz/corpus/image
//   (that build also compiles stb_image into the target, tests/fuzz/stb_image_instrumented.cpp,
//   so that the fuzzer sees and sanitizes the decoders, not only loom's side.)
//
// The corpus (< 4 KB) was written once with write_png and stb's JPEG writer, then damaged:
//   valid_gray/rgb/rgba/gray_alpha/1x1.png, valid_gray.pgm, valid_rgb.ppm (with a
//   comment), valid_16bit.pgm; bad_empty, bad_garbage, bad_unknown_format.bmp, bad_truncated.png,
//   bad_signature_only.png, bad_huge_width.png and bad_zero_width.png (IHDR width patched),
//   bad_corrupt_idat.png (compressed bytes flipped), bad_truncated.jpg, bad_rgb.jpg (JPEG is
//   refused), bad_jpeg_huffman_overflow.jpg (wrote past an array in stb's JPEG decoder, found by
//   fuzzing: why JPEG is refused), bad_huge.pgm (100000^2), bad_short_data.ppm, bad_ascii.pgm
//   (P2: text PGM is not read).
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"
#include "data/image.h"
#include "fuzz_replay.h"

namespace {

// true: decoded; false: rejected with loom::Error (its message in `why`). Anything else escapes.
bool read_or_reject(const uint8_t* data, size_t size, std::string& why) {
  try {
    const loom::data::Image image = loom::data::decode_image(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz input");
    if (image.pixels.size() != static_cast<size_t>(image.width * image.height * image.channels))
      throw std::logic_error("decode_image: pixel count disagrees with the sizes");
    return true;
  } catch (const loom::Error& e) {
    why = e.what();
    return false;
  }
}

}  // namespace

LOOM_FUZZ_TARGET(read_or_reject, [] {})
