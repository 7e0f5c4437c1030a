# "install: a plugin built against edited headers of the same version is refused": the plugin
# in tests/install/edited, built against the installed package, loads into the installed CLI;
# built against a copy of the package whose layers/module.h has one more line (the same
# version, the same plugin ABI), it is refused by the handshake's header fingerprint, exit 2,
# one line ending "rebuild it against this headlab", and its configure warned.
#   cmake -DSOURCE_DIR=<tests/install> -DBINARY_DIR=... -DPREFIX=... -DGENERATOR=...
#     -DCXX_COMPILER=... [-DBUILD_TYPE= -DCXX_FLAGS= -DLINK_FLAGS= -DLAUNCHER=] -P edited_headers.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require_vars(SOURCE_DIR BINARY_DIR PREFIX GENERATOR CXX_COMPILER)
file(REMOVE_RECURSE ${BINARY_DIR})
file(MAKE_DIRECTORY ${BINARY_DIR})

# The pristine package: the plugin loads.
outside_configure(configure ${SOURCE_DIR}/edited ${BINARY_DIR}/pristine)
run(OUT out COMMAND ${configure})
string(FIND "${out}" "differ from those" warned)
if(NOT warned EQUAL -1)
  message(FATAL_ERROR "the pristine package warned of edited headers:\n${out}")
endif()
run(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR}/pristine)
run(OUT out COMMAND ${PREFIX}/bin/headlab info --plugin ${BINARY_DIR}/pristine/libedited_plugin.so)
expect_in("${out}" "edited_headers_layer" "headlab info --plugin (pristine headers)")

# A copy of the package (the libraries linked, the headers and CMake files copied), one header
# edited.
set(copy ${BINARY_DIR}/copy)
file(COPY ${PREFIX}/include DESTINATION ${copy})
file(GLOB_RECURSE config ${PREFIX}/lib*/cmake/headlab/headlabConfig.cmake)
get_filename_component(cmake_dir ${config} DIRECTORY)
file(RELATIVE_PATH cmake_rel ${PREFIX} ${cmake_dir})
get_filename_component(libdir_rel ${cmake_rel} DIRECTORY)
get_filename_component(libdir_rel ${libdir_rel} DIRECTORY)
file(COPY ${cmake_dir} DESTINATION ${copy}/${libdir_rel}/cmake)
file(GLOB libs ${PREFIX}/${libdir_rel}/libheadlab.so*)
foreach(lib ${libs})
  get_filename_component(name ${lib} NAME)
  file(CREATE_LINK ${lib} ${copy}/${libdir_rel}/${name} SYMBOLIC)
endforeach()
file(APPEND ${copy}/include/headlab/layers/module.h "// an edit that keeps the version\n")

set(PREFIX_SAVED ${PREFIX})
set(PREFIX ${copy})
outside_configure(configure ${SOURCE_DIR}/edited ${BINARY_DIR}/edited)
set(PREFIX ${PREFIX_SAVED})
run(OUT out COMMAND ${configure})
expect_in("${out}" "differ from those" "the configure against the edited copy")
run(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR}/edited)
execute_process(COMMAND ${PREFIX}/bin/headlab info --plugin ${BINARY_DIR}/edited/libedited_plugin.so
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "the plugin built against edited headers: exit ${rc}, expected 2:\n${out}${err}")
endif()
string(STRIP "${err}" err)
expect_in("${err}" "was built against other headers than this headlab's, though both say headlab"
  "the refusal")
string(REGEX MATCH "rebuild it against this headlab$" ending "${err}")
string(FIND "${err}" "\n" newline)
if(NOT ending OR NOT newline EQUAL -1 OR NOT out STREQUAL "")
  message(FATAL_ERROR "expected one line on stderr ending 'rebuild it against this headlab', "
    "nothing on stdout; got:\n${out}${err}")
endif()
