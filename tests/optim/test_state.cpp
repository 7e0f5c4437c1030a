// Optimizer state by parameter name: save, load into a fresh optimizer, step both, and compare
// bit for bit; mismatches are listed in one error.

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "optim/factory.h"
#include "tests/optim/quadratic.h"

using namespace headlab;
using headlab::test::clone_params;
using headlab::test::Quadratic;
using headlab::test::same_bits;

namespace {

// Gradients as a deterministic function of the parameter values (identical values give
// identical gradients, bit for bit).
void set_grads(const NamedParameters& ps) {
  for (const auto& p : ps) {
    Tensor g = Tensor::empty(p.var.shape());
    const float* v = p.var.value().data();
    for (int64_t i = 0; i < g.numel(); ++i) g[i] = 0.7f * v[i] - 0.3f + 0.01f * float(i);
    p.var.grad() = g;
  }
}

void step(Optimizer& opt, int64_t s) {
  set_grads(opt.parameters());
  opt.set_lr(0.01 / std::sqrt(double(s)));
  opt.step();
}

}  // namespace

TEST_CASE("optim: save, load into a fresh optimizer, step both: identical bits") {
  for (const char* name : {"adam", "adamw", "sgd"}) {
    CAPTURE(name);
    OptimizerOptions o{.name = name, .lr = 0.01, .betas = {0.9, 0.98}, .weight_decay = 0.1};
    if (std::string(name) == "sgd") o.momentum = 0.9;
    Quadratic q;
    std::unique_ptr<Optimizer> a = make_optimizer(o, q.params);
    for (int64_t s = 1; s <= 5; ++s) step(*a, s);

    // The copy's parameters are listed in reverse order: state follows names, not positions.
    NamedParameters copied = clone_params(q.params);
    std::reverse(copied.begin(), copied.end());
    std::unique_ptr<Optimizer> b = make_optimizer(o, copied);
    b->load_state_dict(a->state_dict());
    CHECK(b->step_count() == 5);
    std::reverse(copied.begin(), copied.end());

    for (int64_t s = 6; s <= 10; ++s) {
      step(*a, s);
      step(*b, s);
    }
    CHECK(same_bits(q.params, copied));

    // Control: a fresh optimizer without the loaded state diverges from the same point.
    NamedParameters control = clone_params(copied);
    std::unique_ptr<Optimizer> c = make_optimizer(o, control);
    c->set_step_count(10);
    step(*a, 11);
    step(*c, 11);
    CHECK_FALSE(same_bits(q.params, control));
  }
}

TEST_CASE("optim: state_dict names moments by parameter and encodes the step exactly") {
  Quadratic q;
  std::unique_ptr<Optimizer> adam = make_optimizer({}, q.params);
  StateDict sd = adam->state_dict();
  REQUIRE(sd.size() == 5);
  CHECK(sd[0].name == "exp_avg.layer.weight");
  CHECK(sd[1].name == "exp_avg.layer.bias");
  CHECK(sd[2].name == "exp_avg_sq.layer.weight");
  CHECK(sd[3].name == "exp_avg_sq.layer.bias");
  CHECK(sd[4].name == "step");
  CHECK(sd[0].tensor.shape() == Shape{2, 3});
  for (int64_t s : {int64_t{0}, int64_t{1}, int64_t{16777215}, int64_t{16777216},
                    int64_t{1000000007}, (int64_t{1} << 40) + 12345}) {
    CAPTURE(s);
    CHECK(Optimizer::step_from_tensor(Optimizer::step_to_tensor(s)) == s);
    adam->set_step_count(s);
    Quadratic other;
    std::unique_ptr<Optimizer> fresh = make_optimizer({}, other.params);
    fresh->load_state_dict(adam->state_dict());
    CHECK(fresh->step_count() == s);
  }
}

TEST_CASE("optim: load_state_dict lists every mismatch at once and changes nothing") {
  Quadratic q;
  std::unique_ptr<Optimizer> adam = make_optimizer({}, q.params);
  set_grads(q.params);
  adam->step();
  const std::vector<float> before = adam->state_dict()[0].tensor.to_vector();

  StateDict bad = adam->state_dict();
  bad.erase(bad.begin() + 1);                                 // missing exp_avg.layer.bias
  bad[1].tensor = Tensor::zeros({3, 2});                      // mis-shaped exp_avg_sq.layer.weight
  bad.push_back({"exp_avg.layer.gain", Tensor::zeros({3})});  // unexpected
  bad.back().name = "exp_avg.layer.gain";
  for (auto& t : bad)
    if (t.name == "step") t.tensor = Tensor::from({2}, {0, 0.5f});  // not an integer
  try {
    adam->load_state_dict(bad);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("4 problems") != std::string::npos);
    CHECK(msg.find("missing 'exp_avg.layer.bias'") != std::string::npos);
    CHECK(msg.find("'exp_avg_sq.layer.weight' has shape [3, 2] but parameter 'layer.weight' "
                   "has shape [2, 3]") != std::string::npos);
    CHECK(msg.find("unexpected 'exp_avg.layer.gain'") != std::string::npos);
    CHECK(msg.find("'step'") != std::string::npos);
  }
  CHECK(adam->state_dict()[0].tensor.to_vector() == before);
  CHECK(adam->step_count() == 1);

  StateDict no_step = adam->state_dict();
  no_step.pop_back();
  CHECK_THROWS_WITH_AS(adam->load_state_dict(no_step), doctest::Contains("missing 'step'"), Error);
  // SGD's state does not fit Adam.
  std::unique_ptr<Optimizer> sgd = make_optimizer({.name = "sgd", .momentum = 0.9}, q.params);
  CHECK_THROWS_WITH_AS(adam->load_state_dict(sgd->state_dict()),
                       doctest::Contains("unexpected 'momentum_buffer.layer.weight'"), Error);
  CHECK_THROWS_AS(Optimizer::step_from_tensor(Tensor::from({1}, {3})), Error);
  CHECK_THROWS_AS(Optimizer::step_from_tensor(Tensor::from({2}, {-1, 3})), Error);
  CHECK_THROWS_AS(Optimizer::step_from_tensor(Tensor::from({2}, {0, 16777216.0f})), Error);
}

TEST_CASE("optim: make_optimizer builds each named optimizer and lists the known names") {
  Quadratic q;
  CHECK(std::string(make_optimizer({}, q.params)->name()) == "adam");
  CHECK(std::string(make_optimizer({.name = "adamw"}, q.params)->name()) == "adamw");
  CHECK(std::string(make_optimizer({.name = "sgd"}, q.params)->name()) == "sgd");
  CHECK(make_optimizer({.lr = 0.25}, q.params)->lr() == 0.25);
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "adagrad"}, q.params),
                       doctest::Contains("optimizer: name is \"adagrad\" but expected one of: "
                                         "adam, adamw, sgd"),
                       Error);
  CHECK_THROWS_WITH_AS(make_optimizer({.name = "adam", .momentum = 0.9}, q.params),
                       doctest::Contains("sgd only"), Error);
  CHECK_THROWS_WITH_AS(make_optimizer({.betas = {0.9, 1.5}}, q.params), doctest::Contains("beta2"),
                       Error);
  CHECK_THROWS_WITH_AS(make_optimizer({.clip_norm = -1}, q.params),
                       doctest::Contains("optimizer: clip_norm is -1"), Error);
}
