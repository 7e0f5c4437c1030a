# "install: headlab installs into a temporary prefix, pointing nowhere into the tree" (the
# fixture of the tests that use the installed package): cmake --install BUILD_DIR --prefix
# PREFIX, then checks the layout and that no installed file, text or binary, names the source or
# the build tree.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DPREFIX=... [-DSANITIZED=1] -P install_prefix.cmake
# Under the sanitizers the binaries are exempt from the scan: GCC 12's AddressSanitizer records
# each translation unit's absolute source path in its global-variable descriptors, which
# -ffile-prefix-map does not rewrite. Text files (CMake package, headlab.pc, headers) are still
# scanned, and the release build scans everything.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require_vars(BUILD_DIR SOURCE_DIR PREFIX)

file(REMOVE_RECURSE ${PREFIX})
run(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

foreach(path bin/headlab include/headlab/layers/module.h include/headlab/core/version.h
    include/headlab/train/plugins/plugin.h include/headlab/train/plugins/loader.h
    include/headlab/headlab_headers_fingerprint.h share/headlab/examples/plugin/CMakeLists.txt
    share/headlab/examples/plugin/plugin.toml share/headlab/examples/custom_layer/CMakeLists.txt)
  if(NOT EXISTS ${PREFIX}/${path})
    message(FATAL_ERROR "not installed: ${PREFIX}/${path}")
  endif()
endforeach()
file(GLOB_RECURSE libs ${PREFIX}/lib*/libheadlab.so)
file(GLOB_RECURSE configs ${PREFIX}/lib*/headlabConfig.cmake ${PREFIX}/lib*/headlabConfigVersion.cmake
  ${PREFIX}/lib*/headlab.pc)
list(LENGTH libs n_libs)
list(LENGTH configs n_configs)
if(NOT n_libs EQUAL 1 OR NOT n_configs EQUAL 3)
  message(FATAL_ERROR "expected libheadlab.so, headlabConfig.cmake, its version file and "
                      "headlab.pc under ${PREFIX}/lib*, found: ${libs} ${configs}")
endif()
if(EXISTS ${PREFIX}/share/headlab/examples/plugin/ctest_run.cmake)
  message(FATAL_ERROR "installed a CTest driver: share/headlab/examples/plugin/ctest_run.cmake")
endif()
foreach(private core/kernels/onednn_cache.h train/config/toml_values.h train/cli/commands.h)
  if(EXISTS ${PREFIX}/include/headlab/${private})
    message(FATAL_ERROR "installed a private header: ${private}")
  endif()
endforeach()

# Nothing installed names the trees (the build tree may lie inside the source tree).
string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" source_re "${SOURCE_DIR}")
string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" build_re "${BUILD_DIR}")
file(GLOB_RECURSE installed LIST_DIRECTORIES false ${PREFIX}/*)
list(LENGTH installed n_files)
foreach(file ${installed})
  if(IS_SYMLINK ${file})
    continue()
  endif()
  if(SANITIZED)
    file(READ ${file} magic LIMIT 4 HEX)
    if(magic STREQUAL "7f454c46")
      continue()
    endif()
  endif()
  file(STRINGS ${file} hits REGEX "${source_re}|${build_re}")
  if(hits)
    list(GET hits 0 first)
    message(FATAL_ERROR "${file} points into the tree: ${first}")
  endif()
endforeach()
message(STATUS "installed ${n_files} files into ${PREFIX}; none names ${SOURCE_DIR} or ${BUILD_DIR}")
