# Finds NCCL (nccl.h and libnccl, the CUDA toolkit's or a separate install) and defines
# loom_deps::NCCL, which loom links when it builds its NCCL process group. Installed with loom
# (lib/cmake/loom), so that a program linking the installed package finds libnccl by the same
# rules instead of a path recorded on the building machine. Looks next to the CUDA toolkit
# first when find_package(CUDAToolkit) ran before.
# -DLOOM_NCCL_LIB=<libnccl.so> -DLOOM_NCCL_INCLUDE=<dir of nccl.h> override the search.
# Sets NCCL_FOUND, LOOM_NCCL_LIB and LOOM_NCCL_INCLUDE.
find_path(LOOM_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(LOOM_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/LoomImportLibrary.cmake)
loom_import_library(NCCL loom_deps::NCCL LOOM_NCCL_LIB LOOM_NCCL_INCLUDE)
