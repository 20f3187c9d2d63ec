// safetensors reader and writer; the format is described in nn/safetensors.h. The file has
// three parts: a small JSON parser for exactly the subset a header uses (objects, arrays,
// strings, integers), the reader (parse, validate every entry, then read each tensor straight
// into its storage) and the atomic writer.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

#include "autograd/node.h"
#include "core/error.h"

namespace loom::nn {

// The format stores little-endian numbers and we copy them straight into tensors.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

// A header larger than this is not a real checkpoint (GPT-2 XL's header is ~60 kB); refusing it
// keeps a corrupted length field from triggering a huge allocation.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
// Nesting depth of the JSON header; real headers nest 3 deep. Bounds the parser's recursion.
constexpr int kMaxJsonDepth = 16;

std::string errno_text() { return std::strerror(errno); }

// ------------------------------------------------------------------------------ JSON subset

struct Json {
  enum class Kind { Object, Array, String, Integer };
  Kind kind = Kind::Object;
  std::string string;             // Kind::String
  int64_t integer = 0;            // Kind::Integer
  std::vector<Json> items;        // Kind::Array, and the values of a Kind::Object
  std::vector<std::string> keys;  // Kind::Object, in file order, parallel to items
};

const char* kind_name(Json::Kind k) {
  switch (k) {
    case Json::Kind::Object:
      return "an object";
    case Json::Kind::Array:
      return "an array";
    case Json::Kind::String:
      return "a string";
    case Json::Kind::Integer:
      return "an integer";
  }
  return "?";
}

// Recursive-descent parser for RFC 8259 JSON restricted to objects, arrays, strings and
// integers: true/false/null and non-integer numbers are rejected, since no header has them.
class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  // One value followed only by whitespace (the writer pads the header with spaces).
  Json parse_document() {
    Json value = parse_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected characters after the top-level value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    LOOM_FAIL("read_safetensors: '{}': malformed JSON header at byte {}: {}", path_, pos_, what);
  }

  void skip_whitespace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  char peek() {
    if (pos_ >= text_.size()) fail("unexpected end of header");
    return text_[pos_];
  }

  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}', found '{}'", c, text_[pos_]));
    ++pos_;
  }

  Json parse_value(int depth) {
    if (depth > kMaxJsonDepth) fail("nested too deeply");
    skip_whitespace();
    const char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    Json value;
    if (c == '"') {
      value.kind = Json::Kind::String;
      value.string = parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.kind = Json::Kind::Integer;
      value.integer = parse_integer();
    } else {
      fail(
          fmt::format("unexpected character '{}' (only objects, arrays, strings and integers "
                      "may appear in a safetensors header)",
                      c));
    }
    return value;
  }

  Json parse_object(int depth) {
    Json object;
    object.kind = Json::Kind::Object;
    expect('{');
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return object;
    }
    while (true) {
      skip_whitespace();
      std::string key = parse_string();
      if (std::find(object.keys.begin(), object.keys.end(), key) != object.keys.end())
        fail(fmt::format("duplicate key \"{}\"", key));
      skip_whitespace();
      expect(':');
      object.items.push_back(parse_value(depth + 1));
      object.keys.push_back(std::move(key));
      skip_whitespace();
      if (peek() == '}') {
        ++pos_;
        return object;
      }
      expect(',');
    }
  }

  Json parse_array(int depth) {
    Json array;
    array.kind = Json::Kind::Array;
    expect('[');
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return array;
    }
    while (true) {
      array.items.push_back(parse_value(depth + 1));
      skip_whitespace();
      if (peek() == ']') {
        ++pos_;
        return array;
      }
      expect(',');
    }
  }

  // Optional minus, then digits without leading zeros; no fraction or exponent.
  int64_t parse_integer() {
    const bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') fail("expected a digit");
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' &&
        text_[pos_ + 1] <= '9')
      fail("numbers may not have leading zeros");
    uint64_t magnitude = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (magnitude > (static_cast<uint64_t>(INT64_MAX) - digit) / 10)
        fail("integer does not fit in 64 bits");
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
      fail("only integers are allowed in a safetensors header");
    const auto value = static_cast<int64_t>(magnitude);
    return negative ? -value : value;
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      code <<= 4;
      if (h >= '0' && h <= '9')
        code |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        code |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        code |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("invalid hex digit in \\u escape");
    }
    return code;
  }

  // \uXXXX, combining a UTF-16 surrogate pair into one code point (RFC 8259 section 7).
  uint32_t parse_unicode_escape() {
    const uint32_t high = parse_hex4();
    if (high >= 0xDC00 && high <= 0xDFFF) fail("unpaired low surrogate in \\u escape");
    if (high < 0xD800 || high > 0xDBFF) return high;
    if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u')
      fail("unpaired high surrogate in \\u escape");
    pos_ += 2;
    const uint32_t low = parse_hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail("invalid low surrogate in \\u escape");
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      const char c = peek();
      ++pos_;
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("unescaped control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          append_utf8(out, parse_unicode_escape());
          break;
        default:
          fail(fmt::format("invalid escape '\\{}'", e));
      }
    }
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// ------------------------------------------------------------------------------ dtypes

// The element types a file may hold and what loom turns them into.
enum class FileDType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL };

struct FileDTypeInfo {
  FileDType type;
  const char* name;  // as spelled in the header
  size_t size;       // bytes per element in the file
  DType target;      // the loom dtype it is read as
};

constexpr FileDTypeInfo kFileDTypes[] = {
    {FileDType::F32, "F32", 4, DType::Float32},   {FileDType::F16, "F16", 2, DType::Float32},
    {FileDType::BF16, "BF16", 2, DType::Float32}, {FileDType::F64, "F64", 8, DType::Float32},
    {FileDType::I64, "I64", 8, DType::Int64},     {FileDType::I32, "I32", 4, DType::Int64},
    {FileDType::I16, "I16", 2, DType::Int64},     {FileDType::I8, "I8", 1, DType::Int64},
    {FileDType::U8, "U8", 1, DType::Int64},       {FileDType::BOOL, "BOOL", 1, DType::Int64},
};

const FileDTypeInfo* find_file_dtype(const std::string& name) {
  for (const auto& info : kFileDTypes)
    if (name == info.name) return &info;
  return nullptr;
}

// IEEE 754 binary16 -> float: sign, 5-bit exponent (bias 15), 10-bit mantissa. Infinities and
// NaNs keep their sign and payload, as PyTorch's conversion does.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  if (exponent == 31)
    return std::bit_cast<float>(sign | 0x7F800000u | (static_cast<uint32_t>(mantissa) << 13));
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -24)  // subnormal
                              : std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  return sign ? -magnitude : magnitude;
}

// bfloat16 is the top half of a float32, so widening is a shift.
float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

template <typename From, typename To, typename Convert>
void convert_elements(const unsigned char* src, void* dst, int64_t n, Convert convert) {
  To* out = static_cast<To*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, src + i * static_cast<int64_t>(sizeof(From)), sizeof(From));
    out[i] = convert(v);
  }
}

// Widens n elements of a file dtype other than F32/I64 into a float32 or int64 buffer.
void convert_to_loom(FileDType type, const unsigned char* src, void* dst, int64_t n) {
  auto to_i64 = [](auto v) { return static_cast<int64_t>(v); };
  switch (type) {
    case FileDType::F16:
      convert_elements<uint16_t, float>(src, dst, n, half_to_float);
      break;
    case FileDType::BF16:
      convert_elements<uint16_t, float>(src, dst, n, bf16_to_float);
      break;
    case FileDType::F64:
      convert_elements<double, float>(src, dst, n, [](double v) { return static_cast<float>(v); });
      break;
    case FileDType::I32:
      convert_elements<int32_t, int64_t>(src, dst, n, to_i64);
      break;
    case FileDType::I16:
      convert_elements<int16_t, int64_t>(src, dst, n, to_i64);
      break;
    case FileDType::I8:
      convert_elements<int8_t, int64_t>(src, dst, n, to_i64);
      break;
    case FileDType::U8:
      convert_elements<uint8_t, int64_t>(src, dst, n, to_i64);
      break;
    case FileDType::BOOL:
      convert_elements<uint8_t, int64_t>(src, dst, n, [](uint8_t v) { return int64_t{v != 0}; });
      break;
    case FileDType::F32:
    case FileDType::I64:
      LOOM_FAIL("read_safetensors: internal error: no conversion needed");
  }
}

// ------------------------------------------------------------------------------ reading

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// One tensor entry of the header, validated against the data buffer.
struct Entry {
  std::string name;
  const FileDTypeInfo* dtype = nullptr;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

const Json& member(const Json& object, const std::string& key, Json::Kind kind,
                   const std::string& path, const std::string& tensor) {
  for (size_t i = 0; i < object.keys.size(); ++i) {
    if (object.keys[i] != key) continue;
    LOOM_CHECK(object.items[i].kind == kind,
               "read_safetensors: '{}': \"{}\" of tensor '{}' must be {}, not {}", path, key,
               tensor, kind_name(kind), kind_name(object.items[i].kind));
    return object.items[i];
  }
  LOOM_FAIL("read_safetensors: '{}': tensor '{}' has no \"{}\"", path, tensor, key);
}

Entry parse_entry(const std::string& name, const Json& info, const std::string& path) {
  LOOM_CHECK(info.kind == Json::Kind::Object,
             "read_safetensors: '{}': header entry '{}' must be an object, not {}", path, name,
             kind_name(info.kind));
  for (const auto& key : info.keys)
    LOOM_CHECK(key == "dtype" || key == "shape" || key == "data_offsets",
               "read_safetensors: '{}': tensor '{}' has an unknown field \"{}\"", path, name, key);
  Entry e;
  e.name = name;
  const std::string& dtype = member(info, "dtype", Json::Kind::String, path, name).string;
  e.dtype = find_file_dtype(dtype);
  LOOM_CHECK(e.dtype != nullptr,
             "read_safetensors: '{}': tensor '{}' has unknown dtype \"{}\" (supported: F32, F16, "
             "BF16, F64, I64, I32, I16, I8, U8, BOOL)",
             path, name, dtype);

  uint64_t numel = 1;
  for (const Json& d : member(info, "shape", Json::Kind::Array, path, name).items) {
    LOOM_CHECK(d.kind == Json::Kind::Integer && d.integer >= 0,
               "read_safetensors: '{}': shape of tensor '{}' must hold non-negative integers", path,
               name);
    LOOM_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d.integer), &numel),
               "read_safetensors: '{}': shape of tensor '{}' has too many elements", path, name);
    e.shape.push_back(d.integer);
  }

  const auto& offsets = member(info, "data_offsets", Json::Kind::Array, path, name).items;
  LOOM_CHECK(offsets.size() == 2 && offsets[0].kind == Json::Kind::Integer &&
                 offsets[1].kind == Json::Kind::Integer && offsets[0].integer >= 0 &&
                 offsets[1].integer >= offsets[0].integer,
             "read_safetensors: '{}': data_offsets of tensor '{}' must be [begin, end] with "
             "0 <= begin <= end",
             path, name);
  e.begin = static_cast<uint64_t>(offsets[0].integer);
  e.end = static_cast<uint64_t>(offsets[1].integer);
  uint64_t expected = 0;
  LOOM_CHECK(!__builtin_mul_overflow(numel, e.dtype->size, &expected),
             "read_safetensors: '{}': shape of tensor '{}' has too many elements", path, name);
  LOOM_CHECK(e.end - e.begin == expected,
             "read_safetensors: '{}': tensor '{}' ({} {}) needs {} bytes but its data_offsets "
             "[{}, {}] span {}",
             path, name, dtype, shape_str(e.shape), expected, e.begin, e.end, e.end - e.begin);
  return e;
}

void parse_metadata(const Json& value, const std::string& path,
                    std::map<std::string, std::string>* metadata) {
  LOOM_CHECK(value.kind == Json::Kind::Object,
             "read_safetensors: '{}': __metadata__ must be an object, not {}", path,
             kind_name(value.kind));
  for (size_t i = 0; i < value.keys.size(); ++i) {
    LOOM_CHECK(value.items[i].kind == Json::Kind::String,
               "read_safetensors: '{}': __metadata__ value of \"{}\" must be a string, not {}",
               path, value.keys[i], kind_name(value.items[i].kind));
    if (metadata) (*metadata)[value.keys[i]] = value.items[i].string;
  }
}

// Entries sorted by position; rejects overlapping tensors and data beyond the buffer. Gaps
// between tensors are tolerated (the format does not need them, but they are harmless).
void check_layout(std::vector<Entry>& entries, uint64_t buffer_bytes, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const Entry* furthest = nullptr;  // the non-empty tensor whose data ends last so far
  for (const Entry& e : entries) {
    LOOM_CHECK(e.end <= buffer_bytes,
               "read_safetensors: '{}': data of tensor '{}' ends at byte {} of the data buffer, "
               "but the file holds only {} bytes of data (truncated?)",
               path, e.name, e.end, buffer_bytes);
    if (e.begin == e.end) continue;  // an empty tensor occupies no bytes
    LOOM_CHECK(furthest == nullptr || e.begin >= furthest->end,
               "read_safetensors: '{}': data of tensors '{}' [{}, {}) and '{}' [{}, {}) overlap",
               path, furthest ? furthest->name : "", furthest ? furthest->begin : 0,
               furthest ? furthest->end : 0, e.name, e.begin, e.end);
    furthest = &e;
  }
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void read_exact(std::FILE* f, void* dst, size_t bytes, uint64_t at, const std::string& path,
                const std::string& what) {
  if (bytes == 0) return;
  LOOM_CHECK(
      fseeko(f, static_cast<off_t>(at), SEEK_SET) == 0 && std::fread(dst, 1, bytes, f) == bytes,
      "read_safetensors: '{}': could not read {} ({} bytes at offset {}): file truncated "
      "or unreadable",
      path, what, bytes, at);
}

// Reads one tensor's bytes into a new contiguous CPU tensor, widening narrow dtypes.
Tensor read_tensor(std::FILE* f, const Entry& e, uint64_t data_start, const std::string& path) {
  Tensor t = Tensor::empty(e.shape, e.dtype->target, Device::CPU);
  const size_t bytes = e.end - e.begin;
  const std::string what = "tensor '" + e.name + "'";
  if (e.dtype->type == FileDType::F32 || e.dtype->type == FileDType::I64) {
    read_exact(f, t.raw_data(), bytes, data_start + e.begin, path, what);
  } else {
    std::vector<unsigned char> raw(bytes);
    read_exact(f, raw.data(), bytes, data_start + e.begin, path, what);
    convert_to_loom(e.dtype->type, raw.data(), t.raw_data(), t.numel());
  }
  return t;
}

}  // namespace

std::map<std::string, Tensor> read_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  LOOM_CHECK(std::filesystem::exists(status), "read_safetensors: '{}': no such file", path);
  LOOM_CHECK(std::filesystem::is_regular_file(status), "read_safetensors: '{}': not a regular file",
             path);
  FilePtr file(std::fopen(path.c_str(), "rb"));
  LOOM_CHECK(file != nullptr, "read_safetensors: cannot open '{}': {}", path, errno_text());
  LOOM_CHECK(fseeko(file.get(), 0, SEEK_END) == 0, "read_safetensors: '{}': cannot seek", path);
  const auto file_bytes = static_cast<uint64_t>(ftello(file.get()));

  // 1. The 8-byte header length.
  LOOM_CHECK(file_bytes >= 8,
             "read_safetensors: '{}': file is {} bytes, too short for the 8-byte header length",
             path, file_bytes);
  unsigned char length_bytes[8];
  read_exact(file.get(), length_bytes, 8, 0, path, "the header length");
  const uint64_t header_bytes = read_u64_le(length_bytes);
  LOOM_CHECK(header_bytes <= kMaxHeaderBytes,
             "read_safetensors: '{}': header length {} is absurd (more than {} bytes); not a "
             "safetensors file?",
             path, header_bytes, kMaxHeaderBytes);
  LOOM_CHECK(header_bytes <= file_bytes - 8,
             "read_safetensors: '{}': header length {} exceeds the {} bytes after the length "
             "field (truncated or not a safetensors file)",
             path, header_bytes, file_bytes - 8);

  // 2. The JSON header.
  std::string header(header_bytes, '\0');
  read_exact(file.get(), header.data(), header.size(), 8, path, "the header");
  const Json root = JsonParser(header, path).parse_document();
  LOOM_CHECK(root.kind == Json::Kind::Object,
             "read_safetensors: '{}': the header must be a JSON object, not {}", path,
             kind_name(root.kind));
  if (metadata) metadata->clear();
  std::vector<Entry> entries;
  for (size_t i = 0; i < root.keys.size(); ++i) {
    if (root.keys[i] == "__metadata__")
      parse_metadata(root.items[i], path, metadata);
    else
      entries.push_back(parse_entry(root.keys[i], root.items[i], path));
  }
  const uint64_t data_start = 8 + header_bytes;
  check_layout(entries, file_bytes - data_start, path);

  // 3. The data, read directly into each tensor's storage.
  std::map<std::string, Tensor> tensors;
  for (const Entry& e : entries)
    tensors.emplace(e.name, read_tensor(file.get(), e, data_start, path));
  return tensors;
}

// ------------------------------------------------------------------------------ writing

namespace {

const char* file_dtype_name(DType t) { return t == DType::Float32 ? "F32" : "I64"; }

// JSON string literal with the escapes Python's json.dumps(ensure_ascii=False) uses, so the two
// writers produce identical bytes.
std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

struct Prepared {
  std::string name;
  Tensor data;  // contiguous CPU copy
  uint64_t begin = 0, end = 0;
};

// Checks names and tensors, takes contiguous CPU copies and lays them out the way the reference
// implementation does: widest dtype first (so every tensor is aligned to its element size, the
// header being padded to 8 bytes), then by name.
std::vector<Prepared> prepare(const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const std::string& path) {
  std::vector<Prepared> out;
  NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    LOOM_CHECK(!name.empty(), "write_safetensors: '{}': tensor #{} has an empty name", path, i);
    LOOM_CHECK(name != "__metadata__",
               "write_safetensors: '{}': \"__metadata__\" is reserved and cannot name a tensor",
               path);
    LOOM_CHECK(t.defined(), "write_safetensors: '{}': tensor '{}' is undefined", path, name);
    out.push_back({name, t.detach().to(Device::CPU).contiguous()});
  }
  std::sort(out.begin(), out.end(), [](const Prepared& a, const Prepared& b) {
    const size_t sa = element_size(a.data.dtype()), sb = element_size(b.data.dtype());
    return sa != sb ? sa > sb : a.name < b.name;
  });
  for (size_t i = 1; i < out.size(); ++i)
    LOOM_CHECK(out[i].name != out[i - 1].name,
               "write_safetensors: '{}': tensor name '{}' appears twice", path, out[i].name);
  uint64_t offset = 0;
  for (auto& p : out) {
    p.begin = offset;
    offset += static_cast<uint64_t>(p.data.numel()) * element_size(p.data.dtype());
    p.end = offset;
  }
  return out;
}

// {"__metadata__":{...},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...} padded with
// spaces to a multiple of 8 bytes, as PyTorch's safetensors does.
std::string build_header(const std::vector<Prepared>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) h += ",";
      first = false;
      h += json_quote(key) + ":" + json_quote(value);
    }
    h += "}";
  }
  for (const auto& p : tensors) {
    if (h.size() > 1) h += ",";
    h += json_quote(p.name) + ":{\"dtype\":\"" + file_dtype_name(p.data.dtype()) + "\",\"shape\":[";
    for (size_t d = 0; d < p.data.shape().size(); ++d) {
      if (d > 0) h += ',';
      h += std::to_string(p.data.shape()[d]);
    }
    h += fmt::format("],\"data_offsets\":[{},{}]}}", p.begin, p.end);
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

// A temporary file that is removed unless commit() renamed it over the target.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& target)
      : target_(target), temp_(target + ".tmp." + std::to_string(::getpid())) {
    file_ = std::fopen(temp_.c_str(), "wb");
    LOOM_CHECK(file_ != nullptr, "write_safetensors: cannot create '{}': {}", temp_, errno_text());
  }
  ~AtomicFile() {
    if (file_) std::fclose(file_);
    if (!committed_) std::remove(temp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes) {
    LOOM_CHECK(bytes == 0 || std::fwrite(data, 1, bytes, file_) == bytes,
               "write_safetensors: cannot write '{}': {}", temp_, errno_text());
  }

  // Flushes the data to disk before the rename, so that after a crash the target holds either
  // the old file or the complete new one (the rename itself is atomic on POSIX file systems).
  void commit() {
    LOOM_CHECK(std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0,
               "write_safetensors: cannot flush '{}': {}", temp_, errno_text());
    const int closed = std::fclose(file_);
    file_ = nullptr;
    LOOM_CHECK(closed == 0, "write_safetensors: cannot close '{}': {}", temp_, errno_text());
    LOOM_CHECK(std::rename(temp_.c_str(), target_.c_str()) == 0,
               "write_safetensors: cannot rename '{}' to '{}': {}", temp_, target_, errno_text());
    committed_ = true;
    sync_directory();
  }

 private:
  // Makes the rename itself durable. Best effort: some file systems cannot sync a directory.
  void sync_directory() const {
    std::string dir = std::filesystem::path(target_).parent_path().string();
    if (dir.empty()) dir = ".";
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    (void)::fsync(fd);
    ::close(fd);
  }

  std::string target_, temp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<Prepared> prepared = prepare(tensors, path);
  const std::string header = build_header(prepared, metadata);
  unsigned char length[8];
  const uint64_t header_bytes = header.size();
  std::memcpy(length, &header_bytes, 8);

  AtomicFile out(path);
  out.write(length, 8);
  out.write(header.data(), header.size());
  for (const auto& p : prepared) out.write(p.data.raw_data(), static_cast<size_t>(p.end - p.begin));
  out.commit();
}

}  // namespace loom::nn
