// A plugin whose op has a wrong backward: forward x^2, but its tape gives 2x + 1 (x enters once
// as an input and once as a constant with the same values). It loads; `headlab gradcheck` must
// fail it with exit 4 (kGradcheckFailed), naming the op and each case.
#include <span>

#include "autograd/ops.h"
#include "train/plugins/plugin.h"

namespace {

headlab::Var wrong_square(std::span<const headlab::Var> in, const headlab::OpCase&) {
  const headlab::Var& x = in[0];
  const headlab::Var same_values(x.value(), false);  // shares x's storage: no gradient
  return headlab::add(headlab::mul(x, x), headlab::sub(x, same_values));
}

}  // namespace

HEADLAB_PLUGIN(registry) {
  registry.add_op("test_wrong_backward", wrong_square,
                  {{"plain [2, 3]", {{2, 3}}}, {"size-1 dims [1, 4]", {{1, 4}}}});
}
