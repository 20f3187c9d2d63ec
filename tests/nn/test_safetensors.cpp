// safetensors I/O: files written by PyTorch (tests/golden/gen_safetensors.py) read correctly,
// loom writes the same bytes as the Python writer, round trips are bit-exact, every kind of
// corrupt file is rejected with a message naming the file, and writes are atomic.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "io/safetensors.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace loom;
using nn::read_safetensors;
using nn::write_safetensors;

namespace {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("loom_test_safetensors_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of the entries in the directory, to spot leftover temporaries.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// A hand-made safetensors file: length field, header text, data bytes.
std::string craft(const std::string& header, const std::string& data = "") {
  return u64_le(header.size()) + header + data;
}

std::string float_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// read_safetensors must throw a loom::Error naming the file and containing `what`.
void check_read_error(const std::string& path, const std::string& what) {
  try {
    read_safetensors(path);
    FAIL_CHECK("expected an error containing \"" << what << "\" for " << path);
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_MESSAGE(message.find(path) != std::string::npos, message);
    CHECK_MESSAGE(message.find(what) != std::string::npos,
                  "expected \"" << what << "\" in: " << message);
  }
}

void check_crafted_error(const TempDir& dir, const std::string& bytes, const std::string& what) {
  const std::string path = dir.file("crafted.safetensors");
  write_bytes(path, bytes);
  check_read_error(path, what);
}

// The formulas of tests/golden/gen_safetensors.py (element i of the row-major data).
float float_value(int64_t i) { return static_cast<float>(i) * 0.5f - 3.0f; }
int64_t int_value(int64_t i) { return i * 7 - 20; }

std::vector<float> float_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = float_value(i);
  return v;
}

std::vector<int64_t> int_values(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = int_value(i);
  return v;
}

// Same dtype, shape and bits (so NaN payloads and -0.0 count).
void check_bitwise_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
  INFO(what);
  REQUIRE(actual.defined());
  CHECK(actual.dtype() == expected.dtype());
  REQUIRE(actual.shape() == expected.shape());
  if (expected.dtype() == DType::Float32) {
    const auto a = actual.to_vector(), b = expected.to_vector();
    REQUIRE(a.size() == b.size());
    // memcmp may not be given the null data() of an empty vector (UBSan flags it).
    CHECK((a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0));
  } else {
    CHECK(actual.to_vector_i64() == expected.to_vector_i64());
  }
}

const std::map<std::string, std::string> kPythonMetadata = {
    {"format", "pt"},
    {"source", "tests/golden/gen_safetensors.py"},
    {"escapes", "quote \" backslash \\ newline \n tab \t unicode \u00e9\u4e2d"},
};

// The F32/I64 tensors of gen_safetensors.py, built from the same formulas.
std::vector<std::pair<std::string, Tensor>> python_f32_i64_tensors() {
  return {
      {"f32_matrix", tensor(float_values(12), {3, 4})},
      {"f32_3d", tensor(float_values(24), {2, 3, 4})},
      {"f32_scalar", tensor(float_values(1), {})},
      {"f32_empty", tensor({}, {0, 3})},
      {"f32_transposed", tensor(float_values(8), {4, 2}).transpose(0, 1)},  // [2,4] view
      {"layer.0/weight", tensor(float_values(4), {2, 2})},
      {"i64_vector", tensor_i64(int_values(5), {5})},
      {"i64_scalar", tensor_i64(int_values(1), {})},
      {"i64_empty", tensor_i64({}, {0})},
      {"i64_big", tensor_i64({-5, (int64_t{1} << 40) - 5, (int64_t{2} << 40) - 5}, {3})},
  };
}

}  // namespace

TEST_CASE("read_safetensors reads every dtype of a file written by PyTorch") {
  std::map<std::string, std::string> metadata;
  const auto t = read_safetensors(LOOM_TEST_DATA "/safetensors_from_python.safetensors", &metadata);
  CHECK(metadata == kPythonMetadata);
  CHECK(t.size() == 22);

  for (const auto& [name, expected] : python_f32_i64_tensors())
    check_bitwise_equal(t.at(name), expected.contiguous(), name);

  // Narrow and wide dtypes are widened to float32 / int64 with the same values.
  check_bitwise_equal(t.at("f16_vector"), tensor(float_values(6), {6}), "F16");
  check_bitwise_equal(t.at("bf16_matrix"), tensor(float_values(6), {2, 3}), "BF16");
  check_bitwise_equal(t.at("f64_vector"), tensor(float_values(5), {5}), "F64");
  check_bitwise_equal(t.at("i32_vector"), tensor_i64(int_values(4), {4}), "I32");
  check_bitwise_equal(t.at("i16_vector"), tensor_i64(int_values(3), {3}), "I16");
  check_bitwise_equal(t.at("i8_vector"), tensor_i64(int_values(3), {3}), "I8");
  check_bitwise_equal(t.at("u8_vector"), tensor_i64({0, 60, 120, 180}, {4}), "U8");
  check_bitwise_equal(t.at("bool_vector"), tensor_i64({1, 0, 0, 1, 0}, {5}), "BOOL");
  // Subnormals, infinities, NaN and -0 convert exactly as PyTorch's .float() does.
  check_bitwise_equal(t.at("f16_specials"), t.at("f16_specials_as_f32"), "F16 specials");
  check_bitwise_equal(t.at("bf16_specials"), t.at("bf16_specials_as_f32"), "BF16 specials");
}

TEST_CASE("write_safetensors writes the same bytes as the PyTorch-side writer") {
  TempDir dir;
  const std::string path = dir.file("from_cpp.safetensors");
  write_safetensors(path, python_f32_i64_tensors(), kPythonMetadata);
  const std::string expected =
      read_bytes(LOOM_TEST_DATA "/safetensors_f32_i64_from_python.safetensors");
  REQUIRE(!expected.empty());
  CHECK(read_bytes(path) == expected);
}

TEST_CASE("write_safetensors then read_safetensors round-trips bit-exactly") {
  TempDir dir;
  const std::string path = dir.file("round_trip.safetensors");
  manual_seed(7);
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor requires_grad = randn({2, 3}).requires_grad_(true);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"randn", randn({3, 5})},
      {"specials", tensor({std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.0f,
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()},
                          {7})},
      {"int_extremes",
       tensor_i64({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, 0},
                  {2, 2})},
      {"scalar", tensor({1.25f}, {})},
      {"int_scalar", tensor_i64({42}, {})},
      {"empty", tensor({}, {0, 3})},
      {"int_empty", tensor_i64({}, {2, 0})},
      {"transposed", randn({4, 3}).transpose(0, 1)},  // [3,4], non-contiguous
      {"narrowed", randn({5, 4}).narrow(1, 1, 2)},    // [5,2], rows strided
      {"expanded", randn({1, 3}).expand({4, 3})},     // stride 0
      {"requires_grad", requires_grad},
      {"non_leaf", requires_grad * 2.0f},
      {"big", randn({256, 1024})},
  };
  const std::map<std::string, std::string> metadata = {{"empty_value", ""},
                                                       {"control", std::string("a\x01z\x1f")},
                                                       {"unicode", "\u00fc\U0001F600"},
                                                       {"json_like", "{\"a\": [1, 2]}"}};
  write_safetensors(path, tensors, metadata);

  std::map<std::string, std::string> read_metadata = {{"stale", "entry"}};
  const auto back = read_safetensors(path, &read_metadata);
  CHECK(read_metadata == metadata);
  REQUIRE(back.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    check_bitwise_equal(back.at(name), t.detach().contiguous(), name);
    if (t.numel() > 0) CHECK(back.at(name).is_contiguous());
    CHECK(!back.at(name).requires_grad());
  }

  // The header is padded to a multiple of 8 so the data buffer is 8-byte aligned.
  const std::string bytes = read_bytes(path);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  CHECK(header_bytes % 8 == 0);
  CHECK(bytes[8] == '{');
}

TEST_CASE("read_safetensors clears the metadata map when the file has none") {
  TempDir dir;
  const std::string path = dir.file("no_metadata.safetensors");
  write_safetensors(path, {{"x", tensor({1.0f, 2.0f}, {2})}});
  std::map<std::string, std::string> metadata = {{"stale", "entry"}};
  const auto t = read_safetensors(path, &metadata);
  CHECK(metadata.empty());
  check_bitwise_equal(t.at("x"), tensor({1.0f, 2.0f}, {2}), "x");
  CHECK(read_safetensors(path).size() == 1);  // and works without a metadata map
}

TEST_CASE("read_safetensors rejects missing, short and bad-length files") {
  TempDir dir;
  check_read_error(dir.file("does_not_exist.safetensors"), "no such file");
  fs::create_directories(dir.file("a_directory"));
  check_read_error(dir.file("a_directory"), "not a regular file");
  check_crafted_error(dir, "", "too short");
  check_crafted_error(dir, "1234567", "too short");
  // Length field larger than the rest of the file.
  check_crafted_error(dir, u64_le(1000) + "{}", "exceeds");
  check_crafted_error(dir, u64_le(9) + "{}      ", "exceeds");
  // Absurd lengths are refused before any allocation.
  check_crafted_error(dir, u64_le(uint64_t{1} << 40) + "{}", "absurd");
  check_crafted_error(dir, u64_le(std::numeric_limits<uint64_t>::max()) + "{}", "absurd");
}

TEST_CASE("read_safetensors rejects malformed JSON headers") {
  TempDir dir;
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  const std::string data = float_bytes({1.0f});
  // Not JSON (RFC 8259), a key twice in one object, or nested absurdly: "malformed JSON header
  // at byte N" with the parser's reason.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "unexpected end of input"},
      {"{", "unexpected end of input"},
      {"{\"a\":", "unexpected end of input"},
      {"{" + ok_entry + ",}", "expected string literal"},
      {"{" + ok_entry + "} x", "expected end of input"},
      {"{" + ok_entry + "," + ok_entry + "}", "duplicate key \"a\""},
      {R"({"__metadata__":{"k":"1","k":"2"}})", "duplicate key \"k\""},
      {R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       "duplicate key \"dtype\""},
      {R"({"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}})", "unexpected number literal"},
      {R"({"a":{"dtype":"F32","shape":[-],"data_offsets":[0,4]}})", "expected digit after '-'"},
      {R"({"a":tru})", "invalid literal"},
      {R"({"a":{"dtype":"F\q"}})", "forbidden character after backslash"},
      {R"({"a":{"dtype":"F\u00g0"}})", "must be followed by 4 hex digits"},
      {R"({"a":{"dtype":"\ud800"}})", "surrogate U+D800..U+DBFF must be followed"},
      {R"({"a":{"dtype":"\udc00"}})", "surrogate U+DC00..U+DFFF must follow"},
      {"{\"a\":{\"dtype\":\"F\n32\"}}", "control character U+000A"},
      {"{\"a\xff\":{}}", "ill-formed UTF-8"},
      {R"({"a" {}})", "expected ':'"},
      {R"({"a":[1 2]})", "expected ']'"},
      {std::string(100, '[') + std::string(100, ']'), "nested too deeply"},
      {std::string(100, '{'), "malformed JSON header"},
  };
  for (const auto& [header, what] : cases) {
    INFO("header: " << header);
    check_crafted_error(dir, craft(header, data), "malformed JSON header");
    check_crafted_error(dir, craft(header, data), what);
  }
  // Valid JSON that is not a safetensors header: the value at fault is named.
  const std::vector<std::pair<std::string, std::string>> wrong_values = {
      {R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
       "shape of tensor 'a' must hold non-negative integers, found 1.5"},
      {R"({"a":{"dtype":"F32","shape":[1e0],"data_offsets":[0,4]}})", "non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}})",
       "non-negative integers"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,99999999999999999999]}})",
       "data_offsets of tensor 'a' must be [begin, end], integers"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4]}})", "must be [begin, end]"},
      {R"({"a":{"dtype":"F32","shape":[true],"data_offsets":[0,4]}})", "found true"},
      {R"({"a":true})", "header entry 'a' must be an object, not a boolean"},
      {R"({"a":null})", "header entry 'a' must be an object, not null"},
      {R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})",
       "\"dtype\" of tensor 'a' must be a string, not an integer"},
  };
  for (const auto& [header, what] : wrong_values) {
    INFO("header: " << header);
    check_crafted_error(dir, craft(header, data), what);
  }
  check_crafted_error(dir, craft("[]"), "must be a JSON object, not an array");
  check_crafted_error(dir, craft("\"x\""), "must be a JSON object, not a string");
}

TEST_CASE("read_safetensors_metadata reads the header only, with the same checks") {
  TempDir dir;
  const std::string path = dir.file("meta.safetensors");
  write_safetensors(path, {{"x", tensor(float_values(6), {2, 3})}}, {{"k", "v"}});
  CHECK(nn::read_safetensors_metadata(path) == std::map<std::string, std::string>{{"k", "v"}});
  // Data cut short is caught from the header's offsets, without reading the data.
  const std::string full = read_bytes(path);
  write_bytes(path, full.substr(0, full.size() - 4));
  CHECK_THROWS_WITH_AS(nn::read_safetensors_metadata(path), doctest::Contains("truncated"), Error);
  write_bytes(path, craft(R"({"__metadata__":{"k":1}})"));
  CHECK_THROWS_WITH_AS(nn::read_safetensors_metadata(path),
                       doctest::Contains("__metadata__ value of \"k\""), Error);
}

TEST_CASE("read_safetensors decodes JSON escapes in names and metadata") {
  TempDir dir;
  const std::string path = dir.file("escapes.safetensors");
  // "\u00e9" is e-acute; "\ud83d\ude00" a surrogate pair (U+1F600); whitespace between tokens.
  write_bytes(path, craft(R"( { "w\u00e9\/\"\\\n" : { "dtype" : "F32", "shape" : [ ] ,)"
                          R"( "data_offsets" : [ 0 , 4 ] } , "__metadata__" : )"
                          R"({ "k\t" : "\ud83d\ude00" } }  )",
                          float_bytes({2.5f})));
  std::map<std::string, std::string> metadata;
  const auto t = read_safetensors(path, &metadata);
  CHECK(t.count("w\u00e9/\"\\\n") == 1);
  CHECK(metadata.at("k\t") == "\U0001F600");
}

TEST_CASE("read_safetensors rejects bad tensor entries") {
  TempDir dir;
  const std::string data = float_bytes({1.0f, 2.0f});
  auto entry = [&](const std::string& body) { return craft("{\"a\":" + body + "}", data); };
  check_crafted_error(dir, entry(R"({"dtype":"C64","shape":[1],"data_offsets":[0,8]})"),
                      "unknown dtype \"C64\"");
  check_crafted_error(dir, entry(R"({"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]})"),
                      "unknown dtype");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})"),
                      "needs 8 bytes");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,8]})"),
                      "needs 4 bytes");
  check_crafted_error(dir, entry(R"({"dtype":"I64","shape":[2],"data_offsets":[0,8]})"),
                      "needs 16 bytes");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"),
                      "0 <= begin <= end");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})"),
                      "must be [begin, end]");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
                      "non-negative integers");
  check_crafted_error(dir,
                      entry(R"({"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                            R"("data_offsets":[0,4]})"),
                      "too many elements");
  check_crafted_error(dir, entry(R"({"dtype":"F32","data_offsets":[0,4]})"), "has no \"shape\"");
  check_crafted_error(dir, entry(R"({"shape":[1],"data_offsets":[0,4]})"), "has no \"dtype\"");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[1]})"), "has no \"data_offsets\"");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"),
                      "\"shape\" of tensor 'a' must be an array, not a string");
  check_crafted_error(dir, entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[]})"),
                      "unknown field \"x\"");
  check_crafted_error(dir, entry("[]"), "header entry 'a' must be an object");
  check_crafted_error(dir, craft(R"({"__metadata__":{"k":1}})"), "__metadata__ value of \"k\"");
  check_crafted_error(dir, craft(R"({"__metadata__":[]})"), "__metadata__ must be an object");
}

TEST_CASE("read_safetensors rejects overlapping, out-of-range and truncated data") {
  TempDir dir;
  const std::string data = float_bytes({1, 2, 3, 4});
  check_crafted_error(dir,
                      craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            data),
                      "overlap");
  check_crafted_error(dir,
                      craft(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                            data),
                      "overlap");
  check_crafted_error(
      dir, craft(R"({"a":{"dtype":"F32","shape":[5],"data_offsets":[0,20]}})", data), "truncated");
  check_crafted_error(
      dir, craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})", data), "truncated");

  // An empty tensor takes no bytes, so it may sit anywhere, even inside another's range.
  const std::string ok_path = dir.file("empty_inside.safetensors");
  write_bytes(ok_path, craft(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
                             data));
  CHECK(read_safetensors(ok_path).at("e").numel() == 0);

  // A real file cut short: every prefix past the header is reported as truncated.
  const std::string path = dir.file("cut.safetensors");
  write_safetensors(path, {{"x", tensor(float_values(6), {2, 3})}});
  const std::string full = read_bytes(path);
  for (size_t cut : {size_t{1}, size_t{4}, size_t{23}}) {
    write_bytes(path, full.substr(0, full.size() - cut));
    check_read_error(path, "truncated");
  }
  write_bytes(path, full.substr(0, 20));  // cut inside the header
  check_read_error(path, "exceeds");
}

TEST_CASE("write_safetensors rejects bad names and leaves the previous file intact") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, {{"w", tensor(float_values(4), {2, 2})}}, {{"step", "1"}});
  const std::string before = read_bytes(path);
  const Tensor x = tensor({1.0f}, {1});

  auto check_write_error = [&](const std::vector<std::pair<std::string, Tensor>>& tensors,
                               const std::string& what) {
    CHECK_THROWS_WITH_AS(write_safetensors(path, tensors), doctest::Contains(what.c_str()), Error);
    CHECK(read_bytes(path) == before);
    CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});  // no temporaries
  };
  check_write_error({{"a", x}, {"a", x}}, "'a' appears twice");
  check_write_error({{"", x}}, "empty name");
  check_write_error({{"__metadata__", x}}, "reserved");
  check_write_error({{"a", x}, {"b", Tensor()}}, "'b' is undefined");
  check_write_error({{"bad\xff", x}}, "valid UTF-8");

  // A successful write replaces the file.
  write_safetensors(path, {{"v", x}});
  CHECK(read_safetensors(path).count("v") == 1);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("a write that fails after creating its temporary file removes it") {
  TempDir dir;
  // Renaming a file over a non-empty directory fails after all data has been written.
  const std::string target = dir.file("occupied");
  fs::create_directories(target);
  write_bytes(dir.file("occupied/keep.txt"), "keep");
  CHECK_THROWS_WITH_AS(write_safetensors(target, {{"x", tensor({1.0f}, {1})}}),
                       doctest::Contains("cannot rename"), Error);
  CHECK(dir.entries() == std::vector<std::string>{"occupied"});
  CHECK(read_bytes(dir.file("occupied/keep.txt")) == "keep");

  // A directory that does not exist: the error names the path.
  CHECK_THROWS_WITH_AS(write_safetensors(dir.file("missing/x.safetensors"), {}),
                       doctest::Contains("missing/x.safetensors.tmp."), Error);
}

TEST_CASE("read_safetensors survives every single-byte corruption of a file") {
  // Each byte of a small file is replaced by a few values; the reader must either read the file
  // or throw loom::Error, never crash, hang or allocate absurdly.
  TempDir dir;
  const std::string path = dir.file("victim.safetensors");
  write_safetensors(path, {{"a", tensor(float_values(3), {3})}, {"b", tensor_i64({1, 2}, {2, 1})}},
                    {{"k", "v"}});
  const std::string original = read_bytes(path);
  int rejected = 0;
  for (size_t i = 0; i < original.size(); ++i) {
    for (const char replacement : {'\0', '\xff', '"', '9', '{'}) {
      if (original[i] == replacement) continue;
      std::string bytes = original;
      bytes[i] = replacement;
      write_bytes(path, bytes);
      try {
        read_safetensors(path);
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  CHECK(rejected > 0);
}
