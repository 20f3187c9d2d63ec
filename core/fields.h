// Field lists: a struct of settings (a model config, a trainer's state or options) declares
// each of its fields once, and printing, checkpoint metadata, range checks and comparison are
// derived from that one list (the habit of Hugging Face's PretrainedConfig and flashlight's
// FL_SAVE_LOAD). Without it every field is written five times: the member, to_string,
// to_metadata, from_metadata and validate, and one of the five is sooner or later forgotten.
//
// A field list is an X-macro: a macro that takes another macro F and applies it to each field,
// (type, name, default, check, help):
//
//   #define LOOM_GPT_CONFIG_FIELDS(F)  (each line but the last ends in a backslash)
//     F(int64_t, vocab_size, 256, positive, "number of token ids")
//     F(float, dropout, 0.0f, probability, "on embeddings, attention and residuals")
//
//   struct GPTConfig {
//     LOOM_FIELDS_DECLARE(LOOM_GPT_CONFIG_FIELDS)  // int64_t vocab_size = 256; float dropout...
//     LOOM_FIELDS_VISIT(LOOM_GPT_CONFIG_FIELDS)    // visit_fields(v): v("vocab_size", ...), ...
//     bool operator==(const GPTConfig&) const = default;
//   };
//
// The struct stays a plain aggregate (designated initializers work: {.vocab_size = 50257}), its
// members in the order of the list. `check` is a name in fields::Check; `help` is the field's
// comment, one string (a trainer can print it beside its --flag). A default that holds commas
// goes in parentheses: (std::vector<int64_t>{2, 4}).
//
// Everything else works on any struct with visit_fields, which calls v(name, member, check,
// help) for each field in order:
//   to_string(c)             "vocab_size=256, dropout=0"
//   to_metadata(c, type)     {"model_type": type, "vocab_size": "256", "dropout": "0"}
//   from_metadata<T>(m, ...) back, each missing or garbled key a loom::Error naming it
//   check_fields(c, where)   each field's check, a loom::Error naming the struct, field, value
// and a table of named presets gives preset(table, name) and preset_names(table).
//
// Field types: integers, float, double, bool, std::string and std::vector of integers.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

// ---------------------------------------------------------------------------- the two macros
// One member with its default, for each field of the list.
#define LOOM_FIELDS_DECLARE(FIELDS) FIELDS(LOOM_FIELDS_DECLARE_ONE_)
#define LOOM_FIELDS_DECLARE_ONE_(type, name, value, check, help) type name = value;

// visit_fields(visitor), and its const twin: visitor(name, member, check, help) per field,
// in the order of the list.
#define LOOM_FIELDS_VISIT(FIELDS)              \
  template <class Visitor>                     \
  void visit_fields(Visitor&& visitor) {       \
    FIELDS(LOOM_FIELDS_VISIT_ONE_)             \
  }                                            \
  template <class Visitor>                     \
  void visit_fields(Visitor&& visitor) const { \
    FIELDS(LOOM_FIELDS_VISIT_ONE_)             \
  }
#define LOOM_FIELDS_VISIT_ONE_(type, name, value, check, help) \
  visitor(#name, name, ::loom::fields::Check::check, help);

// (An addition for the trainers' own groups of flags, examples/train_*.cpp.) A struct that is
// nothing but its field list, its members and visit_fields:
//   LOOM_FIELDS_STRUCT(DataFlags, TRANSLATE_DATA_FIELDS);
#define LOOM_FIELDS_STRUCT(Name, FIELDS) \
  struct Name {                          \
    LOOM_FIELDS_DECLARE(FIELDS)          \
    LOOM_FIELDS_VISIT(FIELDS)            \
  }

// What every model config has, from its field list (models/gpt.h and the other five):
//   struct GPTConfig {
//     LOOM_MODEL_CONFIG(GPTConfig, LOOM_GPT_CONFIG_FIELDS, "gpt")
//     void validate() const;          // the model's own rules (the checks of the fields first)
//     int64_t num_parameters() const;
//   };
// gives the members with their defaults, visit_fields, ==, to_string(), to_metadata() (tagged
// "model_type": "gpt"), from_metadata(metadata, source = "metadata"), and preset(name) and
// preset_names() over the table the model's .cpp defines as presets().
#define LOOM_MODEL_CONFIG(Type, FIELDS, model_type)                                         \
  LOOM_FIELDS_DECLARE(FIELDS)                                                               \
  LOOM_FIELDS_VISIT(FIELDS)                                                                 \
  bool operator==(const Type&) const = default;                                             \
  std::string to_string() const { return ::loom::fields::to_string(*this); }                \
  ::loom::fields::Metadata to_metadata() const {                                            \
    return ::loom::fields::to_metadata(*this, model_type);                                  \
  }                                                                                         \
  static Type from_metadata(const ::loom::fields::Metadata& metadata,                       \
                            const std::string& source = "metadata") {                       \
    return ::loom::fields::from_metadata<Type>(metadata, #Type "::from_metadata: " + source, \
                                               model_type);                                 \
  }                                                                                         \
  static std::span<const ::loom::fields::Preset<Type>> presets();                           \
  static Type preset(const std::string& name) {                                             \
    return ::loom::fields::preset(presets(), name, #Type "::preset");                       \
  }                                                                                         \
  static std::vector<std::string> preset_names() {                                          \
    return ::loom::fields::preset_names(presets());                                         \
  }

namespace loom::fields {

using Metadata = std::map<std::string, std::string>;

// What a field's value must be; check_fields applies it. A list's check applies to each of
// its entries; a string or a flag takes `any`.
enum class Check {
  any,           // every value of the type
  positive,      // > 0
  non_negative,  // >= 0
  probability,   // in [0, 1): a dropout rate
  finite,        // not NaN nor infinite
};

// The words check_fields puts after "must be".
inline const char* describe(Check check) {
  static constexpr const char* kWords[] = {"anything", "positive", "non-negative", "in [0, 1)",
                                           "finite"};  // in the order of Check
  return kWords[static_cast<int>(check)];
}

// True for std::vector<E>: a list field.
template <class V>
inline constexpr bool is_list = false;
template <class E>
inline constexpr bool is_list<std::vector<E>> = true;

// Whether `value` passes `check`. Numbers are compared as double: the checks only ask about
// sign, zero and finiteness, which the conversion keeps (and unsigned types need no special
// case). A NaN passes only `any`: every comparison with it is false.
template <class V>
bool passes(Check check, const V& value) {
  if constexpr (is_list<V>) {
    for (const auto& entry : value)
      if (!passes(check, entry)) return false;
    return true;
  } else if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool>) {
    const auto x = static_cast<double>(value);
    switch (check) {
      case Check::any:
        return true;
      case Check::positive:
        return x > 0;
      case Check::non_negative:
        return x >= 0;
      case Check::probability:
        return x >= 0 && x < 1;
      case Check::finite:
        return std::isfinite(x);
    }
    return false;
  } else {
    return check == Check::any;  // strings and flags have no range
  }
}

// ---------------------------------------------------------------------------- one value as text
// As to_string prints it: fmt's "{}" (the shortest text that reads back exactly for a float,
// true / false for a flag, [2, 4] for a list).
template <class V>
std::string to_text(const V& value) {
  return fmt::format("{}", value);
}

// As metadata holds it: a flag is "1" or "0", a list "2,4", anything else as to_text.
template <class V>
std::string to_metadata_text(const V& value) {
  if constexpr (std::is_same_v<V, bool>)
    return value ? "1" : "0";
  else if constexpr (is_list<V>)
    return fmt::format("{}", fmt::join(value, ","));
  else
    return to_text(value);
}

// Reads metadata text back into `value`, the inverse of to_metadata_text. Garbage is a
// loom::Error "<where>: "<key>" is '<text>', not a number" (for a list, naming the bad entry).
template <class V>
void from_metadata_text(const std::string& text, V& value, const std::string& key,
                        const std::string& where) {
  if constexpr (std::is_same_v<V, std::string>) {
    value = text;
  } else if constexpr (std::is_same_v<V, bool>) {
    int64_t number = 0;
    from_metadata_text(text, number, key, where);
    LOOM_CHECK(number == 0 || number == 1, "{}: \"{}\" is {}, not 0 or 1", where, key, number);
    value = number == 1;
  } else if constexpr (is_list<V>) {
    // "32,64" -> {32, 64}, each entry read as one number; "" is the empty list.
    value.clear();
    if (text.empty()) return;
    for (size_t begin = 0;;) {
      const size_t comma = text.find(',', begin);  // npos after the last entry
      from_metadata_text(text.substr(begin, comma - begin), value.emplace_back(), key, where);
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
  } else {
    // The whole text must be the number: "12abc", " 4" and "1e999" (out of range) are refused.
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    LOOM_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size(),
               "{}: \"{}\" is '{}', not a number", where, key, text);
  }
}

// ---------------------------------------------------------------------------- whole structs
// "name=value, name=value, ..." in the order of the list, values as to_text.
template <class T>
std::string to_string(const T& c) {
  std::string out;
  c.visit_fields([&](const char* name, const auto& value, Check, const char*) {
    out += fmt::format("{}{}={}", out.empty() ? "" : ", ", name, to_text(value));
  });
  return out;
}

// Each field's check; the first that fails is a loom::Error
// "<where>: <name>=<value> must be <check>", e.g. "GPTConfig: n_head=0 must be positive".
template <class T>
void check_fields(const T& c, const std::string& where) {
  c.visit_fields([&](const char* name, const auto& value, Check check, const char*) {
    LOOM_CHECK(passes(check, value), "{}: {}={} must be {}", where, name, to_text(value),
               describe(check));
  });
}

// Every field under its name (values as to_metadata_text), and "model_type" when one is given,
// for checkpoint metadata (nn::save_checkpoint): a program rebuilds the struct from the file.
template <class T>
Metadata to_metadata(const T& c, const std::string& model_type = "") {
  Metadata out;
  if (!model_type.empty()) out["model_type"] = model_type;
  c.visit_fields([&](const char* name, const auto& value, Check, const char*) {
    out[name] = to_metadata_text(value);
  });
  return out;
}

// The struct to_metadata wrote, read back. Other keys are ignored; "model_type" may be absent
// (older files), but another one than `model_type` is refused. Then the result is checked: by
// T::validate() when T has one (it calls check_fields itself), otherwise by check_fields.
// Every error is a loom::Error starting with `where` (say "GPTConfig::from_metadata: <file>")
// and naming the key: "the metadata has no "<key>"", "... is 'abc', not a number", ...
template <class T>
T from_metadata(const Metadata& metadata, const std::string& where,
                const std::string& model_type = "") {
  const auto type = metadata.find("model_type");
  LOOM_CHECK(model_type.empty() || type == metadata.end() || type->second == model_type,
             "{}: \"model_type\" is '{}', not '{}'", where, type->second, model_type);
  T c;
  c.visit_fields([&](const char* name, auto& value, Check, const char*) {
    const auto it = metadata.find(name);
    LOOM_CHECK(it != metadata.end(), "{}: the metadata has no \"{}\"", where, name);
    from_metadata_text(it->second, value, name, where);
  });
  if constexpr (requires(const T& t) { t.validate(); }) {
    try {
      c.validate();
    } catch (const Error& e) {
      LOOM_FAIL("{}: {}", where, e.what());
    }
  } else {
    check_fields(c, where);
  }
  return c;
}

// ---------------------------------------------------------------------------- presets
// One named preset: a row of a model's table, written once, e.g.
//   const fields::Preset<GPTConfig> presets[] = {{"gpt-mini", {}}, {"gpt2", {.vocab_size = ...}}};
template <class T>
struct Preset {
  const char* name;
  T config;
};

// The names of the table's presets, in its order.
template <class T>
std::vector<std::string> preset_names(std::span<const Preset<T>> table) {
  std::vector<std::string> names;
  for (const auto& row : table) names.emplace_back(row.name);
  return names;
}

// The preset called `name`; any other name is a loom::Error
// "<where>: unknown preset '<name>' (known: a, b, c)".
template <class T>
T preset(std::span<const Preset<T>> table, const std::string& name, const std::string& where) {
  for (const auto& row : table)
    if (name == row.name) return row.config;
  LOOM_FAIL("{}: unknown preset '{}' (known: {})", where, name,
            fmt::join(preset_names(table), ", "));
}

}  // namespace loom::fields
