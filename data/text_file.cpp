#include "data/text_file.h"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"

namespace loom::data {

std::string read_file_bytes(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  LOOM_CHECK(in.good(), "{}: cannot open '{}' for reading", what, path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  LOOM_CHECK(!in.bad(), "{}: error while reading '{}'", what, path);
  return std::move(buffer).str();
}

void write_file_atomic(const std::string& path, std::string_view contents, std::string_view what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LOOM_CHECK(out.good(), "{}: cannot open '{}' for writing", what, tmp);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    LOOM_CHECK(out.good(), "{}: error while writing '{}'", what, tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    LOOM_FAIL("{}: cannot rename '{}' to '{}'", what, tmp, path);
  }
}

LineReader::LineReader(std::string path, std::string_view what)
    : path_(std::move(path)), what_(what), text_(read_file_bytes(path_, what)) {}

std::string_view LineReader::next(std::string_view expected) {
  if (at_end()) {
    ++line_;
    fail(fmt::format("file ends, expected {}", expected));
  }
  const size_t newline = text_.find('\n', pos_);
  const size_t end = newline == std::string::npos ? text_.size() : newline;
  std::string_view line(text_.data() + pos_, end - pos_);
  pos_ = newline == std::string::npos ? text_.size() : newline + 1;
  ++line_;
  return line;
}

std::vector<int64_t> LineReader::integers(std::string_view line, size_t count,
                                          std::string_view expected) {
  std::vector<int64_t> values;
  const char* p = line.data();
  const char* end = line.data() + line.size();
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    if (p == end) break;
    int64_t v = 0;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || (next < end && *next != ' ' && *next != '\t' && *next != '\r'))
      fail(fmt::format("expected {}, got '{}'", expected, line));
    values.push_back(v);
    p = next;
  }
  if (values.size() != count) fail(fmt::format("expected {}, got '{}'", expected, line));
  return values;
}

void LineReader::fail(std::string_view message) const {
  LOOM_FAIL("{}: '{}' line {}: {}", what_, path_, line_, message);
}

}  // namespace loom::data
