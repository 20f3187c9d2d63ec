// core/fields.h: a struct declared by one field list prints, round-trips through metadata,
// checks its fields and finds its presets, each error naming the struct, the field and the value.
#include <limits>

#include "core/fields.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// One field of each kind the model configs hold.
#define TEST_FIELDS(F)                                \
  F(int64_t, width, 8, positive, "a size")            \
  F(int64_t, offset, 0, non_negative, "an index")     \
  F(float, rate, 0.5f, probability, "a dropout rate") \
  F(double, scale, 1.5, finite, "any finite number")  \
  F(uint64_t, seed, 42, any, "an unsigned word")      \
  F(bool, flag, true, any, "a switch")                \
  F(std::string, kind, "small", any, "a name")        \
  F(std::vector<int64_t>, stages, (std::vector<int64_t>{2, 4}), positive, "a list")

struct Settings {
  LOOM_FIELDS_DECLARE(TEST_FIELDS)
  LOOM_FIELDS_VISIT(TEST_FIELDS)
  bool operator==(const Settings&) const = default;
};

// The same with a validate() of its own, which from_metadata must call.
struct Pair {
#define PAIR_FIELDS(F)                          \
  F(int64_t, a, 4, positive, "a multiple of b") \
  F(int64_t, b, 2, positive, "b")
  LOOM_FIELDS_DECLARE(PAIR_FIELDS)
  LOOM_FIELDS_VISIT(PAIR_FIELDS)
  void validate() const {
    fields::check_fields(*this, "Pair");
    LOOM_CHECK(a % b == 0, "Pair: a {} is not a multiple of b {}", a, b);
  }
};

}  // namespace

TEST_CASE("a field list declares an aggregate with its defaults, in order") {
  const Settings s;
  CHECK(s.width == 8);
  CHECK(s.rate == 0.5f);
  CHECK(s.stages == std::vector<int64_t>{2, 4});
  const Settings named{.width = 3, .kind = "big"};  // designated initializers still work
  CHECK(named.width == 3);
  CHECK(named.offset == 0);
  CHECK(named.kind == "big");
  CHECK(named != s);
  CHECK(Settings{} == s);
  std::vector<std::string> names;
  s.visit_fields(
      [&](const char* name, const auto&, fields::Check, const char*) { names.emplace_back(name); });
  CHECK(names == std::vector<std::string>{"width", "offset", "rate", "scale", "seed", "flag",
                                          "kind", "stages"});
}

TEST_CASE("fields::to_string prints name=value in the order of the list") {
  CHECK(fields::to_string(Settings{}) ==
        "width=8, offset=0, rate=0.5, scale=1.5, seed=42, flag=true, kind=small, "
        "stages=[2, 4]");
}

TEST_CASE("fields::to_metadata and from_metadata round-trip every kind of field") {
  Settings s{.width = 5,
             .rate = 0.1f,
             .scale = -2.25,
             .seed = 18446744073709551615u,
             .flag = false,
             .kind = "resnet",
             .stages = {3, 1, 7}};
  const fields::Metadata meta = fields::to_metadata(s, "test");
  CHECK(meta == fields::Metadata{{"model_type", "test"},
                                 {"width", "5"},
                                 {"offset", "0"},
                                 {"rate", "0.1"},
                                 {"scale", "-2.25"},
                                 {"seed", "18446744073709551615"},
                                 {"flag", "0"},
                                 {"kind", "resnet"},
                                 {"stages", "3,1,7"}});
  CHECK(fields::from_metadata<Settings>(meta, "f", "test") == s);
  // Other keys are ignored and model_type may be absent; an empty list reads back empty.
  fields::Metadata extended = meta;
  extended["step"] = "12";
  extended.erase("model_type");
  s.stages.clear();
  extended["stages"] = "";
  CHECK(fields::from_metadata<Settings>(extended, "f", "test") == s);
  CHECK(fields::to_metadata(s).count("model_type") == 0);
}

TEST_CASE("fields::from_metadata names the missing key, the garbled value and the source") {
  const fields::Metadata good = fields::to_metadata(Settings{}, "test");
  auto missing = good;
  missing.erase("rate");
  expect_error([&] { fields::from_metadata<Settings>(missing, "Settings: x.safetensors"); },
               {"Settings: x.safetensors", "the metadata has no \"rate\""});
  for (const char* garbled : {"", "12abc", "abc", " 4", "1e999", "4 "}) {
    auto bad = good;
    bad["width"] = garbled;
    expect_error([&] { fields::from_metadata<Settings>(bad, "x.safetensors"); },
                 {"x.safetensors", std::string("\"width\" is '") + garbled + "', not a number"});
  }
  auto negative = good;
  negative["seed"] = "-1";  // not an unsigned number
  expect_error([&] { fields::from_metadata<Settings>(negative, "f"); }, {"\"seed\" is '-1'"});
  auto flag = good;
  flag["flag"] = "2";
  expect_error([&] { fields::from_metadata<Settings>(flag, "f"); }, {"\"flag\" is 2, not 0 or 1"});
  auto list = good;
  list["stages"] = "2,x,4";
  expect_error([&] { fields::from_metadata<Settings>(list, "f"); }, {"\"stages\" is 'x'"});
  list["stages"] = "2,4,";
  expect_error([&] { fields::from_metadata<Settings>(list, "f"); }, {"\"stages\" is ''"});
  auto other = good;
  other["model_type"] = "gpt";
  expect_error([&] { fields::from_metadata<Settings>(other, "f", "test"); },
               {"f: \"model_type\" is 'gpt', not 'test'"});
}

TEST_CASE("fields::check_fields names the struct, the field and its value for each check") {
  CHECK_NOTHROW(fields::check_fields(Settings{}, "Settings"));
  auto fails = [](Settings s, std::initializer_list<std::string> fragments) {
    expect_error([&] { fields::check_fields(s, "Settings"); }, fragments);
  };
  fails({.width = 0}, {"Settings: width=0 must be positive"});
  fails({.offset = -1}, {"Settings: offset=-1 must be non-negative"});
  fails({.rate = 1.0f}, {"Settings: rate=1 must be in [0, 1)"});
  fails({.rate = -0.5f}, {"Settings: rate=-0.5 must be in [0, 1)"});
  fails({.rate = std::nanf("")}, {"Settings: rate=nan must be in [0, 1)"});
  fails({.scale = std::numeric_limits<double>::infinity()}, {"Settings: scale=inf must be finite"});
  fails({.stages = {2, 0}}, {"Settings: stages=[2, 0] must be positive"});
  // from_metadata checks what it read, naming the source.
  auto meta = fields::to_metadata(Settings{});
  meta["width"] = "-3";
  expect_error([&] { fields::from_metadata<Settings>(meta, "f"); }, {"f: width=-3 must be"});
}

TEST_CASE("fields::from_metadata runs the struct's own validate(), naming the source") {
  const Pair p = fields::from_metadata<Pair>({{"a", "6"}, {"b", "3"}}, "f");
  CHECK(p.a == 6);
  expect_error(
      [] {
        fields::from_metadata<Pair>({{"a", "5"}, {"b", "2"}}, "file 'p'");
      },
      {"file 'p': Pair: a 5 is not a multiple of b 2"});
  expect_error(
      [] {
        fields::from_metadata<Pair>({{"a", "4"}, {"b", "0"}}, "f");
      },
      {"f: Pair: b=0 must be positive"});
}

TEST_CASE("a preset table gives preset() and preset_names(), and names the known presets") {
  const fields::Preset<Settings> rows[] = {{"tiny", {.width = 1}}, {"wide", {.width = 64}}};
  const std::span<const fields::Preset<Settings>> table = rows;  // as a config's presets()
  CHECK(fields::preset(table, "wide", "Settings::preset").width == 64);
  CHECK(fields::preset(table, "tiny", "Settings::preset") == Settings{.width = 1});
  CHECK(fields::preset_names(table) == std::vector<std::string>{"tiny", "wide"});
  expect_error([&] { fields::preset(table, "huge", "Settings::preset"); },
               {"Settings::preset: unknown preset 'huge' (known: tiny, wide)"});
}
