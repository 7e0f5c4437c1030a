#pragma once
// The gradcheck cases of every differentiable op in ops.h (kind "op"). Each case is named by the
// op's function name (matmul, softmax, cross_entropy, ...) with a variant for the situation it
// covers: transposes, broadcasting, size-1 dims, a shared input, masked rows with -inf (fully
// masked rows included), large logits, ignored targets. Inputs are small and drawn from the
// case's seed; the projection direction too.

#include <string>
#include <vector>

#include "autograd/gradcheck.h"

namespace headlab {

std::vector<GradcheckCase> op_gradcheck_cases();

// The names of the differentiable ops in ops.h, in declaration order; every one has a case.
std::vector<std::string> differentiable_op_names();

}  // namespace headlab
