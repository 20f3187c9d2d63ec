// Issue 40, item 4: checkpoints that would load wrong weights silently. The data buffer must be
// covered by the tensors exactly (a header length 4 bytes short shifted every tensor by one
// float), a weight's dtype must be the parameter's kind of number (an F32 weight relabelled I32
// loaded as converted integers), and non-finite weights or optimizer state are refused, naming
// the file and the tensor.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "loom.h"
#include "io/safetensors.h"
#include "test_util.h"

using namespace loom;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A hand-made safetensors file: the 8-byte little-endian `length` (the header's own length
// unless given), the header, the data.
std::string crafted(const std::string& header, const std::string& data, uint64_t length = 0) {
  if (length == 0) length = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length, 8);
  return bytes + header + data;
}

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// `call` must throw a loom::Error containing every piece of `expected`.
template <class Call>
void check_error(Call call, const std::vector<std::string>& expected) {
  try {
    call();
    FAIL_CHECK("expected a loom::Error");
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& piece : expected)
      CHECK_MESSAGE(message.find(piece) != std::string::npos,
                    "expected \"" << piece << "\" in: " << message);
  }
}

std::vector<float> values_of(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& [name, t] : m.state_dict())
    for (const float v : t.to_vector()) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("read_safetensors: the tensors must cover the data buffer exactly") {
  testing::TempDir dir;
  const std::string path = dir.file("x.safetensors");
  const std::string data = float_bytes({1, 2, 3, 4});
  // Bytes [8, 12) belong to no tensor.
  write_bytes(path, crafted(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                            data));
  check_error([&] { nn::read_safetensors(path); }, {path, "gap", "[8, 12)", "'b'"});
  // The last 4 bytes belong to no tensor.
  write_bytes(path, crafted(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", data));
  check_error([&] { nn::read_safetensors(path); }, {path, "holds 16 bytes", "cover 12"});
  // A gap at the start of the buffer.
  write_bytes(path, crafted(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})", data));
  check_error([&] { nn::read_safetensors(path); }, {path, "gap", "[0, 4)"});
  // The header's length field 4 bytes short (the header ends with spaces, so its JSON still
  // parses): the buffer would start 4 bytes early and every tensor read one float early.
  const std::string header = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  write_bytes(path, crafted(header + "        ", data));
  CHECK(nn::read_safetensors(path).at("a").to_vector() == std::vector<float>{1, 2, 3, 4});
  write_bytes(path, crafted(header + "        ", data, header.size() + 4));
  check_error([&] { nn::read_safetensors(path); }, {path, "holds 20 bytes", "cover 16"});
  check_error([&] { nn::read_safetensors_metadata(path); }, {path, "cover 16"});
}

TEST_CASE("nn::load refuses a weight relabelled with an integer dtype, naming file and tensor") {
  testing::TempDir dir;
  const std::string path = dir.file("linear.safetensors");
  manual_seed(1);
  nn::Linear saved(3, 2);
  nn::save(saved, path);
  // "weight" as I32: the same 4 bytes an element, so offsets and sizes still agree.
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find(R"("weight":{"dtype":"F32")");
  REQUIRE(at != std::string::npos);
  bytes.replace(bytes.find("F32", at), 3, "I32");
  write_bytes(path, bytes);
  CHECK(nn::read_safetensors(path).at("weight").dtype() == DType::Int64);  // the reader reads it
  manual_seed(2);
  nn::Linear model(3, 2);
  const std::vector<float> before = values_of(model);
  check_error([&] { nn::load(model, path); },
              {path,
               "wrong dtype (1): weight (checkpoint integer int64, model floating-point "
               "float32)"});
  CHECK(values_of(model) == before);
}

TEST_CASE("nn::load and load_checkpoint refuse NaN or infinite weights, naming file and tensor") {
  testing::TempDir dir;
  const std::string path = dir.file("linear.safetensors");
  nn::Linear bad(3, 2);
  {
    NoGradGuard no_grad;
    bad.weight.copy_(
        tensor({1, std::nanf(""), 3, 4, std::numeric_limits<float>::infinity(), 6}, {2, 3}));
  }
  nn::save(bad, path);
  nn::Linear model(3, 2);
  const std::vector<float> before = values_of(model);
  check_error([&] { nn::load(model, path); },
              {path, "not finite (1): weight (2 of 6 values NaN or infinite)"});
  CHECK(values_of(model) == before);

  const std::string ckpt = dir.file("ckpt.safetensors");
  nn::save_checkpoint(ckpt, {{"model", &bad}}, nullptr);
  check_error(
      [&] {
        nn::load_checkpoint(ckpt, {{"model", &model}});
      },
      {ckpt, "prefix 'model.'", "not finite (1): weight"});
  CHECK(values_of(model) == before);
}

TEST_CASE("load_checkpoint and Optimizer::load refuse NaN optimizer state, naming file and key") {
  testing::TempDir dir;
  const std::string ckpt = dir.file("ckpt.safetensors");
  manual_seed(3);
  nn::Linear model(3, 2);
  optim::AdamW opt(model.parameters(), 1e-3f);
  sum(model.forward(ones({4, 3}))).backward();
  opt.step();
  nn::save_checkpoint(ckpt, {{"model", &model}}, &opt);
  // One moment of the saved state made NaN, the rest of the file as it was.
  std::map<std::string, std::string> meta;
  std::map<std::string, Tensor> state = nn::read_safetensors(ckpt, &meta);
  const std::string key = "optim.state.0.0.exp_avg_sq";
  REQUIRE(state.count(key) == 1);
  state[key] = full(state[key].shape(), std::nanf(""));
  const std::vector<std::pair<std::string, Tensor>> tensors(state.begin(), state.end());
  nn::write_safetensors(ckpt, tensors, meta);

  optim::AdamW fresh(model.parameters(), 1e-3f);
  check_error(
      [&] {
        nn::load_checkpoint(ckpt, {{"model", &model}}, &fresh);
      },
      {ckpt, "state.0.0.exp_avg_sq", "6 NaN or infinite values of 6"});
  CHECK(fresh.step_count() == 0);  // untouched

  const std::string alone = dir.file("optim.safetensors");
  std::vector<std::pair<std::string, Tensor>> optimizer_part;
  for (const auto& [name, t] : state)
    if (name.rfind("optim.", 0) == 0) optimizer_part.emplace_back(name.substr(6), t);
  nn::write_safetensors(alone, optimizer_part, {{"optimizer", "AdamW"}});
  check_error([&] { fresh.load(alone); }, {alone, "state.0.0.exp_avg_sq", "NaN or infinite"});
}
