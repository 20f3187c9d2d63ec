// A batch larger than the data set, and a tokenizer file whose merges
// each double a token (40 lines asked for a terabyte).
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "data/bpe_tokenizer.h"
#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "data_test_util.h"
#include "loom.h"

using namespace loom;
using loom::testing::check_error;
using loom::testing::TempDir;
using loom::testing::write_file;

TEST_CASE("BatchStream over an epoch of zero batches throws naming the sizes (was a segfault)") {
  // 60 copies of a 115-byte line, context 32: a few hundred windows, far fewer than 100000.
  std::string text;
  for (int i = 0; i < 60; ++i) text += std::string(114, 'a' + i % 26) + "\n";
  std::vector<int64_t> ids(text.begin(), text.end());
  auto windows = std::make_shared<data::LanguageModelDataset>(ids, 32, 1);
  check_error(
      [&] { data::BatchStream s(data::DataLoader(windows, 100000, true, 0, /*drop_last=*/true)); },
      {"BatchStream", std::to_string(windows->size()) + " examples", "batch size 100000",
       "drop_last"});
  // Without drop_last the one short batch is a valid, endless stream.
  data::BatchStream stream(data::DataLoader(windows, 100000, true, 0, /*drop_last=*/false));
  CHECK(stream.next()[0].size(0) == windows->size());
  CHECK(stream.next()[0].size(0) == windows->size());
}

TEST_CASE("a BPE file whose merges double a token is rejected at the cap, quickly") {
  TempDir dir;
  // The exact bomb: 97 97, then 256 256, 257 257, ... (40 merges): token 256 + k has 2^(k+1)
  // bytes, so merge 9 would make a token of 1024 + 1024 bytes.
  std::string file = "loom-bpe-tokenizer 1\nmerges 40\n97 97\n";
  for (int k = 0; k < 39; ++k)
    file += std::to_string(256 + k) + " " + std::to_string(256 + k) + "\n";
  file += "special_tokens 0\n";
  write_file(dir.file("bomb.txt"), file);
  const auto t0 = std::chrono::steady_clock::now();
  check_error([&] { data::load_tokenizer(dir.file("bomb.txt")); },
              {dir.file("bomb.txt"), "line 13",
               "makes a token of 2048 bytes, over the cap of 1024"});
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0);

  // Under the cap the same doubling loads (token 256 + 8 has 512 bytes).
  std::string ok = "loom-bpe-tokenizer 1\nmerges 9\n97 97\n";
  for (int k = 0; k < 8; ++k) ok += std::to_string(256 + k) + " " + std::to_string(256 + k) + "\n";
  ok += "special_tokens 0\n";
  write_file(dir.file("ok.txt"), ok);
  CHECK(data::load_tokenizer(dir.file("ok.txt"))->vocab_size() == 256 + 9);
}

TEST_CASE("BPE special tokens are capped in length and number") {
  check_error([] { data::BPETokenizer({}, {std::string(1025, 'x')}); }, {"over the cap of 1024"});
  std::vector<std::string> many;
  for (size_t i = 0; i <= data::BPETokenizer::kMaxSpecialTokens; ++i)
    many.push_back("<|" + std::to_string(i) + "|>");
  check_error([&] { data::BPETokenizer({}, many); }, {"more than 4096 special tokens"});
}

TEST_CASE("BPE training never makes a token longer than load() accepts") {
  const std::string text(5000, 'a');  // one chunk: merges would double up to 4096 bytes
  const data::BPETokenizer tok = data::BPETokenizer::train(text, 300);
  for (int64_t id = 0; id < tok.vocab_size(); ++id)
    CHECK(tok.token_bytes(id).size() <= data::BPETokenizer::kMaxTokenBytes);
  CHECK(tok.decode(tok.encode(text)) == text);
}
