#pragma once
// headlab's version, the one place it is written: the root CMakeLists.txt reads it from here
// for project(VERSION), the shared library's version and SONAME (libheadlab.so.MAJOR.MINOR),
// the CMake package's version file and headlab.pc. A plugin compiles these values in and the
// loader compares them with the library's (train/plugins/plugin.h).

#define HEADLAB_VERSION_MAJOR 0
#define HEADLAB_VERSION_MINOR 2
#define HEADLAB_VERSION_PATCH 0
#define HEADLAB_VERSION "0.2.0"
