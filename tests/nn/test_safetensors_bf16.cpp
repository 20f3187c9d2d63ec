// safetensors BF16: a file written by the Python writer (scripts/safetensors_io.py, from
// tests/golden/gen_bf16.py) reads as float32 by default (unchanged) or bit for bit as bfloat16
// with keep_bfloat16; loom writes bfloat16 tensors as BF16 with the Python writer's exact bytes;
// round trips keep every bit (NaN payloads included); corrupt BF16 entries are refused.
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/bfloat16.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace loom;
using loom::testing::expect_error;
using nn::read_safetensors;
using nn::write_safetensors;

namespace {

const std::string kCheckpoint = LOOM_TEST_DATA "/bf16_checkpoint.safetensors";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_file(const std::string& name) {
  return (fs::temp_directory_path() /
          ("loom_test_bf16_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  REQUIRE(t.dtype() == DType::BFloat16);
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) std::memcpy(out.data(), t.contiguous().raw_data(), out.size() * 2);
  return out;
}

}  // namespace

TEST_CASE("safetensors BF16 from Python reads as float32 by default and as bfloat16 when kept") {
  const auto widened = read_safetensors(kCheckpoint);
  const auto kept = read_safetensors(kCheckpoint, nullptr, true);
  REQUIRE(widened.size() == 7);
  REQUIRE(kept.size() == 7);
  for (const auto& [name, t] : kept) {
    INFO("tensor " << name);
    const Tensor& w = widened.at(name);
    CHECK(t.shape() == w.shape());
    if (name == "master.weight") {
      CHECK(t.dtype() == DType::Float32);
    } else if (name == "step") {
      CHECK(t.dtype() == DType::Int64);
    } else {
      CHECK(t.dtype() == DType::BFloat16);
      CHECK(w.dtype() == DType::Float32);  // the reading every existing loader relies on
      CHECK(t.to(DType::Float32).to_vector() == w.to_vector());  // widening is exact
    }
  }
  CHECK(kept.at("scalar").item() == 1.5f);
  CHECK(kept.at("empty").shape() == Shape{0, 2});
  CHECK(bits_of(kept.at("specials")) ==
        std::vector<uint16_t>{0x7F80, 0xFF80, 0x8000, 0x7F7F, 0x0001});
}

TEST_CASE("safetensors: loom writes bfloat16 tensors as BF16, byte for byte as the Python writer") {
  std::map<std::string, std::string> metadata;
  const auto kept = read_safetensors(kCheckpoint, &metadata, true);
  std::vector<std::pair<std::string, Tensor>> tensors(kept.begin(), kept.end());
  const std::string out = temp_file("rewrite.safetensors");
  write_safetensors(out, tensors, metadata);
  CHECK(read_bytes(out) == read_bytes(kCheckpoint));
  fs::remove(out);
}

TEST_CASE("safetensors: a bfloat16 round trip keeps every bit, NaN payloads and views included") {
  std::vector<uint16_t> all(4096);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 16 + (i % 16));
  Tensor t = Tensor::empty({64, 64}, DType::BFloat16);
  std::memcpy(t.raw_data(), all.data(), all.size() * 2);
  const std::string path = temp_file("roundtrip.safetensors");
  write_safetensors(path, {{"all", t}, {"view", t.t().narrow(0, 3, 5)}, {"f", ones({3})}});
  const auto back = read_safetensors(path, nullptr, true);
  CHECK(bits_of(back.at("all")) == all);
  CHECK(bits_of(back.at("view")) == bits_of(t.t().narrow(0, 3, 5)));
  CHECK(back.at("f").dtype() == DType::Float32);
  // The header names the dtype BF16 and sizes the data at 2 bytes an element.
  const std::string bytes = read_bytes(path);
  CHECK(bytes.find("\"all\":{\"dtype\":\"BF16\",\"shape\":[64,64]") != std::string::npos);
  fs::remove(path);
}

TEST_CASE("safetensors: corrupt BF16 entries are refused with the file and the sizes named") {
  auto write_raw = [](const std::string& path, const std::string& header, size_t data_bytes) {
    std::string text = header;
    text.append((8 - text.size() % 8) % 8, ' ');
    const uint64_t n = text.size();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << text << std::string(data_bytes, '\x3f');
  };
  const std::string path = temp_file("bad.safetensors");
  write_raw(path, R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4);
  expect_error([&] { read_safetensors(path, nullptr, true); },
               {"read_safetensors", path, "'w'", "BF16", "needs 6 bytes"});
  write_raw(path, R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}})", 4);
  expect_error([&] { read_safetensors(path, nullptr, true); }, {path, "truncated"});
  write_raw(path, R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]}})", 6);
  CHECK(read_safetensors(path, nullptr, true).at("w").dtype() == DType::BFloat16);
  fs::remove(path);
}
