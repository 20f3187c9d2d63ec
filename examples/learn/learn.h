// The command line of the learn programs (examples/learn/learn_*.cpp): at most one argument,
// the path of the picture a program draws, or --help.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace learn {

// argv[1] when given, else `fallback` (a picture in the current directory). --help prints
// `about` and the usage and exits 0; anything else unexpected prints them and exits 2.
// A program that draws nothing passes an empty fallback and takes no argument.
inline std::string parse_args(int argc, char** argv, const char* about,
                              const std::string& fallback = "") {
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

}  // namespace learn
