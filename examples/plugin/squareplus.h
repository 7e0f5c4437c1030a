#pragma once
// Squareplus (Barron 2021), a smooth ReLU without exp: (x + sqrt(x^2 + b)) / 2 for b > 0,
// built from headlab's ops, so its backward comes for free. Registered as the op "squareplus"
// with its gradcheck cases (plugin.cpp): `headlab gradcheck --plugin P --only squareplus`.

#include <span>
#include <vector>

#include <headlab/autograd/op_registry.h>

namespace example {

headlab::Var squareplus(const headlab::Var& x, float b);
// The function gradcheck calls: squareplus of the case's one input with the case's option "b".
headlab::Var squareplus_op(std::span<const headlab::Var> inputs, const headlab::OpCase& c);
// Several cases: shapes with size-1 dims, and b large and small (the curve sharpens as b -> 0).
std::vector<headlab::OpCase> squareplus_cases();

}  // namespace example
