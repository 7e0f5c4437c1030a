# "install: an outside project builds against the installed package": configures
# tests/install/outside with CMAKE_PREFIX_PATH=PREFIX alone (find_package(headlab 0.2 CONFIG
# REQUIRED)), builds it (every installed header included once) and runs it: it must run on
# PREFIX's libheadlab.so. Then the same program through pkg-config (headlab.pc), and the
# installed CLI.
#   cmake -DSOURCE_DIR=<this folder> -DBINARY_DIR=... -DPREFIX=... -DGENERATOR=...
#     -DCXX_COMPILER=... [-DBUILD_TYPE= -DCXX_FLAGS= -DLINK_FLAGS= -DLAUNCHER=] -P outside.cmake
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
require_vars(SOURCE_DIR BINARY_DIR PREFIX GENERATOR CXX_COMPILER)
file(REMOVE_RECURSE ${BINARY_DIR})
file(MAKE_DIRECTORY ${BINARY_DIR})

outside_configure(configure ${SOURCE_DIR}/outside ${BINARY_DIR}/cmake)
run(COMMAND ${configure})
run(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR}/cmake)
run(OUT out COMMAND ${BINARY_DIR}/cmake/outside)
expect_in("${out}" "headlab 0.2.0\nlibrary ${PREFIX}/" "the outside program (CMake)")
expect_in("${out}" "grad yes" "the outside program (CMake)")

# pkg-config: the same main.cpp, compiled and linked by the flags headlab.pc gives.
file(GLOB_RECURSE pc ${PREFIX}/lib*/headlab.pc)
get_filename_component(pc_dir ${pc} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(OUT cflags COMMAND pkg-config --cflags headlab)
run(OUT libs COMMAND pkg-config --libs headlab)
run(OUT libdir COMMAND pkg-config --variable=libdir headlab)
separate_arguments(flags UNIX_COMMAND "${CXX_FLAGS} ${cflags} ${libs} ${LINK_FLAGS}")
string(STRIP "${libdir}" libdir)
run(COMMAND ${LAUNCHER} ${CXX_COMPILER} -std=c++20 ${SOURCE_DIR}/outside/main.cpp ${flags} -ldl
  -Wl,-rpath,${libdir} -o ${BINARY_DIR}/outside_pc)
run(OUT out COMMAND ${BINARY_DIR}/outside_pc)
expect_in("${out}" "headlab 0.2.0\nlibrary ${PREFIX}/" "the outside program (pkg-config)")

# The installed CLI runs on the installed library.
run(OUT version COMMAND ${PREFIX}/bin/headlab --version)
expect_in("${version}" "0.2.0" "headlab --version")
run(OUT ldd COMMAND ldd ${PREFIX}/bin/headlab)
string(REGEX MATCH "libheadlab\\.so[^\n]*" line "${ldd}")
expect_in("${line}" "=> ${PREFIX}/" "ldd bin/headlab")
