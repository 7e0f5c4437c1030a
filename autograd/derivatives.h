#pragma once
// The element-wise ops as rows of one table (autograd/derivatives.inc), as PyTorch's
// derivatives.yaml and tinygrad's gradient rules keep them: each row gives an op's forward, its
// derivative and where gradcheck draws its inputs, and the public function of ops.h, the tape
// entry and the gradcheck cases (autograd/checks/op_checks_elementwise.cpp) all come from it.
// Internal to autograd: callers use ops.h.
//
// A row is plain data (a name, loop functions, draws), so one built elsewhere at run time (a
// plugin's op) goes through apply() and the same checks as the table's own.

#include <cstdint>
#include <span>

#include "autograd/var.h"

namespace headlab {

// Where gradcheck draws an input: away from kinks, poles and the edges of an op's domain.
struct Domain {
  enum Kind : uint8_t {
    normal,    // N(0, size^2)
    off_zero,  // N(0, 1) pushed out to |x| >= size: a kink (relu) or a pole (1/b) at 0
    positive,  // uniform in [size, size + 2): log, sqrt, non-integer powers
  };
  Kind kind = normal;
  float size = 1.0f;
  const char* words = "plain";  // the gradcheck variant that draws from it
};
inline constexpr Domain kReal{};
inline constexpr Domain kWideReal{Domain::normal, 2.0f};
inline constexpr Domain kSaturating{Domain::normal, 6.0f, "saturated (|x| up to ~20)"};
inline constexpr Domain kPositive{Domain::positive, 0.5f, "positive inputs"};
inline constexpr Domain kOffKink{Domain::off_zero, 0.1f, "away from the kink"};
inline constexpr Domain kNonzero{Domain::off_zero, 0.5f, "away from 0"};

// One gradcheck case of a unary op: x from `domain`, at parameter p (ignored by ops without one).
struct Draw {
  // Implicit, so a row without a parameter lists bare domains.
  constexpr Draw(Domain d, float param = 0.0f) : domain(d), p(param) {}
  Domain domain;
  float p;
};

// y = f(x, p) with y [n] and x [n], p the op's scalar parameter (pow's exponent, scale's factor;
// 0 for ops that take none).
struct UnaryRule {
  const char* name;
  // Writes y[0, n) from x.
  void (*forward)(const float* x, float* y, int64_t n, float p);
  // Writes dx[0, n) = g f'(x) from x, y and g. Null for a linear op (f' = p): its backward then
  // adds p g straight into x's gradient, with no temporary.
  void (*backward)(const float* x, const float* y, const float* g, float* dx, int64_t n, float p);
  // Throws for a parameter outside the op's domain, naming the op; null: every p is fine.
  void (*check)(const char* op, float p);
  const char* param;  // the parameter's name in ops.h ("p"), or null when the op takes none
  // Each draw is gradchecked on [3, 4], the first also on size-1 dims.
  std::span<const Draw> draws;
};

// What a binary op's backward sees: out = f(a, b) with b broadcast over a as a suffix of its
// shape (b's nb values repeat n / nb times). a and b may be the same Var.
struct BinaryGrad {
  const Var& a;
  const Var& b;
  const Tensor& y;  // the output's value [a's shape]
  const Tensor& g;  // its gradient [a's shape]
  int64_t n, nb;
};

struct BinaryRule {
  const char* name;
  // Writes y[0, n) from a [n] and b [nb] (element i pairs with b[i % nb]).
  void (*forward)(const float* a, int64_t n, const float* b, int64_t nb, float* y);
  // Adds the contributions to a's and b's gradients (through grad::add, which skips an input that
  // needs none).
  void (*backward)(const BinaryGrad& in);
  // Where gradcheck draws a and b; an input passed as both is drawn from b's domain, which must
  // lie inside a's.
  Domain a_domain, b_domain;
};

// The table's rows, in its order.
std::span<const UnaryRule* const> unary_rules();
std::span<const BinaryRule* const> binary_rules();

// The op of a row: checks x is defined and p (rule.check), runs the forward, and records the
// backward when x requires a gradient. y has x's shape. Throws headlab::Error naming the op.
Var apply(const UnaryRule& rule, const Var& x, float p = 0.0f);
// The same for a binary op, with NumPy broadcasting: when b's shape is a suffix of a's (or equal)
// the rule runs on a and b directly (the output has a's shape); otherwise both are first
// repeated to their broadcast shape (dims aligned from the back, each pair equal or one of them
// 1; else throws naming the op and both shapes), each repeat a tape entry whose backward sums
// the gradient over the repeated dims.
Var apply(const BinaryRule& rule, const Var& a, const Var& b);

}  // namespace headlab
