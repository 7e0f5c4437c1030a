# libheadlab.so and the headlab package, for programs and plugins outside the tree.
#
#   headlab_shared (headlab::headlab, file libheadlab.so.MAJOR.MINOR.PATCH, SONAME
#   libheadlab.so.MAJOR.MINOR): the objects of every product module (all but bench/) in one
#   shared library. The modules are compiled once, as position-independent static libraries
#   (cmake/HeadlabModules.cmake); this target only links their objects, with the union of the
#   modules' third-party links (PUBLIC stays public: fmt and nlohmann_json, which the headers
#   include).
#
# Installed (`cmake --install build --prefix P`):
#   P/bin/headlab                          RUNPATH $ORIGIN/<bin to lib> and the OpenMP OpenBLAS
#   P/<libdir>/libheadlab.so*              RUNPATH the OpenMP OpenBLAS (a system directory)
#   P/include/headlab/<module dirs>/*.h    the source layout, minus headers that include a
#                                          package the library links privately
#   P/include/headlab/headlab_headers_fingerprint.h   the headers' fingerprint (plugin handshake)
#   P/<libdir>/cmake/headlab/              headlabConfig.cmake, its version file and targets:
#                                          find_package(headlab 0.2 CONFIG REQUIRED)
#   P/<libdir>/pkgconfig/headlab.pc        relocatable (prefix from ${pcfiledir})
#   P/share/headlab/examples/              examples/custom_layer and examples/plugin
# headlab::headlab carries both P/include and P/include/headlab as include directories:
# consumers write <headlab/layers/module.h>, and the headers keep including each other as
# "core/tensor.h", unchanged from the source (so a plugin sees exactly the headers the library
# was built from; the price is that the top-level names core/, autograd/, layers/, optim/ and
# train/ are taken in a consumer's include path: docs/extending.md says so).
#
# The build tree is a package too (headlab_DIR=<build dir>; examples/custom_layer uses it), where
# <headlab/...> works as well (<build>/include/headlab links to the source tree).

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed headers that include a package the library links only privately (oneDNN, toml++):
# internal to their module, and a consumer could not compile them.
set(HEADLAB_PRIVATE_HEADERS core/kernels/onednn_cache.h train/config/toml_values.h)

get_property(headlab_package_modules GLOBAL PROPERTY HEADLAB_MODULES)
# The benchmark harness and the process world (MPI) are linked into the CLI only.
list(REMOVE_ITEM headlab_package_modules bench train_world)
set(headlab_objects)
set(headlab_public_libs)
set(headlab_private_libs)
set(headlab_header_dirs)
foreach(m ${headlab_package_modules})
  list(APPEND headlab_objects $<TARGET_OBJECTS:headlab_${m}>)
  get_property(public GLOBAL PROPERTY HEADLAB_MODULE_${m}_PUBLIC)
  get_property(private GLOBAL PROPERTY HEADLAB_MODULE_${m}_PRIVATE)
  get_property(dirs GLOBAL PROPERTY HEADLAB_MODULE_${m}_DIRS)
  list(APPEND headlab_public_libs ${public})
  list(APPEND headlab_private_libs ${private})
  list(APPEND headlab_header_dirs ${dirs})
endforeach()
list(REMOVE_DUPLICATES headlab_public_libs)
list(REMOVE_DUPLICATES headlab_private_libs)
list(REMOVE_ITEM headlab_private_libs ${headlab_public_libs})

add_library(headlab_shared SHARED ${headlab_objects})
add_library(headlab::headlab ALIAS headlab_shared)
set_target_properties(headlab_shared PROPERTIES
  OUTPUT_NAME headlab
  EXPORT_NAME headlab
  LINKER_LANGUAGE CXX
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  INSTALL_RPATH "${HEADLAB_OPENBLAS_DIR}")
target_compile_features(headlab_shared PUBLIC cxx_std_20)
# In the build tree, <headlab/...> resolves through include/headlab, a link to the source tree.
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/include)
file(CREATE_LINK ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/include/headlab SYMBOLIC)
target_include_directories(headlab_shared PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated/public>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/headlab>)
target_link_libraries(headlab_shared PUBLIC ${headlab_public_libs} PRIVATE ${headlab_private_libs})
if(NOT HEADLAB_SANITIZE AND NOT HEADLAB_FUZZ)  # the sanitizer runtimes resolve at load time
  target_link_options(headlab_shared PRIVATE LINKER:--no-undefined)
endif()

# The CLI, installed beside the library it links.
function(headlab_install_cli target)
  file(RELATIVE_PATH bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(${target} PROPERTIES
    INSTALL_RPATH "$ORIGIN/${bin_to_lib};${HEADLAB_OPENBLAS_DIR}")
  install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()

install(TARGETS headlab_shared EXPORT headlabTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(headlab_public_headers)
foreach(dir ${headlab_header_dirs})
  file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${dir}/*.h)
  list(REMOVE_ITEM headers ${HEADLAB_PRIVATE_HEADERS})
  list(APPEND headlab_public_headers ${headers})
  if(headers)
    list(TRANSFORM headers PREPEND ${PROJECT_SOURCE_DIR}/)
    install(FILES ${headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headlab/${dir})
  endif()
endforeach()

# The fingerprint of those headers (cmake/HeadersFingerprint.cmake), recomputed at every build
# into <build>/generated/public/headlab_headers_fingerprint.h, which plugin.h includes: the
# library compiles its value in, a plugin its own, and the handshake compares the two. Installed
# beside the headers (P/include/headlab/), with the list of headers, so that headlabConfig.cmake
# hashes the headers a consumer really compiles against (a copy edited after the install too).
set(headlab_public_generated ${PROJECT_BINARY_DIR}/generated/public)
set(headlab_fingerprint_header ${headlab_public_generated}/headlab_headers_fingerprint.h)
list(JOIN headlab_public_headers "\n" headlab_header_lines)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/headlab_public_headers.txt
  CONTENT "${headlab_header_lines}\n" @ONLY)
add_custom_target(headlab_headers_fingerprint
  COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}
    -DHEADER_LIST=${PROJECT_BINARY_DIR}/headlab_public_headers.txt
    -DOUTPUT=${headlab_fingerprint_header} -P ${PROJECT_SOURCE_DIR}/cmake/HeadersFingerprint.cmake
  BYPRODUCTS ${headlab_fingerprint_header})
# train/plugins compiles plugin.h (the loader's side of the comparison); the CLI and the bench
# harness see it through train_plugins.
target_include_directories(headlab_train_plugins PUBLIC $<BUILD_INTERFACE:${headlab_public_generated}>)
add_dependencies(headlab_train_plugins headlab_headers_fingerprint)
install(FILES ${headlab_fingerprint_header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headlab)

# The example projects (examples/custom_layer, examples/plugin), to copy and build against the
# installed package; their CTest drivers (ctest_run.cmake) stay in the source tree.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/headlab/examples
  PATTERN ctest_run.cmake EXCLUDE)
# The runnable configs beside them: examples/python/ trains the flagship from the prefix alone.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/headlab/configs)

set(headlab_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/headlab)
install(EXPORT headlabTargets NAMESPACE headlab:: DESTINATION ${headlab_cmake_dir})
# Pre-1.0, a minor version may change the ABI (hence the SONAME MAJOR.MINOR): find_package(headlab
# 0.2) accepts 0.2.x only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/headlabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
configure_file(${PROJECT_SOURCE_DIR}/cmake/headlabConfig.cmake.in
  ${PROJECT_BINARY_DIR}/headlabConfig.cmake COPYONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/HeadersFingerprint.cmake
  ${PROJECT_BINARY_DIR}/HeadersFingerprint.cmake COPYONLY)
# headlabHeaders.cmake: where the public headers are and which they are, for the config's
# fingerprint. The build tree's names the source tree; the installed one a path relative to
# itself.
string(REPLACE ";" "\n  " headlab_header_list "${headlab_public_headers}")
file(WRITE ${PROJECT_BINARY_DIR}/headlabHeaders.cmake
  "set(headlab_headers_root \"${PROJECT_SOURCE_DIR}\")\n"
  "set(headlab_headers_recorded \"${headlab_fingerprint_header}\")\n"
  "set(headlab_public_headers\n  ${headlab_header_list})\n")
file(RELATIVE_PATH headlab_cmake_to_include ${CMAKE_INSTALL_PREFIX}/${headlab_cmake_dir}
  ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}/headlab)
file(WRITE ${PROJECT_BINARY_DIR}/install/headlabHeaders.cmake
  "set(headlab_headers_root \"\${CMAKE_CURRENT_LIST_DIR}/${headlab_cmake_to_include}\")\n"
  "set(headlab_headers_recorded \"\${headlab_headers_root}/headlab_headers_fingerprint.h\")\n"
  "set(headlab_public_headers\n  ${headlab_header_list})\n")
install(FILES ${PROJECT_BINARY_DIR}/headlabConfig.cmake
  ${PROJECT_BINARY_DIR}/headlabConfigVersion.cmake ${PROJECT_BINARY_DIR}/HeadersFingerprint.cmake
  ${PROJECT_BINARY_DIR}/install/headlabHeaders.cmake DESTINATION ${headlab_cmake_dir})

file(RELATIVE_PATH headlab_pc_to_prefix ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
  ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" headlab_pc_to_prefix "${headlab_pc_to_prefix}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/headlab.pc.in ${PROJECT_BINARY_DIR}/headlab.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/headlab.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The build-tree package: find_package(headlab CONFIG) with headlab_DIR=<this build dir>.
export(EXPORT headlabTargets NAMESPACE headlab:: FILE ${PROJECT_BINARY_DIR}/headlabTargets.cmake)
