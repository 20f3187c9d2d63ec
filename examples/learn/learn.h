// What every learn program (examples/learn/learn_*.cpp) shares: its command line (at most one
// argument, the path of the picture it draws, or --help), one thread, and the end of its main:
//
//   int main(int argc, char** argv) try {
//     learn::parse_args(argc, argv, "what it shows");
//     ...
//   } catch (const std::exception& e) {
//     return learn::fail(e);
//   }
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "loom.h"

namespace learn {

// argv[1] when given, else `fallback` (a picture in the current directory). --help prints
// `about` and the usage and exits 0; anything else unexpected prints them and exits 2.
// A program that draws nothing passes an empty fallback and takes no argument.
// It also puts the program on one thread (OpenMP and OpenBLAS): its tensors hold a few thousand
// numbers, too few to share out, and where cores are busy waiting threads cost more than they
// share (learn_07_reverse took 1.6 s on one thread and over 3 minutes on two, on a loaded 2-core
// machine). One thread also sums in one order, so a program prints the same numbers every run,
// the numbers its chapter shows.
inline std::string parse_args(int argc, char** argv, const char* about,
                              const std::string& fallback = "") {
  loom::set_num_threads(1);
  const std::string arg = argc > 1 ? argv[1] : "";
  const bool help = arg == "--help" || arg == "-h";
  if (help || argc > 2 || (!arg.empty() && (arg[0] == '-' || fallback.empty()))) {
    std::printf("%s\nusage: %s%s\n", about, argv[0],
                fallback.empty() ? "" : (" [out.png]   (default " + fallback + ")").c_str());
    std::exit(help ? 0 : 2);
  }
  return arg.empty() ? fallback : arg;
}

// For a program that draws a picture: argv[1] when given, else the picture named after the
// program, in the current directory (learn_09_vit draws learn_09_vit.png).
inline std::string picture_path(int argc, char** argv, const char* about) {
  const std::string program = std::filesystem::path(argv[0]).filename().string();
  return parse_args(argc, argv, about, program + ".png");
}

// For a program that draws several pictures: picture `name` in the folder of the first one,
// `out` (docs/learn/images/ when a chapter's command regenerates them; the current directory by
// default).
inline std::string picture_beside(const std::string& out, const std::string& name) {
  return (std::filesystem::path(out).parent_path() / name).string();
}

// The handler of main's function-try-block: a loom::Error (a picture path that is a folder or
// cannot be written) or any other exception ends the program with its message and status 1, as
// cli::trainer_main ends the trainers, instead of std::terminate's abort (status 134).
inline int fail(const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}

}  // namespace learn
