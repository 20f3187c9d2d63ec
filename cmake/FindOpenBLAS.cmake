# Finds OpenBLAS (CBLAS) and defines loom_deps::OpenBLAS, which loom links. Installed with loom
# (lib/cmake/loom), so that a program linking the installed package finds the same library by
# the same rules instead of a path recorded on the building machine.
#
#   1. OpenBLAS's own package config, when there is one: its OpenBLAS::OpenBLAS target (newer
#      OpenBLAS releases), else its OpenBLAS_LIBRARIES/OpenBLAS_INCLUDE_DIRS (Debian's
#      libopenblas-dev, which points at the alternative selected, the OpenMP build with
#      libopenblas-openmp-dev, so BLAS and loom share one libgomp thread pool);
#   2. else cblas.h and libopenblas on the usual paths.
# -DLOOM_BLAS_LIB=<libopenblas.so> -DLOOM_BLAS_INCLUDE=<dir of cblas.h> override both.
# Sets OpenBLAS_FOUND, LOOM_BLAS_LIB and LOOM_BLAS_INCLUDE.
if(NOT LOOM_BLAS_LIB)
  find_package(OpenBLAS CONFIG QUIET)
  if(TARGET OpenBLAS::OpenBLAS)
    set(LOOM_BLAS_LIB OpenBLAS::OpenBLAS)
    get_target_property(LOOM_BLAS_INCLUDE OpenBLAS::OpenBLAS INTERFACE_INCLUDE_DIRECTORIES)
  elseif(OpenBLAS_LIBRARIES)
    list(GET OpenBLAS_LIBRARIES 0 _loom_blas_lib)
    if(EXISTS "${_loom_blas_lib}")
      set(LOOM_BLAS_LIB "${_loom_blas_lib}")
      set(LOOM_BLAS_INCLUDE "${OpenBLAS_INCLUDE_DIRS}")
    endif()
  endif()
endif()
if(NOT LOOM_BLAS_LIB)
  find_library(LOOM_BLAS_LIB NAMES openblas)
endif()
if(NOT LOOM_BLAS_INCLUDE)
  find_path(LOOM_BLAS_INCLUDE cblas.h PATH_SUFFIXES openblas-openmp openblas)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLAS REQUIRED_VARS LOOM_BLAS_LIB LOOM_BLAS_INCLUDE)
if(OpenBLAS_FOUND AND NOT TARGET loom_deps::OpenBLAS)
  if(TARGET ${LOOM_BLAS_LIB})
    add_library(loom_deps::OpenBLAS INTERFACE IMPORTED)
    set_target_properties(loom_deps::OpenBLAS PROPERTIES INTERFACE_LINK_LIBRARIES ${LOOM_BLAS_LIB})
  else()
    add_library(loom_deps::OpenBLAS UNKNOWN IMPORTED)
    set_target_properties(loom_deps::OpenBLAS PROPERTIES IMPORTED_LOCATION "${LOOM_BLAS_LIB}")
  endif()
  set_target_properties(loom_deps::OpenBLAS PROPERTIES
                        INTERFACE_INCLUDE_DIRECTORIES "${LOOM_BLAS_INCLUDE}")
endif()
