// Only in the libFuzzer build of fuzz_image: stb_image compiled here, with the fuzzer's
// coverage and the sanitizers, so that it replaces the uninstrumented copy in libstb.so (a
// program's own definitions take precedence over a shared library's) and the fuzzer can steer
// into the decoders.
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
