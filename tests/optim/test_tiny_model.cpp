// End to end: a 2-layer MLP on generated data, built from autograd ops and a Module, trains to
// a loss threshold with each optimizer under a warmup + cosine schedule and gradient clipping.

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/ops.h"
#include "core/rng.h"
#include "core/threads.h"
#include "layers/linear.h"
#include "layers/module.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/factory.h"

using namespace headlab;

namespace {

constexpr int kClasses = 3, kHidden = 16, kPoints = 96;

// Three Gaussian blobs in the plane: centers at radius 2, 120 degrees apart, std 0.8 (overlapping a
// little).
struct Blobs {
  Tensor x;  // [kPoints, 2]
  std::vector<int32_t> labels;
  Blobs() : x(Tensor::empty({kPoints, 2})) {
    Rng rng(11);
    for (int i = 0; i < kPoints; ++i) {
      const int k = i % kClasses;
      const double angle = 2 * std::numbers::pi * k / kClasses;
      x[2 * i] = static_cast<float>(2 * std::cos(angle)) + 0.8f * rng.normal();
      x[2 * i + 1] = static_cast<float>(2 * std::sin(angle)) + 0.8f * rng.normal();
      labels.push_back(k);
    }
  }
};

Tensor uniform(const Shape& shape, float bound, Rng& rng) {
  Tensor t = Tensor::empty(shape);
  for (float& v : t.span()) v = rng.uniform(-bound, bound);
  return t;
}

struct Mlp : Module {
  Var w1, b1, w2, b2;
  explicit Mlp(uint64_t seed) {
    Rng rng(seed);
    const float s1 = 1 / std::sqrt(2.0f), s2 = 1 / std::sqrt(float(kHidden));
    w1 = register_parameter("w1", uniform({2, kHidden}, s1, rng));
    b1 = register_parameter("b1", uniform({kHidden}, s1, rng));
    w2 = register_parameter("w2", uniform({kHidden, kClasses}, s2, rng));
    b2 = register_parameter("b2", uniform({kClasses}, s2, rng));
  }
  Var loss(const Blobs& data) const {
    const Var x(data.x);
    const Var h = relu(add(matmul(x, w1), b1));  // [N, H]
    return cross_entropy(add(matmul(h, w2), b2), data.labels);
  }
};

// Trains for `steps` and returns {first loss, last loss}.
std::pair<float, float> train(const OptimizerOptions& o, int steps) {
  const Blobs data;
  Mlp model(5);
  std::unique_ptr<Optimizer> opt = make_optimizer(o, model.named_parameters());
  const Schedule schedule = make_schedule(
      {.name = "warmup_cosine", .warmup_steps = 10, .min_lr = o.lr / 10, .total_steps = steps},
      o.lr);
  float first = 0, last = 0;
  for (int s = 1; s <= steps; ++s) {
    Var loss = model.loss(data);
    last = loss.value().item();
    if (s == 1) first = last;
    loss.backward();
    const double norm = clip_grad_norm(opt->parameters(), 5.0);
    REQUIRE(std::isfinite(norm));
    opt->set_lr(schedule.lr_at(opt->step_count() + 1));
    opt->step();
    opt->zero_grad();
  }
  return {first, last};
}

}  // namespace

TEST_CASE("optim: a tiny MLP trains below a loss threshold with each optimizer") {
  // Matrices of a few dozen elements: one thread (OpenMP's spinning pool only costs here, up to
  // 100x on a loaded machine).
  const int saved_threads = num_threads();
  set_num_threads(1);
  const OptimizerOptions configs[] = {
      {.name = "adam", .lr = 0.05},
      {.name = "adamw", .lr = 0.05, .weight_decay = 0.01},
      {.name = "sgd", .lr = 0.5},
      {.name = "sgd", .lr = 0.2, .momentum = 0.9},
      {.name = "sgd", .lr = 0.2, .momentum = 0.9, .nesterov = true},
  };
  for (const OptimizerOptions& o : configs) {
    CAPTURE(o.name);
    CAPTURE(o.nesterov);
    const auto [first, last] = train(o, 60);
    CHECK(first > 0.5f);  // near chance (ln 3 = 1.1) at the start
    CHECK(last < 0.15f);  // measured: 0.03-0.09 after 60 steps
  }
  set_num_threads(saved_threads);
}

// The README's library example, verbatim between the markers: it must compile and train.
namespace readme {
// --- README example begins
struct Mlp : Module {
  std::shared_ptr<Linear> fc1, fc2;  // LinearOptions{in_features, out_features}
  explicit Mlp(Rng& rng)
      : fc1(register_module("fc1", std::make_shared<Linear>(LinearOptions{2, 16}, rng))),
        fc2(register_module("fc2", std::make_shared<Linear>(LinearOptions{16, 3}, rng))) {}
  Var forward(const Var& x) { return fc2->forward(relu(fc1->forward(x))); }
};

float train_mlp(const Tensor& x, const std::vector<int32_t>& labels) {  // x [N, 2], labels [N]
  Rng rng(0);
  Mlp model(rng);
  Adam opt(model.named_parameters(), {.lr = 1e-2});  // state keyed by "fc1.weight", ...
  float last = 0;
  for (int step = 0; step < 200; ++step) {
    Var loss = cross_entropy(model.forward(Var(x)), labels);
    loss.backward();  // replays this thread's tape
    opt.step();
    opt.zero_grad();
    last = loss.value().item();
  }
  return last;
}
// --- README example ends
}  // namespace readme

TEST_CASE("optim: the README's library example trains the blobs") {
  const int saved_threads = num_threads();
  set_num_threads(1);
  const Blobs data;
  CHECK(readme::train_mlp(data.x, data.labels) < 0.3f);
  set_num_threads(saved_threads);
}

TEST_CASE("optim: the README shows the library example exactly as tested here") {
  const auto read = [](const char* name) {
    std::ifstream in(std::string(HEADLAB_SOURCE_DIR) + "/" + name);
    REQUIRE(in);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string test = read("tests/optim/test_tiny_model.cpp");
  const std::string_view begin_marker = "// --- README example begins\n";
  const size_t begin = test.find(begin_marker), end = test.find("// --- README example ends");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end > begin);
  const size_t from = begin + begin_marker.size();
  const std::string example = test.substr(from, end - from);
  CHECK(example.size() > 500);
  CHECK(read("README.md").find(example) != std::string::npos);
}
