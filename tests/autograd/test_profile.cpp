// The profiling hook (autograd/profile.h): the events an observer sees for a forward, its
// backward and a region, in order; nothing without an observer.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/profile.h"
#include "autograd/tape.h"

using namespace headlab;

namespace {

struct Recorder final : OpObserver {
  std::vector<std::string> events;
  void on_event(ProfileEvent e, const char* name) override {
    static const char* const kinds[] = {"done", "bwd<", "bwd>", "region<", "region>"};
    events.push_back(std::string(kinds[static_cast<int>(e)]) + " " + name);
  }
};

// Removes the observer at scope exit, so a failed check leaves no dangling pointer installed.
struct Installed {
  explicit Installed(OpObserver& o) { set_op_observer(&o); }
  ~Installed() { set_op_observer(nullptr); }
};

}  // namespace

TEST_CASE("autograd: the profiling hook sees each forward, each backward entry and regions") {
  Var x(Tensor::from({2, 2}, {1, -2, 3, 4}), true);
  Var w(Tensor::from({2, 2}, {0.5, 1, -1, 2}), true);
  Recorder r;
  {
    Installed on(r);
    Var loss = sum(relu(matmul(x, w)));
    loss.backward();
    ProfileRegion region("update");
  }
  const std::vector<std::string> expected = {
      "done matmul", "done relu",   "done sum",    "bwd< sum",       "bwd> sum",      "bwd< relu",
      "bwd> relu",   "bwd< matmul", "bwd> matmul", "region< update", "region> update"};
  CHECK(r.events == expected);
}

TEST_CASE("autograd: the profiling hook sees forwards without grad, and nothing once removed") {
  Var x(Tensor::from({1, 3}, {0.5, 1, 2}), true);
  Recorder r;
  {
    Installed on(r);
    NoGradGuard no_grad;
    cross_entropy(x, std::vector<int32_t>{1});  // returns before record() without a tape
    relu(x);
  }
  CHECK(r.events == std::vector<std::string>{"done cross_entropy", "done relu"});
  sum(relu(x)).backward();
  CHECK(r.events.size() == 2);
}
