// Issue 16, cases 2, 4, 6 and 8 on the nn side: hostile safetensors headers (huge shapes,
// hundreds of thousands of keys, a 5-million-item shape), checkpoint metadata that is not a
// number, and the temporaries a killed writer leaves behind.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "loom.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// A hand-made safetensors file: 8-byte little-endian header length, header, data.
void write_crafted(const std::string& path, const std::string& header, const std::string& data = "") {
  const uint64_t n = header.size();
  char length[8];
  std::memcpy(length, &n, 8);
  std::ofstream out(path, std::ios::binary);
  out.write(length, 8);
  out << header << data;
}

// Reading `path` must throw a loom::Error naming it and containing `what`, within `seconds`.
void check_rejected(const std::string& path, const std::string& what, double seconds = 5.0) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    nn::read_safetensors(path);
    FAIL_CHECK("expected an error containing \"" << what << "\"");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_MESSAGE(message.find(path) != std::string::npos, message);
    CHECK_MESSAGE(message.find(what) != std::string::npos, "expected \"" << what << "\" in: " << message);
  }
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds);
}

}  // namespace

TEST_CASE("safetensors: a shape whose product overflows is rejected even with a zero dim") {
  testing::TempDir dir;
  write_crafted(dir.file("a.safetensors"),
                R"({"t":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],)"
                R"("data_offsets":[0,0]}})");
  check_rejected(dir.file("a.safetensors"), "cap of 2^60 elements");
}

TEST_CASE("safetensors: a shape array of 5 million items is rejected at once") {
  testing::TempDir dir;
  std::string shape = "1";
  shape.reserve(10'000'000);
  for (int i = 1; i < 5'000'000; ++i) shape += ",1";
  write_crafted(dir.file("rank.safetensors"),
                R"({"t":{"dtype":"F32","shape":[)" + shape + R"(],"data_offsets":[0,4]}})",
                std::string(4, '\0'));
  check_rejected(dir.file("rank.safetensors"), "more than 1048576 keys and values", 1.0);
  // Under the header cap, a shape longer than rank 64 fails while it is parsed.
  std::string rank1000 = "1";
  for (int i = 1; i < 1000; ++i) rank1000 += ",1";
  write_crafted(dir.file("rank1000.safetensors"),
                R"({"t":{"dtype":"F32","shape":[)" + rank1000 + R"(],"data_offsets":[0,4]}})",
                std::string(4, '\0'));
  check_rejected(dir.file("rank1000.safetensors"), "an array of more than 64 items");
  // Rank 64 itself is fine.
  std::string rank64 = "1";
  for (int i = 1; i < 64; ++i) rank64 += ",1";
  write_crafted(dir.file("ok.safetensors"),
                R"({"t":{"dtype":"F32","shape":[)" + rank64 + R"(],"data_offsets":[0,4]}})",
                std::string(4, '\0'));
  CHECK(nn::read_safetensors(dir.file("ok.safetensors")).at("t").dim() == 64);
}

TEST_CASE("safetensors: 160,000 __metadata__ keys read fast; duplicates found in O(1)") {
  testing::TempDir dir;
  std::string meta;
  for (int i = 0; i < 160'000; ++i) meta += fmt::format(R"({}"k{}":"v")", i ? "," : "", i);
  write_crafted(dir.file("meta.safetensors"), R"({"__metadata__":{)" + meta + "}}");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(nn::read_safetensors_metadata(dir.file("meta.safetensors")).size() == 160'000);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);

  write_crafted(dir.file("dup.safetensors"),
                R"({"__metadata__":{)" + meta + R"(,"k159999":"again"}})");
  check_rejected(dir.file("dup.safetensors"), "duplicate key \"k159999\"", 10.0);
}

TEST_CASE("safetensors: a header of more than 2^20 keys and values is rejected") {
  testing::TempDir dir;
  std::string meta;
  meta.reserve(12'000'000);
  for (int i = 0; i < 600'000; ++i) meta += fmt::format(R"({}"{}":"")", i ? "," : "", i);
  write_crafted(dir.file("many.safetensors"), R"({"__metadata__":{)" + meta + "}}");
  check_rejected(dir.file("many.safetensors"), "more than 1048576 keys and values", 1.0);
}

TEST_CASE("safetensors: a number beyond a double is a loom::Error (nlohmann's out_of_range)") {
  // Found by fuzz_safetensors: nlohmann throws out_of_range.406, which used to escape.
  testing::TempDir dir;
  write_crafted(dir.file("big.safetensors"),
                R"({"w":{"dtype":"F32","shape":[1e999],"data_offsets":[0,0]}})");
  check_rejected(dir.file("big.safetensors"), "number overflow parsing '1e999'");
}

TEST_CASE("checkpoint metadata that is not a number is an error naming the key and file") {
  nn::Metadata meta = nn::TrainerState{}.to_metadata();
  meta["step"] = "abc";
  try {
    nn::TrainerState::from_metadata(meta, "ckpt.safetensors");
    FAIL_CHECK("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "ckpt.safetensors: \"step\" is 'abc', not a number");
  }
  meta["step"] = std::to_string(1);
  meta["batch_index"] = std::string(20, '9');  // past int64: from_chars refuses it
  CHECK_THROWS_AS(nn::TrainerState::from_metadata(meta, "ckpt"), Error);
}

TEST_CASE("writing a checkpoint removes the temporaries of killed writers, not of live ones") {
  testing::TempDir dir;
  const std::string target = dir.file("ckpt.safetensors");
  // A writer that was killed: a child process that has exited (its pid is free again).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  const std::string stale = target + ".tmp." + std::to_string(child);
  const std::string live = target + ".tmp.1";  // pid 1 is always alive
  const std::string other = dir.file("other.safetensors.tmp." + std::to_string(child));
  for (const std::string& p : {stale, live, other}) std::ofstream(p) << "half a file";

  nn::write_safetensors(target, {{"w", ones({2})}});
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));   // a live process may still be writing it
  CHECK(fs::exists(other));  // another target's
  CHECK(nn::read_safetensors(target).at("w").to_vector() == std::vector<float>{1, 1});
}
