# The CTest test "examples: custom_layer": configures this example against headlab's build tree,
# builds it and runs it on custom_layer.toml. Run as cmake -P with
#   SOURCE_DIR (this folder), BINARY_DIR, HEADLAB_DIR (headlab's build dir), GENERATOR,
#   BUILD_TYPE, CXX_COMPILER and optionally LAUNCHER (ccache), CXX_FLAGS and LINK_FLAGS (the
#   library's build flags, e.g. the sanitizers, which the example must link with too).
foreach(var SOURCE_DIR BINARY_DIR HEADLAB_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "ctest_run.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " line "${ARGN}")
    message(FATAL_ERROR "examples: custom_layer: '${line}' failed (${rc})")
  endif()
endfunction()

set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
    -Dheadlab_DIR=${HEADLAB_DIR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(BUILD_TYPE)
  list(APPEND configure -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
if(CXX_FLAGS)
  list(APPEND configure "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
endif()
if(LINK_FLAGS)
  list(APPEND configure "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
endif()
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run(${configure})
run(${CMAKE_COMMAND} --build ${BINARY_DIR})
file(REMOVE_RECURSE ${BINARY_DIR}/run)
run(${BINARY_DIR}/custom_layer ${SOURCE_DIR}/custom_layer.toml ${BINARY_DIR}/run)
