// Fuzz target of BERT vocab.txt files (data::WordPieceTokenizer::from_vocab_file): whatever the
// bytes, the vocabulary is read or rejected with loom::Error naming the file and line -- never a
// crash, a hang or an absurd allocation. A read vocabulary has one token per line, contains
// [UNK], and encodes any text (the file's own bytes included) to ids inside it that decode.
//
//   As a ctest: fuzz_vocab tests/fuzz/corpus/vocab   (valid_* read, bad_* rejected)
//   With libFuzzer: scripts/fuzz.sh (clang, -DLOOM_FUZZ=ON)
#include <stdexcept>
#include <string>

#include "data/wordpiece_tokenizer.h"
#include "fuzz_replay.h"

namespace {

bool accept(const uint8_t* data, size_t size, std::string& why) {
  const std::string path = loom::fuzz::write_input("vocab", data, size);
  return loom::fuzz::accepted(
      [&] {
        const auto tok = loom::data::WordPieceTokenizer::from_vocab_file(path);
        const std::string text(reinterpret_cast<const char*>(data), size);
        for (const std::string& s : {text, std::string("Hello, WORLD \xff\xfe caf\xc3\xa9")}) {
          for (const int64_t id : tok.encode(s))
            if (id < 0 || id >= tok.vocab_size()) throw std::logic_error("id outside the vocab");
          tok.decode(tok.encode(s));
        }
        if (tok.token(tok.token_id("[UNK]")) != "[UNK]") throw std::logic_error("[UNK] lost");
      },
      why);
}

}  // namespace

LOOM_FUZZ_TARGET(accept, [] { loom::fuzz::remove_scratch("vocab"); })
