// The C++ twins of the Python training loops of tests/python/test_tensors_loop.py: the same
// layers from the same seeds, the same fixed data and optimizer steps, through libheadlab.so
// as the Python module is. Writes each step's loss and then every parameter's final values,
// float32 in native byte order, to the file named by the second argument; the pytest compares
// the bytes with what its Python loop computed.
//
//   tensor_loop_twin mlp|encoder_layer OUT

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/rng.h"
#include "layers/encoder_layer.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/schedule.h"

using namespace headlab;

namespace {

// Fixed data both sides compute exactly: small integers over 4.
Tensor fixed_inputs(const Shape& shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>((i * 7) % 11 - 5) / 4.0f;
  return t;
}

std::vector<int32_t> fixed_targets(int64_t n, int32_t classes) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 5) % classes);
  return t;
}

NamedParameters prefixed(const std::string& prefix, const Module& module) {
  NamedParameters out = module.named_parameters();
  for (NamedParameter& p : out) p.name = prefix + p.name;
  return out;
}

// Linear(4, 8) -> LayerNorm(8) -> gelu -> Linear(8, 3), cross-entropy, five Adam steps.
std::vector<float> mlp_loop(NamedParameters& params) {
  Rng rng(7);
  auto l1 = std::make_shared<Linear>(LinearOptions{4, 8}, rng);
  auto norm = std::make_shared<LayerNorm>(LayerNormOptions{8});
  auto l2 = std::make_shared<Linear>(LinearOptions{8, 3}, rng);
  for (auto& part : {prefixed("l1.", *l1), prefixed("norm.", *norm), prefixed("l2.", *l2)})
    params.insert(params.end(), part.begin(), part.end());
  const Var x(fixed_inputs({6, 4}));
  const std::vector<int32_t> targets = fixed_targets(6, 3);
  Adam optimizer(params, AdamOptions{.lr = 0.05});
  std::vector<float> losses;
  for (int step = 0; step < 5; ++step) {
    Var loss = cross_entropy(l2->forward(gelu(norm->forward(l1->forward(x)))), targets);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    losses.push_back(loss.value().item());
  }
  return losses;
}

// One pre-norm encoder layer and a classifier on [2, 5, 8], AdamW with weight decay under a
// warmup-cosine schedule, gradients clipped at norm 1; six steps.
std::vector<float> encoder_layer_loop(NamedParameters& params) {
  Rng rng(3);
  EncoderLayerOptions options;
  options.d_model = 8;
  options.heads = 2;
  options.d_ff = 16;
  options.activation = Activation::gelu;
  auto layer = std::make_shared<EncoderLayer>(options, rng);
  auto head = std::make_shared<Linear>(LinearOptions{8, 3}, rng);
  for (auto& part : {prefixed("layer.", *layer), prefixed("head.", *head)})
    params.insert(params.end(), part.begin(), part.end());
  const Var x(fixed_inputs({2, 5, 8}));
  const std::vector<int32_t> targets = fixed_targets(10, 3);
  AdamW optimizer(params, AdamOptions{.lr = 0.01, .weight_decay = 0.01});
  const Schedule schedule = Schedule::warmup_cosine(0.01, 2, 6);
  std::vector<float> losses;
  for (int step = 0; step < 6; ++step) {
    optimizer.set_lr(schedule.lr_at(optimizer.step_count() + 1));
    Var loss = cross_entropy(head->forward(layer->forward(x).output), targets);
    loss.backward();
    clip_grad_norm(optimizer.parameters(), 1.0);
    optimizer.step();
    optimizer.zero_grad();
    losses.push_back(loss.value().item());
  }
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tensor_loop_twin mlp|encoder_layer OUT\n");
    return 2;
  }
  const std::string loop = argv[1];
  NamedParameters params;
  std::vector<float> losses;
  try {
    if (loop == "mlp") {
      losses = mlp_loop(params);
    } else if (loop == "encoder_layer") {
      losses = encoder_layer_loop(params);
    } else {
      std::fprintf(stderr, "tensor_loop_twin: loop is \"%s\" but expected mlp or encoder_layer\n",
                   loop.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensor_loop_twin: %s\n", e.what());
    return 1;
  }
  std::ofstream out(argv[2], std::ios::binary);
  out.write(reinterpret_cast<const char*>(losses.data()),
            static_cast<std::streamsize>(losses.size() * sizeof(float)));
  for (const NamedParameter& p : params)
    out.write(reinterpret_cast<const char*>(p.var.value().data()),
              static_cast<std::streamsize>(p.var.numel() * sizeof(float)));
  return out ? 0 : 1;
}
