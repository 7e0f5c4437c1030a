// The op gradcheck cases of the element-wise ops, made from their rows in
// autograd/derivatives.inc, so a new row is checked without a line here. A unary row is checked
// once per draw on [3, 4] (its domain and parameter), its first draw also on size-1 dims; a
// binary row on equal shapes, b broadcast as a bias row and as positions, size-1 dims, and one
// input passed as both a and b. The op runs through apply(), the code its public function is.

#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/checks/op_checks_util.h"
#include "autograd/derivatives.h"

namespace headlab::op_checks {
namespace {

Var draw(Rng& rng, const Shape& shape, const Domain& domain) {
  switch (domain.kind) {
    case Domain::off_zero:
      return leaf_off_zero(rng, shape, domain.size);
    case Domain::positive:
      return leaf_positive(rng, shape, domain.size);
    case Domain::normal:
      break;
  }
  return leaf(rng, shape, domain.size);
}

// The domain's words ("positive inputs"), after "p = 0.5, " for an op with a parameter; then
// `then` ("size-1 dims"). The plain domain goes unnamed where something else names the case.
std::string variant(const UnaryRule& rule, const Draw& d, const char* then) {
  std::vector<std::string> parts;
  if (rule.param) parts.push_back(fmt::format("{} = {}", rule.param, d.p));
  const std::string words = d.domain.words;
  if (words != kReal.words || (parts.empty() && !then)) parts.push_back(words);
  if (then) parts.push_back(then);
  return fmt::format("{}", fmt::join(parts, ", "));
}

void add_unary(Cases& c, const UnaryRule* rule, const Draw& d, const Shape& shape,
               const char* then) {
  c.add(rule->name, variant(*rule, d, then), [rule, d, shape](uint64_t seed) {
    Rng rng(seed);
    Var x = draw(rng, shape, d.domain);
    return check(seed, [=] { return apply(*rule, x, d.p); }, {x});
  });
}

}  // namespace

void elementwise(Cases& c) {
  for (const BinaryRule* rule : binary_rules()) {
    struct Shapes {
      const char* variant;
      Shape a, b;
    };
    for (const Shapes& s :
         {Shapes{"equal shapes", {2, 3}, {2, 3}}, Shapes{"bias row broadcast", {2, 3, 4}, {4}},
          Shapes{"positions broadcast", {2, 3, 4}, {3, 4}},
          Shapes{"size-1 dims", {1, 3, 1}, {3, 1}},
          Shapes{"numpy broadcast [B,T,1] over [B,T,D]", {2, 3, 4}, {2, 3, 1}},
          Shapes{"numpy broadcast of both", {2, 1, 4}, {3, 1}},
          Shapes{"numpy broadcast of a over b", {4}, {2, 3, 4}}})
      c.add(rule->name, s.variant, [rule, s](uint64_t seed) {
        Rng rng(seed);
        Var a = draw(rng, s.a, rule->a_domain), b = draw(rng, s.b, rule->b_domain);
        return check(seed, [=] { return apply(*rule, a, b); }, {a, b});
      });
    c.add(rule->name, "same input twice", [rule](uint64_t seed) {
      Rng rng(seed);
      Var x = draw(rng, {2, 3}, rule->b_domain);
      return check(seed, [=] { return apply(*rule, x, x); }, {x});
    });
  }
  for (const UnaryRule* rule : unary_rules()) {
    for (const Draw& d : rule->draws) add_unary(c, rule, d, {3, 4}, nullptr);
    if (!rule->draws.empty()) add_unary(c, rule, rule->draws[0], {1, 1, 1}, "size-1 dims");
  }
}

}  // namespace headlab::op_checks
