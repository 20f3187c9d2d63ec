# loom_import_library(<package> <target> <lib variable> <include variable>): the end that loom's
# find modules for a plain library share (Findstb.cmake, FindNCCL.cmake). Sets <package>_FOUND
# from the two variables, with CMake's standard message, and, when found, defines the imported
# target: the library file and the directory of its headers. A macro, not a function, so that
# <package>_FOUND lands in the find module's scope, where find_package reads it.
include(FindPackageHandleStandardArgs)
macro(loom_import_library package target lib_var include_var)
  find_package_handle_standard_args(${package} REQUIRED_VARS ${lib_var} ${include_var})
  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${${lib_var}}" INTERFACE_INCLUDE_DIRECTORIES "${${include_var}}")
  endif()
endmacro()
