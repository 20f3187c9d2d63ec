// data/text_file.h's writer and UTF-8 check: every file a training run writes (tokenizer.txt,
// log.csv, the PNGs, the checkpoint) goes through data::AtomicFile, a temporary unique to its
// writer, flushed to disk and renamed; valid_utf8_prefix finds the first byte that is not UTF-8.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "data/data_test_util.h"
#include "data/text_file.h"

using loom::testing::check_error;
using loom::testing::read_file;
using loom::testing::TempDir;
using loom::testing::write_file;
namespace data = loom::data;
namespace fs = std::filesystem;

// Issue 40: tokenizer.txt, log.csv and the PNGs went through a fixed "<path>.tmp" (no fsync):
// two writers shared it, and a leftover one (here a directory) blocked every later write.
TEST_CASE("write_file_atomic: a temporary of its own, never a fixed '<path>.tmp'") {
  TempDir dir;
  const std::string path = dir.file("tokenizer.txt");
  fs::create_directories(path + ".tmp");  // what a fixed temporary name trips over
  data::write_file_atomic(path, "one\n", "test");
  CHECK(read_file(path) == "one\n");
  data::write_file_atomic(path, "two\n", "test");  // over the old contents
  CHECK(read_file(path) == "two\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) entries += e.exists();
  CHECK(entries == 2);  // the file and the directory: no temporary left behind
}

TEST_CASE("AtomicFile: nothing replaces the target before commit; killed writers' temporaries go") {
  TempDir dir;
  const std::string path = dir.file("log.csv");
  write_file(path, "old\n");
  {
    data::AtomicFile file(path, "test");
    file.write("new\n", 4);
    CHECK(read_file(path) == "old\n");  // an error here (no commit) keeps the old file
  }
  CHECK(read_file(path) == "old\n");
  CHECK(!fs::exists(path + ".tmp." + std::to_string(::getpid())));

  const pid_t child = ::fork();  // a writer that was killed: a process that has ended
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string stale = path + ".tmp." + std::to_string(child);
  write_file(stale, "half");
  data::AtomicFile file(path, "test");
  file.write("new\n", 4);
  file.commit();
  CHECK(read_file(path) == "new\n");
  CHECK(!fs::exists(stale));
  check_error([&] { data::AtomicFile(dir.file("missing/x.csv"), "CsvLog"); },
              {"CsvLog: cannot create", "missing/x.csv.tmp."});
}

TEST_CASE("valid_utf8_prefix: strict UTF-8, as Python's decoder") {
  CHECK(data::valid_utf8_prefix("") == 0);
  CHECK(data::valid_utf8_prefix("Gr\xc3\xbc\xc3\x9f"
                                "e \xf0\x9f\x99\x82") == 12);
  CHECK(data::valid_utf8_prefix("Haus\xff") == 4);           // never a UTF-8 byte
  CHECK(data::valid_utf8_prefix("ab\xc3") == 2);             // cut short
  CHECK(data::valid_utf8_prefix("a\xc0\xaf") == 1);          // overlong '/'
  CHECK(data::valid_utf8_prefix("a\xed\xa0\x80") == 1);      // a surrogate
  CHECK(data::valid_utf8_prefix("a\xf4\x90\x80\x80") == 1);  // past U+10FFFF
  CHECK(data::valid_utf8_prefix("a\xe2\x82") == 1);          // a 3-byte sequence missing a byte
}

TEST_CASE("utf8_sequence: the announced length and the maximal well-formed prefix") {
  auto seq = [](std::string_view text) {
    const data::Utf8Sequence s = data::utf8_sequence(text);
    return std::pair<size_t, size_t>{s.length, s.well_formed};
  };
  CHECK(seq("") == std::pair<size_t, size_t>{0, 0});
  CHECK(seq("A") == std::pair<size_t, size_t>{1, 1});
  CHECK(seq("\xc3\xbc!") == std::pair<size_t, size_t>{2, 2});
  CHECK(seq("\xf0\x9f\x99\x82") == std::pair<size_t, size_t>{4, 4});
  CHECK(seq("\xff") == std::pair<size_t, size_t>{0, 0});              // never a lead byte
  CHECK(seq("\xe2\x82") == std::pair<size_t, size_t>{3, 2});          // cut short: one U+FFFD
  CHECK(seq("\xe2\x82" "a") == std::pair<size_t, size_t>{3, 2});     // ... for both bytes
  CHECK(seq("\xed\xa0\x80") == std::pair<size_t, size_t>{3, 1});      // a surrogate: the lead
  CHECK(seq("\xf0\x80\x80\x80") == std::pair<size_t, size_t>{4, 1});  // overlong
  CHECK(data::utf8_sequence("\xc3\xbc").valid());
  CHECK_FALSE(data::utf8_sequence("\xe2\x82").valid());
}
