# cmake -DEXE=bin/meshrun -DFLAG=--help-env -DOUT=build/docs/blocks/contracts.md
#       -P docs/gen-block.cmake
# Writes what the tool's hidden FLAG prints (generated blocks of a hand-written
# page, each between "<!-- BEGIN name ... -->" and "<!-- END name -->") to OUT.
# Fails if the tool fails or prints to stderr.
cmake_minimum_required(VERSION 3.18)
foreach(v EXE FLAG OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "gen-block.cmake: -D${v}=... is required")
  endif()
endforeach()
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
execute_process(COMMAND ${EXE} ${FLAG} OUTPUT_FILE ${OUT} ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
  message(FATAL_ERROR "${EXE} ${FLAG} failed (${rc}): ${err}")
endif()
