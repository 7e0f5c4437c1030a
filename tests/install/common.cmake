# Helpers of the CTest scripts that work on an installed headlab (tests/install/*.cmake,
# examples/plugin/ctest_run.cmake), run as cmake -P.

# Runs a command; fails the test with the command line and its output unless it exits 0.
# The output is kept in ${OUTPUT_VARIABLE} when given: run(OUT var COMMAND ...).
function(run)
  cmake_parse_arguments(R "" "OUT;WORKING_DIRECTORY" "COMMAND" ${ARGN})
  if(NOT R_WORKING_DIRECTORY)
    set(R_WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  execute_process(COMMAND ${R_COMMAND} WORKING_DIRECTORY ${R_WORKING_DIRECTORY}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " line "${R_COMMAND}")
    message(FATAL_ERROR "'${line}' failed (${rc}):\n${out}\n${err}")
  endif()
  if(R_OUT)
    set(${R_OUT} "${out}${err}" PARENT_SCOPE)
  endif()
endfunction()

function(require_vars)
  foreach(var ${ARGN})
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${CMAKE_SCRIPT_MODE_FILE}: -D${var}=... is required")
    endif()
  endforeach()
endfunction()

# Fails unless `text` contains `fragment`.
function(expect_in text fragment what)
  string(FIND "${text}" "${fragment}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}: expected '${fragment}' in:\n${text}")
  endif()
endfunction()

# The configure command of a project outside headlab, built against the installed package
# alone: PREFIX is the only place searched (no package registry, no build tree), with the
# compiler, generator and flags (the sanitizers in build-asan) of headlab's own build.
function(outside_configure out_var source binary)
  set(cmd ${CMAKE_COMMAND} -S ${source} -B ${binary} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
  foreach(pair "BUILD_TYPE;CMAKE_BUILD_TYPE" "CXX_FLAGS;CMAKE_CXX_FLAGS"
      "LINK_FLAGS;CMAKE_EXE_LINKER_FLAGS" "LINK_FLAGS;CMAKE_SHARED_LINKER_FLAGS"
      "LINK_FLAGS;CMAKE_MODULE_LINKER_FLAGS" "LAUNCHER;CMAKE_CXX_COMPILER_LAUNCHER")
    list(GET pair 0 from)
    list(GET pair 1 to)
    if(${from})
      list(APPEND cmd "-D${to}=${${from}}")
    endif()
  endforeach()
  set(${out_var} ${cmd} PARENT_SCOPE)
endfunction()
