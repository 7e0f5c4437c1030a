// The allocation-counting test binary: doctest's main; bench/alloc_counter.cpp (linked in)
// replaces the global operator new and delete to count every allocation.

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
