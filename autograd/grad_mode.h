#pragma once
// Grad mode: whether ops record onto the tape. Thread-local; on by default.

namespace headlab {

bool grad_enabled();

// RAII: turns recording off in this thread for its lifetime (evaluation, optimizer steps).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace headlab
