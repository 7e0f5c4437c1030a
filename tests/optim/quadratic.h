#pragma once
// A small problem for optimizer trajectories: two parameters "layer.weight" [2, 3] and
// "layer.bias" [3] under L = 1/2 sum_i a_i (p_i - c_i)^2, so dL/dp_i = a_i (p_i - c_i). Every
// update rule here is element-wise with per-step scalars, so a reference can run on the nine
// elements as one flat vector in double.

#include <cstring>
#include <vector>

#include "core/rng.h"
#include "layers/module.h"

namespace headlab::test {

struct Quadratic {
  std::vector<double> start, a, c;  // flat over weight then bias
  NamedParameters params;

  explicit Quadratic(uint64_t seed = 7) {
    Rng rng(seed);
    for (int i = 0; i < 9; ++i) {
      start.push_back(rng.uniform(-1.0f, 1.0f));
      a.push_back(rng.uniform(0.5f, 2.0f));
      // The target lies 0.5..1.5 away, so no gradient crosses zero within a few small steps
      // (where Adam's step, ~sign(g), would amplify float rounding).
      const double offset = rng.uniform(0.5f, 1.5f);
      c.push_back(start.back() + (rng.uniform() < 0.5f ? -offset : offset));
    }
    std::vector<float> w(start.begin(), start.begin() + 6), b(start.begin() + 6, start.end());
    params.push_back({"layer.weight", Var(Tensor::from({2, 3}, w), true)});
    params.push_back({"layer.bias", Var(Tensor::from({3}, b), true)});
  }

  // Sets each parameter's gradient from its current (float) value.
  void set_grads() const {
    size_t k = 0;
    for (const auto& p : params) {
      Tensor g = Tensor::empty(p.var.shape());
      const float* v = p.var.value().data();
      for (int64_t i = 0; i < g.numel(); ++i, ++k)
        g[i] = static_cast<float>(a[k]) * (v[i] - static_cast<float>(c[k]));
      if (p.var.has_grad())
        p.var.grad().copy_(g);
      else
        p.var.grad() = g;
    }
  }

  std::vector<double> grad_at(const std::vector<double>& x) const {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) g[i] = a[i] * (x[i] - c[i]);
    return g;
  }

  std::vector<float> values() const {
    std::vector<float> out;
    for (const auto& p : params)
      for (float v : p.var.value().span()) out.push_back(v);
    return out;
  }
};

// Bitwise equality of two parameter lists' values.
inline bool same_bits(const NamedParameters& x, const NamedParameters& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    const Tensor& a = x[i].var.value();
    const Tensor& b = y[i].var.value();
    if (a.shape() != b.shape() ||
        std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<size_t>(a.numel())) != 0)
      return false;
  }
  return true;
}

// A deep copy with the same names (fresh Vars, cloned values, no gradients).
inline NamedParameters clone_params(const NamedParameters& params) {
  NamedParameters out;
  for (const auto& p : params) out.push_back({p.name, Var(p.var.value().clone(), true)});
  return out;
}

}  // namespace headlab::test
