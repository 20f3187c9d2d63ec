// loom::Error and the LOOM_CHECK macro used by every public entry point.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace loom {

// Every invalid argument, bad file or backend failure surfaces as a loom::Error whose
// message names the operation and the offending shapes, dtypes, devices or values.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace loom

// LOOM_CHECK(cond, "op: format {}", args...) throws loom::Error with the formatted message.
#define LOOM_CHECK(cond, ...)                                \
  do {                                                       \
    if (!(cond)) throw ::loom::Error(::fmt::format(__VA_ARGS__)); \
  } while (0)

#define LOOM_FAIL(...) throw ::loom::Error(::fmt::format(__VA_ARGS__))
