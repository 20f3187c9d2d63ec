// Whole-file text I/O for the tokenizer formats: reading with line-numbered error messages,
// and writing through a temporary file + rename so that a crash never leaves half a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

// The bytes of a file. Throws loom::Error "<what>: cannot open '<path>'" if it cannot be read.
std::string read_file_bytes(const std::string& path, std::string_view what);

// Writes `contents` to `path` atomically (AtomicFile below): after a crash at any point `path`
// holds its previous contents or the new ones, never a part.
void write_file_atomic(const std::string& path, std::string_view contents, std::string_view what);

// A file written through a temporary beside it, "<target>.tmp.<pid>" (unique to the writer, so
// two programs writing the same file never share one), flushed to disk with fsync and renamed
// over the target by commit(): the target holds its old contents or the complete new ones. The
// temporary is removed if commit() never comes (an error), and commit() removes the
// temporaries of writers killed mid-write (kill -9: their process is gone). `what` starts
// every message. Every file a training run writes goes through it (checkpoints, tokenizer.txt,
// log.csv, the PNGs).
class AtomicFile {
 public:
  AtomicFile(std::string target, std::string_view what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void commit();  // fsync, close, rename over the target, sync the directory

 private:
  std::string target_, temp_, what_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// The UTF-8 sequence that starts `text`, strictly as Python's decoder reads it (Unicode's table
// 3-7: no overlong forms, no surrogates, nothing past U+10FFFF): the length its lead byte
// announces (0: not a lead byte) and how many of its bytes are well formed (`length` when the
// whole sequence is; else its maximal ill-formed prefix, which a decoder replaces by one U+FFFD).
struct Utf8Sequence {
  size_t length = 0, well_formed = 0;
  bool valid() const { return length > 0 && well_formed == length; }
};
Utf8Sequence utf8_sequence(std::string_view text);

// The length of the longest prefix of `text` that is valid UTF-8: text.size() when all is.
size_t valid_utf8_prefix(std::string_view text);

// Walks a text file line by line; fail() throws loom::Error naming the file and current line.
class LineReader {
 public:
  LineReader(std::string path, std::string_view what);

  // The next line without its '\n'; throws (naming what was expected) at the end of the file.
  std::string_view next(std::string_view expected);
  bool at_end() const { return pos_ >= text_.size(); }
  int64_t line_number() const { return line_; }
  const std::string& path() const { return path_; }

  // Parses `line` as whitespace-separated integers; throws unless there are exactly `count`.
  std::vector<int64_t> integers(std::string_view line, size_t count, std::string_view expected);
  // Reads the first line, which must be `header` ("loom-bpe-tokenizer 1"), or throws "expected
  // the header '<header>', got '<line>'".
  void expect_header(std::string_view header);
  // Throws "unexpected content after <after>", naming the next line, unless the file ends here.
  void expect_end(std::string_view after);

  [[noreturn]] void fail(std::string_view message) const;

 private:
  std::string path_, what_, text_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

}  // namespace loom::data
