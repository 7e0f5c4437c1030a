#pragma once
// Test helper: selects a kernel backend for a scope and restores the previous one.

#include <array>

#include "core/kernels/kernels.h"

namespace headlab::test {

class BackendScope {
 public:
  explicit BackendScope(Backend b) : previous_(current_backend()) { set_backend(b); }
  ~BackendScope() { set_backend(previous_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  Backend previous_;
};

inline constexpr std::array<Backend, 3> kAllBackends = {Backend::reference, Backend::blas,
                                                        Backend::onednn};

}  // namespace headlab::test
