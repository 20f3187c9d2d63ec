# The layer rule, checked: no file of a layer includes a header of a layer that is not below it,
# and README.md draws the layer table as CMakeLists.txt declares it.
#   cmake -DSOURCE_DIR=<repo> -DLAYERS=<build>/loom_layers.txt -P tests/docs/layers.cmake
# loom_layers.txt has a line per layer, in build order: "name: direct deps | everything below".
# An include "x/..." counts when x is a layer folder; system and third-party headers do not.
cmake_minimum_required(VERSION 3.22)  # for if(IN_LIST) and string(REPEAT)
file(STRINGS ${LAYERS} lines)
set(layers)
foreach(line ${lines})
  string(REGEX MATCH "^([a-z_]+): ([a-z_ ]*) \\| ?([a-z_ ]*)$" _ "${line}")
  set(name ${CMAKE_MATCH_1})
  list(APPEND layers ${name})
  string(REPLACE " " ";" deps_${name} "${CMAKE_MATCH_2}")
  string(REPLACE " " ";" below_${name} "${CMAKE_MATCH_3}")
endforeach()
list(LENGTH layers count)
if(count LESS 2)
  message(FATAL_ERROR "layers: ${LAYERS} lists ${count} layers")
endif()

set(violations 0)
foreach(layer ${layers})
  file(GLOB_RECURSE files ${SOURCE_DIR}/${layer}/*.h ${SOURCE_DIR}/${layer}/*.cpp
       ${SOURCE_DIR}/${layer}/*.cu ${SOURCE_DIR}/${layer}/*.cuh)
  foreach(file ${files})
    file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[a-z_]+/")
    foreach(inc ${includes})
      string(REGEX MATCH "\"([a-z_]+)/" _ "${inc}")
      set(target ${CMAKE_MATCH_1})
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
      # The devices' code (backends/cpu/, backends/cuda/, a kernel family's cpu* and cuda*
      # files) is private to backends: the layers above reach kernels through the backend.
      if(NOT layer STREQUAL "backends" AND
         inc MATCHES "\"backends/((cpu|cuda)/|[a-z_]+/(cpu|cuda))")
        message(SEND_ERROR "layers: ${rel} (layer ${layer}) includes ${inc}, which is private to "
                           "backends (call the kernel through backends/backend.h)")
        math(EXPR violations "${violations} + 1")
      endif()
      if(target STREQUAL layer OR NOT target IN_LIST layers OR target IN_LIST below_${layer})
        continue()
      endif()
      message(SEND_ERROR "layers: ${rel} (layer ${layer}) includes ${inc}, but ${target} is not "
                         "below ${layer} (below it: ${below_${layer}})")
      math(EXPR violations "${violations} + 1")
    endforeach()
  endforeach()
endforeach()

# README.md's drawing: between <!-- layers:begin --> and <!-- layers:end -->, a code block with
# one line per layer from the top down: the name padded to 13 columns, then its direct deps.
set(expected "```\n")
list(REVERSE layers)
foreach(layer ${layers})
  string(REPLACE ";" " " deps "${deps_${layer}}")
  if(deps STREQUAL "")
    set(row "${layer}")
  else()
    string(LENGTH "${layer}" width)
    math(EXPR pad "13 - ${width}")
    string(REPEAT " " ${pad} spaces)
    set(row "${layer}${spaces}uses ${deps}")
  endif()
  string(APPEND expected "${row}\n")
endforeach()
string(APPEND expected "```\n")
file(READ ${SOURCE_DIR}/README.md readme)
string(FIND "${readme}" "<!-- layers:begin -->\n" begin)
string(FIND "${readme}" "<!-- layers:end -->" end)
if(begin EQUAL -1 OR end EQUAL -1)
  message(FATAL_ERROR "layers: README.md has no <!-- layers:begin --> ... <!-- layers:end --> block")
endif()
math(EXPR begin "${begin} + 22")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${readme}" ${begin} ${length} drawn)
if(NOT drawn STREQUAL expected)
  message(SEND_ERROR "layers: README.md's layer drawing differs from CMakeLists.txt's table; "
                     "it should read:\n${expected}")
  math(EXPR violations "${violations} + 1")
endif()
if(violations GREATER 0)
  message(FATAL_ERROR "layers: ${violations} violation(s)")
endif()
list(LENGTH layers count)
message(STATUS "layers: ${count} layers, every include points down, README's drawing matches")
