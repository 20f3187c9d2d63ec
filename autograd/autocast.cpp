// The autocast state (autograd/autocast.h): one flag per thread, as grad mode.
#include "autograd/autocast.h"

#include "core/error.h"

namespace loom {

namespace {
thread_local bool g_autocast = false;
}  // namespace

namespace autocast {
bool is_enabled() { return g_autocast; }
void set_enabled(bool on) { g_autocast = on; }
DType get_dtype() { return DType::BFloat16; }
}  // namespace autocast

AutocastGuard::AutocastGuard(bool enabled, DType dtype) : previous_(g_autocast) {
  LOOM_CHECK(dtype == DType::BFloat16,
             "AutocastGuard: dtype {} is not a lower-precision dtype loom has; use bfloat16",
             dtype_name(dtype));
  g_autocast = enabled;
}

AutocastGuard::~AutocastGuard() { g_autocast = previous_; }

}  // namespace loom
