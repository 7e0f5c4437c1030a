#pragma once
// Counts calls to the global operator new (every form) in the headlab executable, from every
// thread and every library that allocates through C++'s operator new (oneDNN, spdlog, ...).
// alloc_counter.cpp replaces the operators; the count is one relaxed atomic increment per call,
// so the CLI pays nothing measurable for it. `headlab bench --preset` reports the calls per
// training step (zero once warm).

#include <cstdint>

namespace headlab::cli {

int64_t operator_new_calls();

}  // namespace headlab::cli
