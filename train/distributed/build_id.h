#pragma once
// The GNU build ID of the running executable: the linker's hash of the binary, so two processes
// with the same build ID run the same headlab build. Ranks compare it at start-up
// (docs/distributed.md).

#include <string>

namespace headlab {

// Hex digits of the main program's NT_GNU_BUILD_ID note, or "" when it has none.
std::string executable_build_id();

}  // namespace headlab
