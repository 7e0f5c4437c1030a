// The op gradcheck cases of the ops along a dimension (the reductions, concat, slice) and where. max sees
// values whose maximum leads by 0.25 (ties are not differentiable; tests/autograd/test_ops.cpp
// checks the tie rule).

#include <vector>

#include "autograd/checks/op_checks_util.h"
#include "autograd/ops.h"

namespace headlab::op_checks {

void reductions(Cases& c) {
  using Reduce = Var (*)(const Var&, int, bool);
  struct Red {
    const char* name;
    Reduce op;
  };
  struct Dim {
    const char* variant;
    Shape x;
    int dim;
    bool keepdim;
  };
  for (const Red& r : {Red{"sum", &sum}, Red{"mean", &mean}, Red{"max", &max}})
    for (const Dim& d :
         {Dim{"dim 0, keepdim", {2, 3, 4}, 0, true}, Dim{"dim 1", {2, 3, 4}, 1, false},
          Dim{"dim -1 (negative), keepdim", {2, 3, 4}, -1, true},
          Dim{"dim -2 (negative)", {2, 3}, -2, false}, Dim{"a size-1 dim", {3, 1, 2}, 1, false},
          Dim{"1-d input", {5}, 0, false}})
      c.add(r.name, d.variant, [r, d](uint64_t seed) {
        Rng rng(seed);
        Var x = r.op == &max ? leaf_separated(rng, d.x) : leaf(rng, d.x);
        return check(seed, [=] { return r.op(x, d.dim, d.keepdim); }, {x});
      });
  for (const Dim& d :
       {Dim{"dim 1, keepdim", {2, 3, 4}, 1, true}, Dim{"dim -1 (negative)", {2, 3, 4}, -1, false},
        Dim{"a size-1 dim", {3, 1, 2}, 1, false}, Dim{"1-d input", {5}, 0, false}})
    c.add("logsumexp", d.variant, [d](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, d.x, 2.0f);
      return check(seed, [=] { return logsumexp(x, d.dim, d.keepdim); }, {x});
    });
  c.add("logsumexp", "large inputs (offset 100, e^x overflows fp32)", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 4}, 3.0f, 100.0f);
    return check(
        seed, [=] { return logsumexp(x, -1); }, {x}, kWideEps);
  });
  c.add("logsumexp", "a masked entry (-inf)", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 4});
    x.value()[1] = kNegInf;
    return check(seed, [=] { return logsumexp(x, -1); }, {x});
  });
  struct Cum {
    const char* variant;
    Shape x;
    int dim;
  };
  for (const Cum& k : {Cum{"dim 0", {4, 3}, 0}, Cum{"middle dim", {2, 4, 3}, 1},
                       Cum{"dim -1 (negative)", {2, 5}, -1}, Cum{"a size-1 dim", {3, 1}, 1}})
    c.add("cumsum", k.variant, [k](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, k.x);
      return check(seed, [=] { return cumsum(x, k.dim); }, {x});
    });
}

void joins(Cases& c) {
  struct Cat {
    const char* variant;
    std::vector<Shape> shapes;
    int dim;
  };
  for (const Cat& k : {Cat{"dim 0", {{2, 3}, {1, 3}}, 0},
                       Cat{"last dim (-1), three inputs", {{2, 3, 1}, {2, 3, 2}, {2, 3, 4}}, -1},
                       Cat{"middle dim", {{2, 1, 3}, {2, 2, 3}}, 1}, Cat{"one input", {{2, 3}}, 1},
                       Cat{"size-1 dims", {{1, 1}, {1, 1}}, 0}})
    c.add("concat", k.variant, [k](uint64_t seed) {
      Rng rng(seed);
      std::vector<Var> xs;
      for (const Shape& s : k.shapes) xs.push_back(leaf(rng, s));
      return check(
          seed, [=] { return concat(xs, k.dim); }, xs);
    });
  c.add("concat", "same input twice", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3});
    return check(seed, [=] { return concat({x, x}, -1); }, {x});
  });
  struct Slice {
    const char* variant;
    Shape x;
    int dim;
    int64_t begin, end;
  };
  for (const Slice& s :
       {Slice{"middle of the last dim", {2, 3, 5}, -1, 1, 4}, Slice{"dim 0", {4, 3}, 0, 1, 3},
        Slice{"size-1 result", {2, 3, 4}, 1, 2, 3}, Slice{"the whole dim", {2, 3}, 1, 0, 3}})
    c.add("slice", s.variant, [s](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, s.x);
      return check(seed, [=] { return slice(x, s.dim, s.begin, s.end); }, {x});
    });
  c.add("slice", "two overlapping slices of one input", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 5});
    return check(seed, [=] { return mul(slice(x, 1, 0, 3), slice(x, 1, 2, 5)); }, {x});
  });
}

void selection(Cases& c) {
  struct Where {
    const char* variant;
    Shape x, mask;
    int pattern;  // 0: every third element, 1: all true, 2: all false
  };
  for (const Where& w :
       {Where{"mixed mask", {3, 4}, {3, 4}, 0}, Where{"all-true mask", {2, 3}, {2, 3}, 1},
        Where{"all-false mask", {2, 3}, {2, 3}, 2},
        Where{"broadcast mask [B,1,S]", {2, 3, 4}, {2, 1, 4}, 0}})
    c.add("where", w.variant, [w](uint64_t seed) {
      Rng rng(seed);
      Var a = leaf(rng, w.x), b = leaf(rng, w.x);
      Tensor mask = Tensor::empty(w.mask);
      for (int64_t i = 0; i < mask.numel(); ++i)
        mask[i] = w.pattern == 1 || (w.pattern == 0 && i % 3 == 0) ? 1.0f : 0.0f;
      return check(seed, [=] { return where(mask, a, b); }, {a, b});
    });
  c.add("where", "same input twice", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3});
    Tensor mask = Tensor::from({2, 3}, {1, 0, 1, 0, 0, 1});
    return check(seed, [=] { return where(mask, x, x); }, {x});
  });
}

}  // namespace headlab::op_checks
