# "install: the Python package from the installed prefix alone": with PYTHONPATH naming only
# PREFIX/lib/python3/dist-packages and a clean environment, python3 imports headlab, trains a tiny
# run and finds libheadlab.so and bin/headlab in the prefix (tests/install/python_prefix.py), and
# runs the installed examples/python/patch_prev_head.py.
#   cmake -DPREFIX=... -DBUILD_DIR=... -DSOURCE_DIR=... -DBINARY_DIR=... -DPYTHON=...
#         [-DASAN_RUNTIME=...] -P python_prefix.cmake
# Under the sanitizers python3 (not built with ASan) gets the ASan runtime and libstdc++
# preloaded (ASAN_RUNTIME, a LD_PRELOAD list) and no leak check, as the Python tests of the build
# tree (tests/CMakeLists.txt).
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require_vars(PREFIX BUILD_DIR SOURCE_DIR BINARY_DIR PYTHON)

file(REMOVE_RECURSE ${BINARY_DIR})
file(MAKE_DIRECTORY ${BINARY_DIR})
# The config and the script are copied out of the source tree, into the work directory (the one
# place inside the build tree the process may map files from: the run's attention.npy).
file(COPY ${SOURCE_DIR}/configs/tiny.toml DESTINATION ${BINARY_DIR})
set(env PATH=/usr/bin:/bin PYTHONPATH=${PREFIX}/lib/python3/dist-packages PYTHONDONTWRITEBYTECODE=1)
if(ASAN_RUNTIME)
  list(APPEND env LD_PRELOAD=${ASAN_RUNTIME} ASAN_OPTIONS=detect_leaks=0)
endif()
file(COPY ${CMAKE_CURRENT_LIST_DIR}/python_prefix.py DESTINATION ${BINARY_DIR})
run(OUT out WORKING_DIRECTORY ${BINARY_DIR}
  COMMAND env -i ${env} ${PYTHON} ${BINARY_DIR}/python_prefix.py ${PREFIX} ${BUILD_DIR}
    ${SOURCE_DIR} ${BINARY_DIR}/tiny.toml ${BINARY_DIR}/run)
message(STATUS "${out}")
# examples/python/ from the prefix too: the installed script trains the installed flagship config
# (share/headlab/configs) with the installed package, shorter.
run(OUT example WORKING_DIRECTORY ${BINARY_DIR}
  COMMAND env -i ${env} ${PYTHON} ${PREFIX}/share/headlab/examples/python/patch_prev_head.py
    --out ${BINARY_DIR}/example --set train.steps=400 --set train.eval_every=100
    --set train.checkpoint_every=200 --set train.eval_batches=2 --set train.eval_batch_size=128)
if(NOT example MATCHES "accuracy change [-+][0-9.]+ \\(PREV component")
  message(FATAL_ERROR "patch_prev_head.py from the prefix printed no accuracy change:\n${example}")
endif()
message(STATUS "${example}")
