#include "autograd/op_checks.h"

#include <cmath>
#include <limits>
#include <utility>

#include "autograd/ops.h"
#include "core/rng.h"

namespace headlab {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A leaf needing a gradient with N(shift, scale^2) entries.
Var leaf(Rng& rng, const Shape& shape, float scale = 1.0f, float shift = 0.0f) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = shift + scale * rng.normal();
  return Var(t, true);
}

// Entries at least `margin` away from 0 (for kinks at 0, such as relu's).
Var leaf_off_zero(Rng& rng, const Shape& shape, float margin) {
  Var v = leaf(rng, shape);
  float* x = v.value().data();
  for (int64_t i = 0; i < v.numel(); ++i) x[i] = std::copysign(margin + std::abs(x[i]), x[i]);
  return v;
}

std::vector<int32_t> random_ids(Rng& rng, int64_t n, int64_t below) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(below)));
  return ids;
}

// [1, 1, T, S] attention mask: causal (key j > query i is masked), and query 0 fully masked so
// the case covers a row with no allowed key (softmax gives zeros, never NaN).
Tensor causal_mask_with_empty_row(int64_t t, int64_t s) {
  Tensor m = Tensor::zeros(Shape{1, 1, t, s});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < s; ++j) m[i * s + j] = (i == 0 || j > i) ? 1.0f : 0.0f;
  return m;
}

// The default options (see gradcheck.h), except for the step where a case says otherwise.
GradcheckResult check(uint64_t seed, const std::function<Var()>& f, const std::vector<Var>& wrt,
                      double eps = GradcheckOptions{}.eps) {
  GradcheckOptions options;
  options.seed = seed * 0x9E3779B97F4A7C15ull + 1;  // projection independent of the inputs
  options.eps = eps;
  return gradcheck(f, wrt, options);
}

// A wider step for two situations where the default's rounding noise nears the tolerance:
// large logits (offset 1000, spread 3) give log-probabilities up to about 10 in magnitude, and
// oneDNN's logsoftmax forward carries errors of about 3e-6 (some 25 ulp) that vary unevenly
// with the input. The noise shrinks as 1/eps; Richardson keeps truncation near eps^4.
constexpr double kWideEps = 4e-2;

class Cases {
 public:
  void add(const char* name, const char* variant, std::function<GradcheckResult(uint64_t)> run) {
    cases_.push_back(GradcheckCase{name, "op", std::move(run), variant});
  }
  std::vector<GradcheckCase> take() { return std::move(cases_); }

 private:
  std::vector<GradcheckCase> cases_;
};

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

void elementwise(Cases& c) {
  using Binary = Var (*)(const Var&, const Var&);
  struct Bin {
    const char* name;
    Binary op;
  };
  struct Shapes {
    const char* variant;
    Shape a, b;
  };
  for (const Bin& op : {Bin{"add", &add}, Bin{"sub", &sub}, Bin{"mul", &mul}})
    for (const Shapes& s :
         {Shapes{"equal shapes", {2, 3}, {2, 3}}, Shapes{"bias row broadcast", {2, 3, 4}, {4}},
          Shapes{"positions broadcast", {2, 3, 4}, {3, 4}},
          Shapes{"size-1 dims", {1, 3, 1}, {3, 1}}})
      c.add(op.name, s.variant, [op, s](uint64_t seed) {
        Rng rng(seed);
        Var a = leaf(rng, s.a), b = leaf(rng, s.b);
        return check(seed, [=] { return op.op(a, b); }, {a, b});
      });
  for (const Bin& op : {Bin{"add", &add}, Bin{"mul", &mul}})
    c.add(op.name, "same input twice", [op](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, {2, 3});
      return check(seed, [=] { return op.op(x, x); }, {x});
    });
  c.add("scale", "plain", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3});
    return check(seed, [=] { return scale(x, -1.7f); }, {x});
  });
  c.add("relu", "away from the kink", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf_off_zero(rng, {3, 4}, 0.1f);
    return check(seed, [=] { return relu(x); }, {x});
  });
  c.add("gelu", "plain", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {3, 4}, 2.0f);
    return check(seed, [=] { return gelu(x); }, {x});
  });
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

void probabilities(Cases& c) {
  using Unary = Var (*)(const Var&);
  struct Un {
    const char* name;
    Unary op;
  };
  for (const Un& op : {Un{"softmax", &softmax}, Un{"log_softmax", &log_softmax}}) {
    const double eps = op.op == &log_softmax ? kWideEps : GradcheckOptions{}.eps;
    c.add(op.name, "plain", [op, eps](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, {3, 5}, 2.0f);
      return check(
          seed, [=] { return op.op(x); }, {x}, eps);
    });
    c.add(op.name, "size-1 dims", [op, eps](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, {1, 1, 3});
      return check(
          seed, [=] { return op.op(x); }, {x}, eps);
    });
    c.add(op.name, "one column", [op](uint64_t seed) {  // constant output: gradient 0
      Rng rng(seed);
      Var x = leaf(rng, {2, 1});
      return check(seed, [=] { return op.op(x); }, {x});
    });
    c.add(op.name, "large logits", [op](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, {3, 6}, 3.0f, 1000.0f);
      return check(
          seed, [=] { return op.op(x); }, {x}, kWideEps);
    });
    // Attention scores [B, h, T, S] under a causal mask whose first query row is fully masked.
    // log_softmax's -inf outputs are filled with 0 afterwards so the projection stays finite.
    c.add(op.name, "masked rows (-inf)", [op, eps](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, {2, 2, 3, 4});
      const Tensor mask = causal_mask_with_empty_row(3, 4);
      const bool log = op.op == &log_softmax;
      return check(
          seed,
          [=] {
            Var y = op.op(masked_fill(x, mask, kNegInf));
            return log ? masked_fill(y, mask, 0.0f) : y;
          },
          {x}, eps);
    });
  }

  struct Ce {
    const char* variant;
    Shape logits;
    float scale, shift;
    int ignored_every;  // every k-th row is ignored (0: none, 1: all)
  };
  for (const Ce& ce :
       {Ce{"plain", {4, 5}, 2.0f, 0.0f, 0}, Ce{"ignore_index", {2, 3, 5}, 2.0f, 0.0f, 2},
        Ce{"large logits", {4, 6}, 3.0f, 1000.0f, 0}, Ce{"all rows ignored", {3, 4}, 1.0f, 0.0f, 1},
        Ce{"size-1 dims", {1, 1}, 1.0f, 0.0f, 0}})
    c.add("cross_entropy", ce.variant, [ce](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, ce.logits, ce.scale, ce.shift);
      const int64_t rows = ce.logits.numel() / ce.logits.back();
      std::vector<int32_t> targets = random_ids(rng, rows, ce.logits.back());
      for (int64_t r = 0; ce.ignored_every > 0 && r < rows; r += ce.ignored_every)
        targets[r] = -100;
      return check(
          seed, [=] { return cross_entropy(x, targets, -100); }, {x},
          ce.shift != 0.0f ? kWideEps : GradcheckOptions{}.eps);
    });

  struct Ln {
    const char* variant;
    Shape x;
    bool gain, bias;
  };
  for (const Ln& ln :
       {Ln{"gain and bias", {2, 3, 6}, true, true}, Ln{"no affine", {3, 5}, false, false},
        Ln{"gain only", {3, 5}, true, false}, Ln{"size-1 rows", {1, 1, 4}, true, true}})
    c.add("layer_norm", ln.variant, [ln](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, ln.x);
      Var gain = ln.gain ? leaf(rng, {ln.x.back()}, 0.3f, 1.0f) : Var();
      Var bias = ln.bias ? leaf(rng, {ln.x.back()}, 0.3f) : Var();
      std::vector<Var> wrt{x};
      if (ln.gain) wrt.push_back(gain);
      if (ln.bias) wrt.push_back(bias);
      return check(
          seed, [=] { return layer_norm(x, gain, bias); }, wrt);
    });
}

void indexing(Cases& c) {
  c.add("embedding", "repeated ids", [](uint64_t seed) {
    Rng rng(seed);
    Var w = leaf(rng, {6, 4});
    std::vector<int32_t> ids = random_ids(rng, 6, 6);
    ids[5] = ids[0];  // a repeated id: its row gathers two gradients
    return check(seed, [=] { return embedding(w, ids, Shape{2, 3}); }, {w});
  });
  c.add("embedding", "size-1 dims", [](uint64_t seed) {
    Rng rng(seed);
    Var w = leaf(rng, {1, 3});
    const std::vector<int32_t> ids{0};
    return check(seed, [=] { return embedding(w, ids, Shape{1}); }, {w});
  });
  c.add("masked_fill", "broadcast mask [B,1,1,S]", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 2, 3, 4});
    Tensor mask = Tensor::zeros(Shape{2, 1, 1, 4});
    mask[1] = mask[4] = mask[7] = 1.0f;
    return check(seed, [=] { return masked_fill(x, mask, 0.5f); }, {x});
  });
  c.add("masked_fill", "full mask shape", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {3, 4});
    Tensor mask = Tensor::zeros(Shape{3, 4});
    for (int64_t i = 0; i < 12; i += 3) mask[i] = 1.0f;
    return check(seed, [=] { return masked_fill(x, mask, -2.0f); }, {x});
  });
  c.add("head_gate", "plain", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3, 2, 4});
    Var gate = leaf(rng, {3}, 0.5f, 1.0f);
    return check(seed, [=] { return head_gate(x, gate); }, {x, gate});
  });
  c.add("head_gate", "ablated head (gate 0)", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {1, 2, 3, 2});
    Var gate(Tensor::from({2}, {1.0f, 0.0f}), true);
    return check(seed, [=] { return head_gate(x, gate); }, {x, gate});
  });
}

// The fused ops (ops_fused.cpp, ops_attention.cpp).
void fused(Cases& c) {
  struct Lin {
    const char* variant;
    Shape x;
    bool bias, relu;
  };
  for (const Lin& l : {Lin{"bias", {2, 3, 4}, true, false}, Lin{"no bias", {3, 4}, false, false},
                       Lin{"bias and relu", {2, 3, 4}, true, true}})
    c.add("linear", l.variant, [l](uint64_t seed) {
      Rng rng(seed);
      Var x = leaf(rng, l.x), w = leaf(rng, {5, 4}, 0.25f);
      Var b = l.bias ? leaf(rng, {5}, 0.5f) : Var();
      // With ReLU, biases of +-3 keep every pre-activation (x w^T has std 0.5) far from the
      // kink; columns with -3 check the zero gradient.
      if (l.relu)
        for (int64_t j = 0; j < 5; ++j) b.value()[j] += j % 2 == 0 ? 3.0f : -3.0f;
      std::vector<Var> wrt{x, w};
      if (l.bias) wrt.push_back(b);
      return check(seed, [=] { return linear(x, w, b, l.relu); }, wrt);
    });
  for (const bool packed : {true, false})
    c.add("linear_cat", packed ? "weights in one storage" : "separate weights",
          [packed](uint64_t seed) {
            Rng rng(seed);
            Var x = leaf(rng, {2, 3, 4});
            Tensor all = Tensor::empty({7, 4});
            for (float& v : all.span()) v = 0.5f * rng.normal();
            Var w0(packed ? all.slice(0, 2) : all.slice(0, 2).clone(), true);
            Var w1(packed ? all.slice(2, 5) : all.slice(2, 5).clone(), true);
            Var w2(packed ? all.slice(5, 7) : all.slice(5, 7).clone(), true);
            Var b0 = leaf(rng, {2}), b1 = leaf(rng, {3}), b2 = leaf(rng, {2});
            const std::vector<Var> ws{w0, w1, w2}, bs{b0, b1, b2};
            return check(seed, [=] { return linear_cat(x, ws, bs); }, {x, w0, w1, w2, b0, b1, b2});
          });
  c.add("linear_cat", "no biases", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {3, 4}), w0 = leaf(rng, {2, 4}), w1 = leaf(rng, {1, 4});
    const std::vector<Var> ws{w0, w1};
    return check(seed, [=] { return linear_cat(x, ws, {}); }, {x, w0, w1});
  });
  c.add("add_layer_norm", "gain and bias", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3, 6}), r = leaf(rng, {2, 3, 6});
    Var gain = leaf(rng, {6}, 0.3f, 1.0f), bias = leaf(rng, {6}, 0.3f);
    return check(seed, [=] { return add_layer_norm(x, r, gain, bias); }, {x, r, gain, bias});
  });
  c.add("add_layer_norm", "no affine", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {3, 5}), r = leaf(rng, {3, 5});
    return check(seed, [=] { return add_layer_norm(x, r, Var(), Var()); }, {x, r});
  });
  c.add("add_layer_norm", "same input twice", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {3, 5});
    Var gain = leaf(rng, {5}, 0.3f, 1.0f);
    return check(seed, [=] { return add_layer_norm(x, x, gain, Var()); }, {x, gain});
  });
  struct Att {
    const char* variant;
    bool masks;
    float dropout;
  };
  for (const Att& a : {Att{"plain", false, 0.0f}, Att{"masks with an empty row", true, 0.0f},
                       Att{"dropout", false, 0.3f}})
    c.add("self_attention", a.variant, [a](uint64_t seed) {
      Rng rng(seed);
      Var qkv = leaf(rng, {2, 3, 12});  // 2 heads of width 2
      Tensor kpm = Tensor::zeros({2, 3});
      kpm[3] = 1.0f;  // batch 1's first key is padding
      Tensor causal = Tensor::zeros({3, 3});
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = i + 1; j < 3; ++j) causal[i * 3 + j] = 1.0f;
      return check(seed,
                   [=] {
                     Rng drop(seed + 11);  // the same dropout mask on every evaluation
                     AttentionOptions o;
                     o.heads = 2;
                     o.scale = 0.7f;
                     o.key_padding_mask = a.masks ? &kpm : nullptr;
                     o.attn_mask = a.masks ? &causal : nullptr;
                     o.dropout = a.dropout;
                     o.rng = &drop;
                     return self_attention(qkv, o);
                   },
                   {qkv});
    });
}

}  // namespace

std::vector<GradcheckCase> op_gradcheck_cases() {
  Cases c;
  linear_algebra(c);
  elementwise(c);
  shapes(c);
  probabilities(c);
  indexing(c);
  fused(c);
  return c.take();
}

std::vector<std::string> differentiable_op_names() {
  return {"matmul",     "batched_matmul", "add",         "sub",      "mul",         "scale",
          "relu",       "gelu",           "dropout",     "sum",      "mean",        "reshape",
          "transpose",  "split_heads",    "merge_heads", "softmax",  "log_softmax", "cross_entropy",
          "layer_norm", "embedding",      "masked_fill", "head_gate",   "linear",   "linear_cat",
          "add_layer_norm", "self_attention"};
}

}  // namespace headlab
