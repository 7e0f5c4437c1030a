#pragma once
// Counts calls to the global operator new (every form) in this test binary, from every thread
// and every library that allocates through C++'s operator new (oneDNN included). main.cpp
// replaces the operators.

#include <cstdint>

namespace headlab::test {

int64_t operator_new_calls();

}  // namespace headlab::test
