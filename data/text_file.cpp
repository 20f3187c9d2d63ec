#include "data/text_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

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
  AtomicFile out(path, what);
  out.write(contents.data(), contents.size());
  out.commit();
}

// ---------------------------------------------------------------------------- AtomicFile

namespace {

std::string errno_text() { return std::strerror(errno); }

// The temporaries "<target>.tmp.<pid>" that writers killed mid-write (kill -9, power loss)
// left behind: removed when their process is gone. A live writer's file is left alone (kill
// with signal 0 only asks whether the process exists). Best effort: never throws.
void remove_stale_temporaries(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path path(target);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.filename().string() + ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    pid_t pid = 0;
    const char* digits = name.data() + prefix.size();
    const auto [rest, err] = std::from_chars(digits, name.data() + name.size(), pid);
    if (err != std::errc() || rest != name.data() + name.size() || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

// Makes a rename durable. Best effort: some file systems cannot sync a directory.
void sync_directory(const std::string& target) {
  const std::filesystem::path dir = std::filesystem::path(target).parent_path();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(std::string target, std::string_view what)
    : target_(std::move(target)),
      temp_(target_ + ".tmp." + std::to_string(::getpid())),
      what_(what) {
  file_ = std::fopen(temp_.c_str(), "wb");
  LOOM_CHECK(file_ != nullptr, "{}: cannot create '{}': {}", what_, temp_, errno_text());
}

AtomicFile::~AtomicFile() {
  if (file_) std::fclose(file_);
  if (!committed_) std::remove(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  LOOM_CHECK(bytes == 0 || std::fwrite(data, 1, bytes, file_) == bytes, "{}: cannot write '{}': {}",
             what_, temp_, errno_text());
}

// The data reaches the disk before the rename, so that after a crash the target holds either
// the old file or the complete new one (the rename itself is atomic on POSIX file systems).
void AtomicFile::commit() {
  LOOM_CHECK(file_ != nullptr && !committed_, "{}: '{}' committed twice", what_, target_);
  LOOM_CHECK(std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0, "{}: cannot flush '{}': {}",
             what_, temp_, errno_text());
  const int closed = std::fclose(file_);
  file_ = nullptr;
  LOOM_CHECK(closed == 0, "{}: cannot close '{}': {}", what_, temp_, errno_text());
  LOOM_CHECK(std::rename(temp_.c_str(), target_.c_str()) == 0, "{}: cannot rename '{}' to '{}': {}",
             what_, temp_, target_, errno_text());
  committed_ = true;
  sync_directory(target_);
  remove_stale_temporaries(target_);  // the new file is complete: clean what crashes left
}

// ---------------------------------------------------------------------------- UTF-8

Utf8Sequence utf8_sequence(std::string_view text) {
  if (text.empty()) return {};
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char b = p[0];
  // the sequence's length and the range of its second byte (Unicode's table 3-7)
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b < 0x80) {
    len = 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    lo = b == 0xE0 ? 0xA0 : 0x80;  // no overlong forms
    hi = b == 0xED ? 0x9F : 0xBF;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    lo = b == 0xF0 ? 0x90 : 0x80;  // no overlong forms
    hi = b == 0xF4 ? 0x8F : 0xBF;  // nothing past U+10FFFF
  }
  if (len == 0) return {};
  size_t good = 1;
  while (good < len && good < text.size() && p[good] >= (good == 1 ? lo : 0x80) &&
         p[good] <= (good == 1 ? hi : 0xBF))
    ++good;
  return {len, good};
}

size_t valid_utf8_prefix(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Sequence seq = utf8_sequence(text.substr(i));
    if (!seq.valid()) return i;
    i += seq.length;
  }
  return i;
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

void LineReader::expect_header(std::string_view header) {
  const std::string_view line = next(fmt::format("the header '{}'", header));
  if (line != header) fail(fmt::format("expected the header '{}', got '{}'", header, line));
}

void LineReader::expect_end(std::string_view after) {
  if (at_end()) return;
  next("nothing");
  fail(fmt::format("unexpected content after {}", after));
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
