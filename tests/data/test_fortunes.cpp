// The fortunes reader on a directory made here (with the files it must skip) and on the real
// package, the seeded train/validation split, and BPE training on a megabyte of fortunes.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "data/bpe_tokenizer.h"
#include "data/fortunes.h"
#include "data/splitmix.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;
using loom::testing::TempDir;
using loom::testing::write_file;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> numbered_entries(int n) {
  std::vector<std::string> entries;
  for (int i = 0; i < n; ++i) entries.push_back("entry " + std::to_string(i));
  return entries;
}

}  // namespace

TEST_CASE("parse_fortunes: entries split on '%' lines, trimmed, empty ones dropped") {
  const std::string text =
      "\nFirst fortune.\n%\nSecond,\n  on two lines.  \n%\n%\n   \n%\n\n    /\\_/\\\n   ( o.o "
      ")\n%\n"
      "100% sure % signs inside lines stay\n%\r\nLast, no final separator\n";
  const std::vector<std::string> expected = {
      "First fortune.", "Second,\n  on two lines.", "    /\\_/\\\n   ( o.o )",
      "100% sure % signs inside lines stay", "Last, no final separator"};
  CHECK(parse_fortunes(text) == expected);
  CHECK(parse_fortunes("").empty());
  CHECK(parse_fortunes("%\n%\n").empty());
}

TEST_CASE("read_fortunes: reads plain fortune files in name order and skips the rest") {
  TempDir dir;
  const std::string secret = "MUST NOT BE READ";
  write_file(dir.file("beta"), "b1\n%\nb2\n");
  write_file(dir.file("alpha"), "a1\n%\na2\n%\n");
  write_file(dir.file("alpha.dat"), std::string("\x00\x00\x00\x02", 4) + secret);
  fs::create_symlink("alpha", dir.path() / "alpha.u8");
  fs::create_symlink("beta", dir.path() / "link-to-beta");  // same file: read once
  write_file(dir.file("men-women-o"), secret);              // BSD offensive name
  write_file(dir.file("jokes-off"), secret);
  write_file(dir.file("offensive"), secret);
  write_file(dir.file(".hidden"), secret);
  fs::create_directory(dir.path() / "off");  // Debian's offensive collection
  write_file(dir.file("off/gamma"), secret);
  fs::create_symlink("off/gamma", dir.path() / "gamma");  // a link into it
  fs::create_symlink("nowhere", dir.path() / "dangling");
  write_file(dir.file("coffee"), "c1\n");  // "off" inside a word is fine

  const std::vector<std::string> entries = read_fortunes(dir.path().string());
  const std::vector<std::string> expected = {"a1", "a2", "b1", "b2", "c1"};
  CHECK(entries == expected);
  CHECK(read_fortunes(dir.path().string()) == entries);  // deterministic
}

TEST_CASE("read_fortunes: a missing or empty directory says what to install") {
  TempDir dir;
  const std::string missing = dir.file("no-such-dir");
  check_error([&] { read_fortunes(missing); },
              {"read_fortunes", missing, "apt-get install fortunes"});
  check_error([&] { read_fortunes(dir.path().string()); }, {"no fortunes", dir.path().string()});
}

TEST_CASE("read_fortunes: the installed fortunes package") {
  if (!fs::is_directory(kFortunesDir)) {
    MESSAGE("skipped: " << kFortunesDir << " is missing (apt-get install fortunes)");
    return;
  }
  const std::vector<std::string> entries = read_fortunes();
  size_t bytes = 0;
  for (const std::string& e : entries) {
    bytes += e.size();
    CHECK(!e.empty());
    CHECK(e.find('\0') == std::string::npos);     // no binary .dat content
    CHECK(e.find("\n%\n") == std::string::npos);  // no separators left inside
    CHECK(e.back() != '\n');
  }
  MESSAGE(entries.size() << " fortunes, " << bytes << " bytes");
  CHECK(entries.size() > 1000);
  CHECK(bytes > 1000000);
}

TEST_CASE("split_train_val: deterministic, disjoint, complete, of the requested size") {
  const std::vector<std::string> entries = numbered_entries(1000);
  const TrainValSplit a = split_train_val(entries, 0.1, 42);
  const TrainValSplit b = split_train_val(entries, 0.1, 42);
  CHECK(a.train == b.train);
  CHECK(a.val == b.val);
  CHECK(a.val.size() == static_cast<size_t>(std::llround(0.1 * 1000)));
  CHECK(a.train.size() + a.val.size() == entries.size());
  std::set<std::string> all(a.train.begin(), a.train.end());
  for (const std::string& v : a.val) CHECK(all.insert(v).second);  // disjoint
  CHECK(all == std::set<std::string>(entries.begin(), entries.end()));
  // Each part keeps the original order (entries are numbered in order).
  const auto index = [](const std::string& e) { return std::stoi(e.substr(6)); };
  CHECK(std::is_sorted(a.val.begin(), a.val.end(),
                       [&](const auto& x, const auto& y) { return index(x) < index(y); }));
  CHECK(split_train_val(entries, 0.1, 43).val != a.val);  // another seed, another split
  CHECK(split_train_val(entries, 0.0, 42).train == entries);
  check_error([&] { split_train_val(entries, 1.0, 1); }, {"val_fraction", "1"});
  check_error([&] { split_train_val(entries, -0.5, 1); }, {"val_fraction"});
}

TEST_CASE("SplitMix64: the reference generator's outputs, on every platform") {
  // Vigna's splitmix64.c seeded with 0, computed from its definition (the generator's state
  // advances by the golden-ratio constant; each output is a fixed mix of the state).
  SplitMix64 gen(0);
  const auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (uint64_t k = 1; k <= 3; ++k) CHECK(gen.next() == mix(k * 0x9E3779B97F4A7C15ull));
  CHECK(mix(0x9E3779B97F4A7C15ull) == 0xE220A8397B1DCDAFull);  // published first output
  // Permutations contain every index once.
  std::vector<int64_t> perm = random_permutation(100, 7);
  std::sort(perm.begin(), perm.end());
  for (int64_t i = 0; i < 100; ++i) CHECK(perm[i] == i);
  CHECK(random_permutation(100, 7) == random_permutation(100, 7));
}

TEST_CASE("join_entries: separators between entries only, and parse_fortunes inverts it") {
  const std::vector<std::string> entries = {"one", "two\nlines", "three"};
  CHECK(join_entries(entries, "|") == "one|two\nlines|three");
  CHECK(join_entries({}, "|").empty());
  CHECK(parse_fortunes(join_entries(entries, "\n%\n")) == entries);
}

TEST_CASE("BPETokenizer::train on a megabyte of fortunes to 512 tokens") {
  if (!fs::is_directory(kFortunesDir)) {
    MESSAGE("skipped: " << kFortunesDir << " is missing (apt-get install fortunes)");
    return;
  }
  std::vector<std::string> entries = read_fortunes();
  std::string text;
  for (const std::string& e : entries) {
    if (text.size() >= (1u << 20)) break;
    text += e + "\n\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const BPETokenizer tok = BPETokenizer::train(text, 512, {"<|endoftext|>"});
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<int64_t> ids = tok.encode(text);
  const auto t2 = std::chrono::steady_clock::now();
  MESSAGE("BPE on " << text.size() << " bytes: train to 512 in "
                    << std::chrono::duration<double>(t1 - t0).count() << " s, encode in "
                    << std::chrono::duration<double>(t2 - t1).count() << " s, "
                    << static_cast<double>(text.size()) / static_cast<double>(ids.size())
                    << " bytes/token");
  CHECK(tok.vocab_size() == 512);
  CHECK(ids.size() < text.size());
  CHECK(tok.decode(ids) == text);
}
