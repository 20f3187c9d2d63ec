// Saving and loading tokenizers: exact round trips, the load_tokenizer factory, and errors that
// name the file and line of a corrupt or truncated file.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

using namespace loom::data;
using loom::testing::check_error;
using loom::testing::read_file;
using loom::testing::synthetic_corpus;
using loom::testing::TempDir;
using loom::testing::write_file;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

}  // namespace

TEST_CASE("BPETokenizer: save then load gives the same tokenizer") {
  TempDir dir;
  const std::string path = dir.file("bpe.txt");
  const BPETokenizer tok =
      BPETokenizer::train(synthetic_corpus(20000, 11), 256 + 120, {"<|endoftext|>", "[MASK]"});
  tok.save(path);
  const BPETokenizer loaded = BPETokenizer::load(path);
  CHECK(loaded.merges() == tok.merges());
  CHECK(loaded.special_tokens() == tok.special_tokens());
  CHECK(loaded.vocab_size() == tok.vocab_size());
  const std::string text = synthetic_corpus(5000, 12) + "<|endoftext|>\xff\xfe";
  CHECK(loaded.encode_with_special(text) == tok.encode_with_special(text));

  const std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  REQUIRE(dynamic_cast<BPETokenizer*>(any.get()) != nullptr);
  CHECK(any->encode(text) == tok.encode(text));
  CHECK(any->decode(any->encode(text)) == text);
  // Saving leaves no temporary file behind.
  CHECK(!std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("ByteTokenizer: save then load_tokenizer gives a ByteTokenizer") {
  TempDir dir;
  const std::string path = dir.file("bytes.txt");
  ByteTokenizer().save(path);
  const std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  REQUIRE(dynamic_cast<ByteTokenizer*>(any.get()) != nullptr);
  CHECK(any->vocab_size() == 256);
  CHECK(any->decode(any->encode("\x01\xff ok")) == "\x01\xff ok");
  write_file(path, read_file(path) + "extra\n");
  check_error([&] { ByteTokenizer::load(path); }, {path, "line 2"});
}

TEST_CASE("BPETokenizer::load: corrupt and truncated files name the file and the line") {
  TempDir dir;
  const std::string good = dir.file("good.txt"), bad = dir.file("bad.txt");
  // 10 merges + 1 special token.
  BPETokenizer::train(synthetic_corpus(5000, 13), 256 + 10 + 1, {"<|endoftext|>"}).save(good);
  const std::vector<std::string> lines = lines_of(read_file(good));
  // Layout: line 1 header, line 2 "merges 10", lines 3..12 merges, line 13 "special_tokens 1",
  // line 14 the token.
  REQUIRE(lines.size() == 14);
  const auto corrupt = [&](size_t line_index, const std::string& replacement) {
    std::vector<std::string> changed = lines;
    changed[line_index] = replacement;
    write_file(bad, join_lines(changed));
  };
  const auto line = [](size_t index) { return "line " + std::to_string(index + 1); };

  corrupt(0, "not-a-tokenizer 1");
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(0), "header"});
  corrupt(1, "merges ten");
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(1), "merges <count>"});
  corrupt(4, "97 x");
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(4), "merge 2"});
  corrupt(5, "97");
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(5)});
  corrupt(6, "256 999");  // merge 4 may only use ids below 256 + 4
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(6), "999"});
  corrupt(7, lines[2]);  // repeats merge 0
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(7), "repeats merge 0"});
  corrupt(13, "bad token");
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(13), "whitespace"});

  // Truncated in the middle of the merges: the error points one past the last line.
  write_file(bad, join_lines(std::vector<std::string>(lines.begin(), lines.begin() + 8)));
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(8), "file ends", "merge 6 of 10"});
  write_file(bad, join_lines(std::vector<std::string>(lines.begin(), lines.begin() + 12)));
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(12), "special_tokens <count>"});
  write_file(bad, "");
  check_error([&] { BPETokenizer::load(bad); }, {bad, "line 1", "file ends"});
  write_file(bad, join_lines(lines) + "trailing\n");
  check_error([&] { BPETokenizer::load(bad); }, {bad, line(14), "unexpected"});

  check_error([&] { BPETokenizer::load(dir.file("missing.txt")); }, {"missing.txt", "cannot open"});
  check_error([&] { load_tokenizer(dir.file("missing.txt")); }, {"missing.txt", "cannot open"});
  write_file(bad, "something-else 3\n");
  check_error([&] { load_tokenizer(bad); },
              {bad, "line 1", BPETokenizer::kMagic, ByteTokenizer::kMagic});
}

TEST_CASE("check_vocab_sizes: a tokenizer that does not fit the model names both files") {
  check_vocab_sizes(256, "out/tokenizer.txt", 256, "out/ckpt.safetensors");  // they fit
  // generate_gpt with a byte tokenizer and a 300-token model printed part of a completion, then
  // failed in ByteTokenizer::decode naming neither file.
  check_error([] { check_vocab_sizes(256, "out/tokenizer.txt", 300, "out/ckpt.safetensors"); },
              {"out/tokenizer.txt", "256 tokens", "out/ckpt.safetensors", "vocabulary of 300"});
}
