// The op gradcheck cases of the broadcasting ops beyond the binary rows (expand, where and
// masked_fill over shapes of other ranks) and of einsum: new leading dims, size-1 dims on either
// side, masks of lower rank, contractions, batch letters, summed private letters, outputs in
// another order.

#include <string>
#include <vector>

#include "autograd/checks/op_checks_util.h"
#include "autograd/ops.h"

namespace headlab::op_checks {
namespace {

// 0/1 entries, every third one set: both branches of where and masked_fill get elements.
Tensor every_third(const Shape& shape, int64_t offset = 0) {
  Tensor mask = Tensor::empty(shape);
  for (int64_t i = 0; i < mask.numel(); ++i) mask[i] = (i + offset) % 3 == 0 ? 1.0f : 0.0f;
  return mask;
}

}  // namespace

void broadcasting(Cases& c) {
  struct Expand {
    const char* variant;
    Shape x, to;
  };
  for (const Expand& e : {Expand{"[B,T,1] to [B,T,D]", {2, 3, 1}, {2, 3, 4}},
                          Expand{"new leading dims", {4}, {2, 3, 4}},
                          Expand{"size-1 dims on both ends", {1, 3, 1}, {2, 3, 2}},
                          Expand{"middle dim", {2, 1, 3}, {2, 4, 3}}})
    c.add("expand", e.variant, [e](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, e.x);
      return check(seed, [=] { return expand(x, e.to); }, {x});
    });
  struct Where {
    const char* variant;
    Shape mask, a, b;
  };
  for (const Where& w : {Where{"b of lower rank", {2, 3}, {2, 3}, {3}},
                         Where{"a [B,T,1] over b [B,T,D]", {2, 3, 4}, {2, 3, 1}, {2, 3, 4}},
                         Where{"mask [T,1] grows a and b", {3, 1}, {1, 4}, {4}},
                         Where{"all three broadcast", {1, 3, 1}, {2, 1, 4}, {2, 3, 1}}})
    c.add("where", w.variant, [w](uint64_t seed) {
      Rng rng(seed);
      Var a = leaf(rng, w.a), b = leaf(rng, w.b);
      Tensor mask = every_third(w.mask, 1);
      return check(seed, [=] { return where(mask, a, b); }, {a, b});
    });
  struct Fill {
    const char* variant;
    Shape x, mask;
  };
  for (const Fill& f : {Fill{"mask [S] of lower rank", {2, 3, 4}, {4}},
                        Fill{"mask [T,1] of lower rank", {2, 3, 4}, {3, 1}}})
    c.add("masked_fill", f.variant, [f](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, f.x);
      Tensor mask = every_third(f.mask);
      return check(seed, [=] { return masked_fill(x, mask, -1.5f); }, {x});
    });
  struct Einsum {
    const char* equation;
    Shape a, b;
  };
  for (const Einsum& e :
       {Einsum{"ij,jk->ik", {3, 4}, {4, 2}}, Einsum{"bhtd,bhsd->bhts", {2, 2, 3, 4}, {2, 2, 5, 4}},
        Einsum{"bhts,bhsd->bthd", {1, 2, 3, 4}, {1, 2, 4, 3}},
        Einsum{"bij,bjk->kbi", {2, 3, 4}, {2, 4, 2}}, Einsum{"ij,ij->", {2, 3}, {2, 3}},
        Einsum{"i,j->ji", {3}, {4}}, Einsum{"ijk,jl->il", {2, 3, 2}, {3, 4}},
        Einsum{"ij,jk", {2, 3}, {3, 2}}})
    c.add("einsum", e.equation, [e](uint64_t seed) {
      Rng rng(seed);
      Var a = leaf(rng, e.a), b = leaf(rng, e.b);
      return check(seed, [=] { return einsum(e.equation, a, b); }, {a, b});
    });
  c.add("einsum", "one input as both operands (ij,kj->ik)", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {3, 4});
    return check(seed, [=] { return einsum("ij,kj->ik", x, x); }, {x});
  });
}

}  // namespace headlab::op_checks
