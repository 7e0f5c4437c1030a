#include "autograd/checks/op_checks.h"

#include <vector>

#include "autograd/checks/op_checks_util.h"
#include "autograd/derivatives.h"
#include "autograd/ops.h"

namespace headlab {
namespace op_checks {

void linear_algebra(Cases& c) {
  struct Mm {
    const char* variant;
    Shape a, b;
    bool ta, tb;
  };
  for (const Mm& m :
       {Mm{"plain", {3, 4}, {4, 5}, false, false}, Mm{"trans_a", {4, 3}, {4, 5}, true, false},
        Mm{"trans_b", {3, 4}, {5, 4}, false, true},
        Mm{"trans_a trans_b", {4, 3}, {5, 4}, true, true},
        Mm{"leading dims", {2, 3, 4}, {4, 2}, false, false},
        Mm{"size-1 dims", {1, 1, 3}, {3, 1}, false, false}})
    c.add("matmul", m.variant, [m](uint64_t seed) {
      Rng rng(seed);
      Var a = leaf(rng, m.a), b = leaf(rng, m.b);
      return check(seed, [=] { return matmul(a, b, m.ta, m.tb); }, {a, b});
    });
  c.add("matmul", "shared input", [](uint64_t seed) {
    Rng rng(seed);
    Var a = leaf(rng, {3, 3});
    return check(seed, [=] { return matmul(a, a, false, true); }, {a});
  });
  for (const Mm& m : {Mm{"plain", {2, 3, 4}, {2, 4, 5}, false, false},
                      Mm{"trans_a", {2, 4, 3}, {2, 4, 5}, true, false},
                      Mm{"trans_b", {2, 3, 4}, {2, 5, 4}, false, true},
                      Mm{"trans_a trans_b", {2, 4, 3}, {2, 5, 4}, true, true},
                      Mm{"4-d size-1 dims", {1, 2, 1, 3}, {1, 2, 3, 2}, false, false}})
    c.add("batched_matmul", m.variant, [m](uint64_t seed) {
      Rng rng(seed);
      Var a = leaf(rng, m.a), b = leaf(rng, m.b);
      return check(seed, [=] { return batched_matmul(a, b, m.ta, m.tb); }, {a, b});
    });
}

// dropout is element-wise but no row of the derivative table: its mask comes from an rng.
void dropout_cases(Cases& c) {
  c.add("dropout", "training", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {4, 5});
    return check(seed,
                 [=] {
                   Rng mask_rng(seed + 7);  // the same mask on every evaluation
                   return dropout(x, 0.4f, mask_rng, true);
                 },
                 {x});
  });
  c.add("dropout", "eval is identity", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3});
    return check(seed,
                 [=] {
                   Rng mask_rng(seed);
                   return dropout(x, 0.4f, mask_rng, false);
                 },
                 {x});
  });
}

void shapes(Cases& c) {
  c.add("sum", "plain", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3});
    return check(seed, [=] { return sum(x); }, {x});
  });
  c.add("mean", "plain", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3, 4});
    return check(seed, [=] { return mean(x); }, {x});
  });
  c.add("reshape", "plain", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 6});
    return check(seed, [=] { return reshape(x, Shape{3, 1, 4}); }, {x});
  });
  for (const Shape& s : {Shape{2, 3, 4}, Shape{3, 1}})
    c.add("transpose", s[-1] == 1 ? "size-1 dims" : "3-d", [s](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, s);
      return check(seed, [=] { return transpose(x); }, {x});
    });
  struct Perm {
    const char* variant;
    Shape x;
    std::vector<int> dims;
  };
  for (const Perm& p : {Perm{"4-d [0, 2, 1, 3]", {2, 3, 2, 4}, {0, 2, 1, 3}},
                        Perm{"3-d cycle [2, 0, 1]", {2, 3, 4}, {2, 0, 1}},
                        Perm{"negative dims [-1, 0]", {3, 4}, {-1, 0}},
                        Perm{"identity, size-1 dims", {1, 3, 1}, {0, 1, 2}},
                        Perm{"5-d reversed", {2, 1, 2, 3, 2}, {4, 3, 2, 1, 0}}})
    c.add("permute", p.variant, [p](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, p.x);
      return check(seed, [=] { return permute(x, p.dims); }, {x});
    });
  c.add("split_heads", "2 heads", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3, 8});
    return check(seed, [=] { return split_heads(x, 2); }, {x});
  });
  c.add("split_heads", "1 head, size-1 dims", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {1, 2, 4});
    return check(seed, [=] { return split_heads(x, 1); }, {x});
  });
  c.add("merge_heads", "2 heads", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 2, 3, 4});
    return check(seed, [=] { return merge_heads(x); }, {x});
  });
  c.add("merge_heads", "size-1 dims", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {1, 1, 2, 3});
    return check(seed, [=] { return merge_heads(x); }, {x});
  });
}

}  // namespace op_checks

std::vector<GradcheckCase> op_gradcheck_cases() {
  using namespace op_checks;
  Cases c;
  for (auto* family : {linear_algebra, elementwise, dropout_cases, shapes, softmaxes,
                       cross_entropy_cases, layer_norm_cases, indexing, linears,
                       add_layer_norm_cases, attention, reductions, joins, selection, broadcasting})
    family(c);
  return c.take();
}

std::vector<std::string> differentiable_op_names() {
  std::vector<std::string> names = {"matmul", "batched_matmul"};
  for (const BinaryRule* rule : binary_rules()) names.push_back(rule->name);
  for (const UnaryRule* rule : unary_rules()) names.push_back(rule->name);
  // clang-format off
  for (const char* name : {"dropout", "sum", "mean", "max", "logsumexp", "cumsum", "reshape",
                           "transpose", "permute", "concat",
                           "slice", "split_heads", "merge_heads", "softmax", "log_softmax",
                           "cross_entropy", "layer_norm", "embedding", "expand", "masked_fill", "where", "einsum",
                           "head_gate", "head_gate_merged", "linear", "add_layer_norm",
                           "self_attention"})
    names.push_back(name);
  // clang-format on
  return names;
}

}  // namespace headlab
