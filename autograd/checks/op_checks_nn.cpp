// The op gradcheck cases of the probability, normalisation, indexing and fused ops (the rest
// and the registration: op_checks.cpp).

#include <vector>

#include "autograd/checks/op_checks_util.h"
#include "autograd/ops.h"

namespace headlab::op_checks {

void softmaxes(Cases& c) {
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
}

void cross_entropy_cases(Cases& c) {
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
}

void layer_norm_cases(Cases& c) {
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
  c.add("head_gate_merged", "plain, one head ablated", [](uint64_t seed) {
    Rng rng(seed);
    Var x = leaf(rng, {2, 3, 6});  // 3 heads of width 2
    Var gate(Tensor::from({3}, {0.7f, 0.0f, 1.3f}), true);
    return check(seed, [=] { return head_gate_merged(x, gate); }, {x, gate});
  });
}

void linears(Cases& c) {
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
      return check(
          seed, [=] { return linear(x, w, b, l.relu); }, wrt);
    });
}

void add_layer_norm_cases(Cases& c) {
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
}

void attention(Cases& c) {
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
                     SampleRng drop(seed + 11);  // the same dropout mask on every evaluation
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

}  // namespace headlab::op_checks
