#pragma once
// Gradcheck: compares the tape's gradient of a function with central finite differences, for
// every element of every Var it depends on. Public API: use it on your own ops and layers.
//
//   Var x(Tensor::from({2, 3}, {...}), true);
//   GradcheckResult r = gradcheck([&] { return softmax(x); }, {x});
//   if (!r.pass) std::puts(r.worst.c_str());
//
// Method. The output y of f (any shape) is projected on a fixed random direction u (N(0, 1)
// draws from options.seed): L = sum_i u_i y_i, computed in double from the fp32 outputs.
// Analytic: one forward with recording and y.backward(u) gives dL/dx for every input element.
// Numeric: for each element x_k, f is re-evaluated (without recording) with x_k moved by +-h,
// for h = eps and h = eps / 2; each central difference D(s) = (L+ - L-) / (2 s) uses the
// half-width s realised in fp32 (exact in double), so inputs far from 1 in magnitude keep an
// exact step. D(s) = f' + c s^2 + O(s^4), and Richardson extrapolation
// (s1^2 D(s2) - s2^2 D(s1)) / (s1^2 - s2^2) removes the s^2 term. The element is restored bit
// for bit afterwards.
//
// Error. For analytic a and numeric n: rel = |a - n| / max(|a|, |n|, atol / rtol); the check
// passes when every rel <= rtol, i.e. |a - n| <= max(rtol * |a|, rtol * |n|, atol). A NaN on
// either side fails. Non-finite input elements (a -inf that a mask filled in) are skipped.
//
// Defaults, for fp32 and O(1) inputs and outputs. Each fp32 output carries rounding of about
// 6e-8 |y| (more where a kernel approximates exp or log), and a difference divides it by the
// step: about 6e-8 |y| sqrt(m) / eps in the derivative when the element moves m outputs. With
// truncation cut to O(eps^4) by the extrapolation, a wide step pays: eps = 1e-2 (steps of 1e-2
// and 5e-3). atol = 1e-3 absorbs the remaining noise for gradients near 0; rtol = 1e-2 sits 3
// to 10 times above the worst error a correct op shows on the cases in op_checks over 40 seeds
// (about 1.5e-3 on the reference and blas backends, 3.4e-3 on onednn, whose logsoftmax is the
// noisiest; those cases use eps = 4e-2). Functions with kinks (relu at 0) need every kink more
// than eps away from where the inputs put it, or a smaller eps.
//
// Requirements. Each Var in `wrt` must be a defined leaf with requires_grad (an input or a
// parameter); f must be deterministic (re-seed any Rng inside f) and compute its output from
// the current values of `wrt`. f is recorded on a private tape of this thread (TapeScope), so
// the caller's current tape is left alone. On return every Var in `wrt` holds the analytic
// gradient (earlier gradients are dropped first). Throws headlab::Error naming "gradcheck" when
// a Var in `wrt` is not a leaf with requires_grad, when f returns an undefined Var, or when the
// output's shape changes between evaluations; f's own errors propagate.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/var.h"

namespace headlab {

struct GradcheckOptions {
  double eps = 1e-2;
  double atol = 1e-3;
  double rtol = 1e-2;
  uint64_t seed = 1234;  // the projection direction
};

struct GradcheckResult {
  bool pass = true;
  double max_rel_error = 0;  // the largest rel over every checked element (definition above)
  // The worst element: "input 1 index 5 of [2, 3]: analytic 0.1234 numeric 0.1236 rel 1.6e-03".
  std::string worst;
  int checked = 0;  // elements compared
  int inputs = 0;   // Vars in wrt
};

GradcheckResult gradcheck(const std::function<Var()>& f, const std::vector<Var>& wrt,
                          const GradcheckOptions& options = {});

// A named gradcheck over small random inputs, built from a seed: one or more per op
// (autograd/checks/op_checks.h, kind "op") and per layer (kind "layer"). `headlab gradcheck` and the
// tests run every case on every backend.
struct GradcheckCase {
  std::string name;  // the op's function name (softmax) or the layer's registry name
  std::string kind;  // "op" or "layer"
  std::function<GradcheckResult(uint64_t seed)> run;
  std::string variant;  // which situation, when a name has several cases ("masked rows")
};

}  // namespace headlab
