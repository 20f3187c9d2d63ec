// Fuzz target of the tokenizer files (data::load_tokenizer: the BPE and byte formats): whatever
// the bytes, the file is loaded or rejected with loom::Error -- never a crash, a hang or an
// absurd allocation (a merge chain that doubles a token is cut at BPETokenizer::kMaxTokenBytes).
// A loaded byte-level tokenizer must encode and decode losslessly; a WordPiece one (lossy by
// design) must give ids inside its vocabulary that decode.
//
//   As a ctest: fuzz_tokenizer tests/fuzz/corpus/tokenizer   (valid_* load, bad_* rejected)
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON)
#include <stdexcept>
#include <string>

#include "data/tokenizer.h"
#include "data/wordpiece_tokenizer.h"
#include "fuzz_replay.h"

namespace {

bool accept(const uint8_t* data, size_t size, std::string& why) {
  const std::string path = loom::fuzz::write_input("tokenizer", data, size);
  return loom::fuzz::accepted(
      [&] {
        const auto tok = loom::data::load_tokenizer(path);
        const std::string text(reinterpret_cast<const char*>(data), size);
        const bool lossy = dynamic_cast<const loom::data::WordPieceTokenizer*>(tok.get());
        for (const std::string& s : {text, std::string("hello world, \xff\xfe invalid UTF-8")}) {
          const std::string back = tok->decode(tok->encode(s));  // throws for an id outside
          if (!lossy && back != s)
            throw std::logic_error("decode(encode(s)) != s for a loaded tokenizer");
        }
      },
      why);
}

}  // namespace

LOOM_FUZZ_TARGET(accept, [] { loom::fuzz::remove_scratch("tokenizer"); })
