# The CTest test "examples: plugin" (tests/CMakeLists.txt): with headlab installed into a
# temporary prefix (the fixture of tests/install), builds this folder against that prefix
# alone, trains plugin.toml with the installed `headlab train --plugin`, checks heads.json and
# report.html, evaluates the run with `headlab eval` without --plugin (run.json has it), and
# gradchecks the plugin's op and layers with the installed `headlab gradcheck --plugin` on every
# backend.
#   cmake -DSOURCE_DIR=<this folder> -DBINARY_DIR=... -DPREFIX=... -DGENERATOR=...
#     -DCXX_COMPILER=... [-DBUILD_TYPE= -DCXX_FLAGS= -DLINK_FLAGS= -DLAUNCHER=] -P ctest_run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../../tests/install/common.cmake)
require_vars(SOURCE_DIR BINARY_DIR PREFIX GENERATOR CXX_COMPILER)
file(REMOVE_RECURSE ${BINARY_DIR})

outside_configure(configure ${SOURCE_DIR} ${BINARY_DIR}/build)
run(COMMAND ${configure})
run(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR}/build)
set(plugin ${BINARY_DIR}/build/libheadlab_example_plugin.so)
set(headlab ${PREFIX}/bin/headlab)
set(run_dir ${BINARY_DIR}/run)

run(OUT out COMMAND ${headlab} train ${SOURCE_DIR}/plugin.toml --plugin ${plugin}
  --out ${run_dir} --no-progress)
expect_in("${out}" "component accuracy: prev " "headlab train")

file(READ ${run_dir}/heads.json heads)
string(JSON task GET "${heads}" task)
string(JSON relations GET "${heads}" relations)
if(NOT task STREQUAL "mirror" OR NOT relations MATCHES "\"prev\".*\"mirror\"")
  message(FATAL_ERROR "heads.json: task ${task}, relations ${relations}")
endif()
string(JSON s_match GET "${heads}" specialization s_match)
string(JSON accuracy GET "${heads}" eval_accuracy)
if(accuracy LESS 0.9 OR s_match LESS 0.5)  # each of the two heads takes one relation
  message(FATAL_ERROR "heads.json: eval accuracy ${accuracy}, s_match ${s_match}")
endif()
file(READ ${run_dir}/report.html report)
foreach(fragment "mirror task" "alibi_attention" "swiglu" ">prev<" ">mirror<")
  expect_in("${report}" "${fragment}" "report.html")
endforeach()
file(READ ${run_dir}/run.json record)
expect_in("${record}" "${plugin}" "run.json")

run(OUT out COMMAND ${headlab} eval ${run_dir} --json)
string(JSON components GET "${out}" component_accuracy)
expect_in("${components}" "\"mirror\"" "headlab eval (no --plugin)")
# Each name the plugin registered with gradcheck cases, on every backend: the op's three cases
# and alibi_attention's two.
foreach(name squareplus alibi_attention)
  run(OUT out COMMAND ${headlab} gradcheck --plugin ${plugin} --only ${name})
  expect_in("${out}" " 0 failed" "headlab gradcheck --only ${name}")
endforeach()
expect_in("${out}" "6 checks, 0 failed" "headlab gradcheck --only alibi_attention")
run(OUT out COMMAND ${headlab} gradcheck --plugin ${plugin} --only squareplus --json)
string(REGEX MATCHALL "\"pass\":true" passed "${out}")
list(LENGTH passed passed_count)
if(NOT passed_count EQUAL 9)  # 3 cases x 3 backends
  message(FATAL_ERROR "headlab gradcheck --only squareplus: ${passed_count} of 9 passed:\n${out}")
endif()
message(STATUS "plugin trained: eval accuracy ${accuracy}, s_match ${s_match}")
