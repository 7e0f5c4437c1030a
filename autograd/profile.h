#pragma once
// The profiling hook: an observer that sees, on the thread that runs a step, where the step's
// time goes op by op (`headlab bench --profile` installs one; the library itself never times and
// never prints). Events:
//
//   forward_done(op)             an op's forward has finished (from record(), whether or not the
//                                op was recorded, so eval-mode forwards are seen too)
//   backward_begin / _end(op)    a tape entry's backward closure runs; op is the entry's name
//   region_begin / _end(name)    a named stretch of work outside the ops: ProfileRegion marks the
//                                optimizer step, zero_grad and gradient clipping
//
// Ops have no begin event (several check or compute before they allocate their output), so an
// observer charges each event with the time since the previous one: an op's forward then runs
// from the end of the previous event to its own end, the layer code between two ops included.
//
// With no observer installed (the default) every hook costs one relaxed atomic load and a
// branch. Install and remove it while no other thread computes; it must outlive its
// installation.

#include <atomic>

namespace headlab {

enum class ProfileEvent { forward_done, backward_begin, backward_end, region_begin, region_end };

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void on_event(ProfileEvent event, const char* name) = 0;
};

// Null removes the observer.
void set_op_observer(OpObserver* observer);

namespace detail {
extern std::atomic<OpObserver*> g_op_observer;
}  // namespace detail

inline void profile_event(ProfileEvent event, const char* name) {
  if (OpObserver* o = detail::g_op_observer.load(std::memory_order_relaxed)) [[unlikely]]
    o->on_event(event, name);
}

// RAII: a named region (region_begin on construction, region_end on destruction). `name` must
// outlive the observer's use of it (a string literal).
class ProfileRegion {
 public:
  explicit ProfileRegion(const char* name) : name_(name) {
    profile_event(ProfileEvent::region_begin, name_);
  }
  ~ProfileRegion() { profile_event(ProfileEvent::region_end, name_); }
  ProfileRegion(const ProfileRegion&) = delete;
  ProfileRegion& operator=(const ProfileRegion&) = delete;

 private:
  const char* name_;
};

}  // namespace headlab
