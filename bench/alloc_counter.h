#pragma once
// Counts calls to the global operator new (every form) in a program that calls
// operator_new_calls() (which links alloc_counter.cpp, the replacement operators, into it): the
// headlab executable and the allocation tests. Every thread and every library that allocates
// through C++'s operator new (oneDNN, spdlog, ...) is counted; the count is one relaxed atomic
// increment per call, so the CLI pays nothing measurable for it. `headlab bench --preset`
// reports the calls per training step (zero once warm).

#include <cstdint>

namespace headlab::bench {

int64_t operator_new_calls();

}  // namespace headlab::bench
