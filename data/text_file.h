// Whole-file text I/O for the tokenizer formats: reading with line-numbered error messages,
// and writing through a temporary file + rename so that a crash never leaves half a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

// The bytes of a file. Throws loom::Error "<what>: cannot open '<path>'" if it cannot be read.
std::string read_file_bytes(const std::string& path, std::string_view what);

// Writes `contents` to `path` + ".tmp", then renames it over `path`.
void write_file_atomic(const std::string& path, std::string_view contents, std::string_view what);

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

  [[noreturn]] void fail(std::string_view message) const;

 private:
  std::string path_, what_, text_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

}  // namespace loom::data
