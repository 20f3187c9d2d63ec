// safetensors reader and writer; the format is described in io/safetensors.h. The file has
// three parts: the header's JSON (parsed by nlohmann-json, a private dependency: no nlohmann
// type appears in a loom header), the reader (parse, validate every entry and the layout, then
// read each tensor straight into its storage) and the writer (atomic: data::AtomicFile).
#include "io/safetensors.h"

#include <utility>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "autograd/node.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "data/text_file.h"

namespace loom::nn {

// The format stores little-endian numbers and we copy them straight into tensors.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;

// A header larger than this is not a real checkpoint (GPT-2 XL's header is ~60 kB); refusing it
// keeps a corrupted length field from triggering a huge allocation.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
// Nesting depth of the JSON header; real headers nest 3 deep.
constexpr int kMaxJsonDepth = 16;
// The rank of a tensor. Every array of a header is a shape or a pair of data_offsets, so no
// array may hold more items (checked while parsing: a 5-million-item shape fails at item 65).
constexpr size_t kMaxRank = 64;
// Keys and values in the whole header: tensors and metadata entries together. GPT-2 XL's header
// holds about 6,000; the cap bounds the parse time of a hostile header to about a second.
constexpr size_t kMaxJsonItems = size_t{1} << 20;

std::string errno_text() { return std::strerror(errno); }

// ------------------------------------------------------------------------------ JSON

// An upper bound on the keys and values of `text`: one more than its ',' and ':' outside
// strings. A linear pre-scan, so that an oversized header is refused before nlohmann-json
// spends seconds building it.
size_t count_json_items(const std::string& text) {
  size_t items = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // an escaped character, perhaps a quote
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',' || c == ':') {
      ++items;
    }
  }
  return items;
}

// nlohmann-json parses the header (RFC 8259, UTF-8 checked). Two rules of ours are added while
// it parses, through its callback: a key may appear only once in an object (nlohmann would keep
// the last), and nesting is bounded (real headers nest 3 deep).
json parse_header_json(const std::string& text, const std::string& path) {
  struct Open {  // an object or array being parsed
    bool is_array = false;
    size_t items = 0;
    std::unordered_set<std::string> keys;  // objects: the keys seen so far (O(1) per check)
  };
  std::vector<Open> open;
  size_t items = 0;  // keys and values so far
  auto fail = [&](const std::string& what) {
    LOOM_FAIL("read_safetensors: '{}': malformed JSON header: {}", path, what);
  };
  if (count_json_items(text) > kMaxJsonItems)
    fail(fmt::format("more than {} keys and values (the header cap)", kMaxJsonItems));
  // One more key or value: counted against kMaxJsonItems, and against kMaxRank in an array.
  auto count_item = [&] {
    if (++items > kMaxJsonItems)
      fail(fmt::format("more than {} keys and values (the header cap)", kMaxJsonItems));
    if (!open.empty() && open.back().is_array && ++open.back().items > kMaxRank)
      fail(fmt::format("an array of more than {} items (shapes have rank {} at most)", kMaxRank,
                       kMaxRank));
  };
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) fail(fmt::format("nested too deeply (over {})", kMaxJsonDepth));
        count_item();
        open.push_back({event == json::parse_event_t::array_start, 0, {}});
        break;
      case json::parse_event_t::key:
        count_item();
        if (!open.back().keys.insert(parsed.get<std::string>()).second)
          fail(fmt::format("duplicate key \"{}\"", parsed.get<std::string>()));
        break;
      case json::parse_event_t::value:
        count_item();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        open.pop_back();
        break;
    }
    return true;
  };
  try {
    return json::parse(text, check);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 9: <what>".
    std::string what = e.what();
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    LOOM_FAIL("read_safetensors: '{}': malformed JSON header at byte {}: {}", path, e.byte, what);
  } catch (const json::exception& e) {
    // Any other nlohmann error, e.g. "[json.exception.out_of_range.406] number overflow parsing
    // '461E164'" (a number beyond a double; found by fuzz_safetensors).
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    LOOM_FAIL("read_safetensors: '{}': malformed JSON header: {}", path, what);
  }
}

// "an object", "an array", "a string", "an integer", "a number", "a boolean", "null".
std::string a_kind(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_number_integer()) return "an integer";
  if (v.is_null()) return "null";
  return std::string("a ") + v.type_name();
}

// A JSON integer in [0, 2^63), the range of loom's sizes and offsets; nullopt for anything else
// (negative, fractional, too large, not a number).
std::optional<uint64_t> small_non_negative_integer(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return u;
  } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(v.get<int64_t>());
  }
  return std::nullopt;
}

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
    case FileDType::F16: return convert_elements<uint16_t, float>(src, dst, n, half_to_float);
    case FileDType::BF16:  // exact
      return convert_elements<uint16_t, float>(src, dst, n, bfloat16_bits_to_float);
    case FileDType::F64:
      return convert_elements<double, float>(src, dst, n,
                                             [](double v) { return static_cast<float>(v); });
    case FileDType::I32: return convert_elements<int32_t, int64_t>(src, dst, n, to_i64);
    case FileDType::I16: return convert_elements<int16_t, int64_t>(src, dst, n, to_i64);
    case FileDType::I8: return convert_elements<int8_t, int64_t>(src, dst, n, to_i64);
    case FileDType::U8: return convert_elements<uint8_t, int64_t>(src, dst, n, to_i64);
    case FileDType::BOOL:
      return convert_elements<uint8_t, int64_t>(src, dst, n,
                                                [](uint8_t v) { return int64_t{v != 0}; });
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

// object[key], which must exist and be of the kind `is_kind` accepts.
const json& member(const json& object, const char* key, bool (json::*is_kind)() const,
                   const char* kind, const std::string& path, const std::string& tensor) {
  const auto it = object.find(key);
  LOOM_CHECK(it != object.end(), "read_safetensors: '{}': tensor '{}' has no \"{}\"", path, tensor,
             key);
  LOOM_CHECK(((*it).*is_kind)(), "read_safetensors: '{}': \"{}\" of tensor '{}' must be {}, not {}",
             path, key, tensor, kind, a_kind(*it));
  return *it;
}

Entry parse_entry(const std::string& name, const json& info, const std::string& path) {
  LOOM_CHECK(info.is_object(),
             "read_safetensors: '{}': header entry '{}' must be an object, not {}", path, name,
             a_kind(info));
  for (const auto& [key, value] : info.items())
    LOOM_CHECK(key == "dtype" || key == "shape" || key == "data_offsets",
               "read_safetensors: '{}': tensor '{}' has an unknown field \"{}\"", path, name, key);
  Entry e;
  e.name = name;
  const auto& dtype =
      member(info, "dtype", &json::is_string, "a string", path, name).get_ref<const std::string&>();
  e.dtype = find_file_dtype(dtype);
  LOOM_CHECK(e.dtype != nullptr,
             "read_safetensors: '{}': tensor '{}' has unknown dtype \"{}\" (supported: F32, F16, "
             "BF16, F64, I64, I32, I16, I8, U8, BOOL)",
             path, name, dtype);

  uint64_t numel = 1;
  for (const json& d : member(info, "shape", &json::is_array, "an array", path, name)) {
    const std::optional<uint64_t> size = small_non_negative_integer(d);
    LOOM_CHECK(size.has_value(),
               "read_safetensors: '{}': shape of tensor '{}' must hold non-negative integers, "
               "found {}",
               path, name, d.dump());
    LOOM_CHECK(!__builtin_mul_overflow(numel, *size, &numel),
               "read_safetensors: '{}': shape of tensor '{}' has too many elements", path, name);
    e.shape.push_back(static_cast<int64_t>(*size));
  }
  // Zero dims included: [0, 2^62, 2^62] holds no element, but no tensor can have that shape.
  LOOM_CHECK(shape_fits(e.shape),
             "read_safetensors: '{}': shape {} of tensor '{}' is over loom's cap of 2^60 "
             "elements (counting the non-zero dims)",
             path, shape_str(e.shape), name);

  const json& offsets = member(info, "data_offsets", &json::is_array, "an array", path, name);
  std::optional<uint64_t> begin, end;
  if (offsets.size() == 2) {
    begin = small_non_negative_integer(offsets[0]);
    end = small_non_negative_integer(offsets[1]);
  }
  LOOM_CHECK(begin && end && *begin <= *end,
             "read_safetensors: '{}': data_offsets of tensor '{}' must be [begin, end], integers "
             "with 0 <= begin <= end < 2^63, found {}",
             path, name, offsets.dump());
  e.begin = *begin;
  e.end = *end;
  uint64_t expected = 0;
  LOOM_CHECK(!__builtin_mul_overflow(numel, e.dtype->size, &expected),
             "read_safetensors: '{}': shape of tensor '{}' has too many elements", path, name);
  LOOM_CHECK(e.end - e.begin == expected,
             "read_safetensors: '{}': tensor '{}' ({} {}) needs {} bytes but its data_offsets "
             "[{}, {}] span {}",
             path, name, dtype, shape_str(e.shape), expected, e.begin, e.end, e.end - e.begin);
  return e;
}

// __metadata__ maps strings to strings (the format allows nothing else).
std::map<std::string, std::string> parse_metadata(const json& value, const std::string& path) {
  LOOM_CHECK(value.is_object(), "read_safetensors: '{}': __metadata__ must be an object, not {}",
             path, a_kind(value));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    LOOM_CHECK(item.is_string(),
               "read_safetensors: '{}': __metadata__ value of \"{}\" must be a string, not {}",
               path, key, a_kind(item));
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// Entries sorted by position. As the format requires, the tensors cover the data buffer exactly:
// each starts where the one before it ends, the last ends with the file. An overlap, a gap or
// bytes left over mean a header that does not describe its data -- e.g. a header length 4 bytes
// short shifts the buffer's start, so that every tensor would read 4 bytes early (finite,
// plausible and wrong weights) with 4 bytes left over at the end. An empty tensor occupies no
// bytes: it may sit anywhere in the buffer.
void check_layout(std::vector<Entry>& entries, uint64_t buffer_bytes, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;             // the bytes [0, covered) belong to the tensors so far
  const Entry* previous = nullptr;  // the tensor that ends at `covered`
  for (const Entry& e : entries) {
    LOOM_CHECK(e.end <= buffer_bytes,
               "read_safetensors: '{}': data of tensor '{}' ends at byte {} of the data buffer, "
               "but the file holds only {} bytes of data (truncated?)",
               path, e.name, e.end, buffer_bytes);
    if (e.begin == e.end) continue;
    LOOM_CHECK(e.begin >= covered,
               "read_safetensors: '{}': data of tensors '{}' [{}, {}) and '{}' [{}, {}) overlap",
               path, previous ? previous->name : "", previous ? previous->begin : 0, covered,
               e.name, e.begin, e.end);
    LOOM_CHECK(e.begin == covered,
               "read_safetensors: '{}': the data buffer has a gap: bytes [{}, {}) before tensor "
               "'{}' belong to no tensor (the format needs the tensors to cover it exactly)",
               path, covered, e.begin, e.name);
    covered = e.end;
    previous = &e;
  }
  LOOM_CHECK(covered == buffer_bytes,
             "read_safetensors: '{}': the data buffer holds {} bytes but the tensors cover {}: "
             "{} bytes belong to no tensor (a wrong header length shifts every tensor)",
             path, buffer_bytes, covered, buffer_bytes - covered);
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

// Reads one tensor's bytes into a new contiguous CPU tensor, widening narrow dtypes (BF16 is
// kept as it is stored when keep_bfloat16 is set).
Tensor read_tensor(std::FILE* f, const Entry& e, uint64_t data_start, const std::string& path,
                   bool keep_bfloat16) {
  const bool keep = keep_bfloat16 && e.dtype->type == FileDType::BF16;
  Tensor t = Tensor::empty(e.shape, keep ? DType::BFloat16 : e.dtype->target, Device::CPU);
  const size_t bytes = e.end - e.begin;
  const std::string what = "tensor '" + e.name + "'";
  if (keep || e.dtype->type == FileDType::F32 || e.dtype->type == FileDType::I64) {
    read_exact(f, t.raw_data(), bytes, data_start + e.begin, path, what);
  } else {
    std::vector<unsigned char> raw(bytes);
    read_exact(f, raw.data(), bytes, data_start + e.begin, path, what);
    convert_to_loom(e.dtype->type, raw.data(), t.raw_data(), t.numel());
  }
  return t;
}

// An open file whose header has been read and fully validated (no tensor data read yet).
struct Header {
  FilePtr file;
  std::vector<Entry> entries;  // sorted by position
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // file offset of the data buffer
};

Header read_header(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  LOOM_CHECK(std::filesystem::exists(status), "read_safetensors: '{}': no such file", path);
  LOOM_CHECK(std::filesystem::is_regular_file(status), "read_safetensors: '{}': not a regular file",
             path);
  Header h;
  h.file.reset(std::fopen(path.c_str(), "rb"));
  LOOM_CHECK(h.file != nullptr, "read_safetensors: cannot open '{}': {}", path, errno_text());
  LOOM_CHECK(fseeko(h.file.get(), 0, SEEK_END) == 0, "read_safetensors: '{}': cannot seek", path);
  const auto file_bytes = static_cast<uint64_t>(ftello(h.file.get()));

  // 1. The 8-byte header length, checked before the header is allocated.
  LOOM_CHECK(file_bytes >= 8,
             "read_safetensors: '{}': file is {} bytes, too short for the 8-byte header length",
             path, file_bytes);
  unsigned char length_bytes[8];
  read_exact(h.file.get(), length_bytes, 8, 0, path, "the header length");
  const uint64_t header_bytes = read_u64_le(length_bytes);
  LOOM_CHECK(header_bytes <= kMaxHeaderBytes,
             "read_safetensors: '{}': header length {} is absurd (more than {} bytes); not a "
             "safetensors file?",
             path, header_bytes, kMaxHeaderBytes);
  LOOM_CHECK(header_bytes <= file_bytes - 8,
             "read_safetensors: '{}': header length {} exceeds the {} bytes after the length "
             "field (truncated or not a safetensors file)",
             path, header_bytes, file_bytes - 8);

  // 2. The JSON header: every entry validated, then the layout of the data buffer.
  std::string text(header_bytes, '\0');
  read_exact(h.file.get(), text.data(), text.size(), 8, path, "the header");
  const json root = parse_header_json(text, path);
  LOOM_CHECK(root.is_object(), "read_safetensors: '{}': the header must be a JSON object, not {}",
             path, a_kind(root));
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__")
      h.metadata = parse_metadata(value, path);
    else
      h.entries.push_back(parse_entry(key, value, path));
  }
  h.data_start = 8 + header_bytes;
  check_layout(h.entries, file_bytes - h.data_start, path);
  return h;
}

}  // namespace

std::map<std::string, Tensor> read_safetensors(const std::string& path,
                                               std::map<std::string, std::string>* metadata,
                                               bool keep_bfloat16) {
  Header h = read_header(path);
  // 3. The data, read directly into each tensor's storage.
  std::map<std::string, Tensor> tensors;
  for (const Entry& e : h.entries)
    tensors.emplace(e.name, read_tensor(h.file.get(), e, h.data_start, path, keep_bfloat16));
  if (metadata) *metadata = std::move(h.metadata);
  return tensors;
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  return read_header(path).metadata;
}

// ------------------------------------------------------------------------------ writing

namespace {

// The header's name for a tensor written as it is in memory.
const char* file_dtype_name(DType t) {
  constexpr std::pair<DType, const char*> kWritten[] = {
      {DType::Float32, "F32"}, {DType::Int64, "I64"}, {DType::BFloat16, "BF16"},
      {DType::Bool, "BOOL"}};
  for (const auto& [dtype, name] : kWritten)
    if (dtype == t) return name;
  LOOM_FAIL("write_safetensors: unknown dtype {}", static_cast<int>(t));
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

// {"__metadata__":{...},"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...} in that order,
// compact, non-ASCII kept as UTF-8 (Python's json.dumps(ensure_ascii=False) with compact
// separators, so the bytes equal the reference writer's), padded with spaces to a multiple of 8.
std::string build_header(const std::vector<Prepared>& tensors,
                         const std::map<std::string, std::string>& metadata,
                         const std::string& path) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  for (const auto& p : tensors)
    h[p.name] = {{"dtype", file_dtype_name(p.data.dtype())},
                 {"shape", p.data.shape()},
                 {"data_offsets", {p.begin, p.end}}};
  std::string text;
  try {
    text = h.dump();
  } catch (const nlohmann::ordered_json::exception& e) {  // a name or value that is not UTF-8
    LOOM_FAIL("write_safetensors: '{}': tensor names and metadata must be valid UTF-8 ({})", path,
              e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<Prepared> prepared = prepare(tensors, path);
  const std::string header = build_header(prepared, metadata, path);
  unsigned char length[8];
  const uint64_t header_bytes = header.size();
  std::memcpy(length, &header_bytes, 8);

  data::AtomicFile out(path, "write_safetensors");
  out.write(length, 8);
  out.write(header.data(), header.size());
  for (const auto& p : prepared) out.write(p.data.raw_data(), static_cast<size_t>(p.end - p.begin));
  out.commit();
}

}  // namespace loom::nn
