# Finds jemalloc (Debian's libjemalloc-dev: jemalloc/jemalloc.h and libjemalloc.so) and defines
# loom_deps::jemalloc, which loom links so that every program linking loom allocates through it
# (CMakeLists.txt, LOOM_JEMALLOC). Installed with loom (lib/cmake/loom), so that a program
# linking the installed package finds the library by the same rules.
# -DLOOM_JEMALLOC_LIB=<libjemalloc.so> -DLOOM_JEMALLOC_INCLUDE=<dir holding jemalloc/> override
# the search. Sets jemalloc_FOUND, LOOM_JEMALLOC_LIB and LOOM_JEMALLOC_INCLUDE.
find_path(LOOM_JEMALLOC_INCLUDE jemalloc/jemalloc.h)
find_library(LOOM_JEMALLOC_LIB NAMES jemalloc)
include(${CMAKE_CURRENT_LIST_DIR}/LoomImportLibrary.cmake)
loom_import_library(jemalloc loom_deps::jemalloc LOOM_JEMALLOC_LIB LOOM_JEMALLOC_INCLUDE)
