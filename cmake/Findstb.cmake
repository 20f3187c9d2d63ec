# Finds stb (Debian's libstb-dev: the stb headers, with stb_image and stb_image_write compiled
# into libstb.so) and defines loom_deps::stb, which loom links. Installed with loom
# (lib/cmake/loom), so that a program linking the installed package finds libstb by the same
# rules instead of a path recorded on the building machine.
# -DLOOM_STB_LIB=<libstb.so> -DLOOM_STB_INCLUDE=<dir holding stb/> override the search.
# Sets stb_FOUND, LOOM_STB_LIB and LOOM_STB_INCLUDE.
find_path(LOOM_STB_INCLUDE stb/stb_image.h)
find_library(LOOM_STB_LIB NAMES stb)
include(${CMAKE_CURRENT_LIST_DIR}/LoomImportLibrary.cmake)
loom_import_library(stb loom_deps::stb LOOM_STB_LIB LOOM_STB_INCLUDE)
