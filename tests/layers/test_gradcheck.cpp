#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "layers/layer_checks.h"
#include "layers/linear.h"
#include "layers/registry.h"

using namespace headlab;

namespace {

// The layer tests use tiny tensors: one thread, so no OpenMP team spins against other processes
// on a loaded machine (which made these cases 50x slower).
const int single_threaded = (set_num_threads(1), 1);

// Runs every layer case named `name` with two seeds on every kernel backend.
void run_cases(const std::string& name) {
  int ran = 0;
  const Backend saved = current_backend();
  for (const GradcheckCase& c : layer_gradcheck_cases()) {
    if (c.name != name || c.variant.starts_with("from the registry") ||
        c.variant.starts_with("registry: "))
      continue;
    CHECK(c.kind == "layer");
    for (Backend backend : {Backend::reference, Backend::blas, Backend::onednn}) {
      set_backend(backend);
      for (uint64_t seed : {1u, 2u}) {
        CAPTURE(c.variant);
        CAPTURE(backend_name(backend));
        CAPTURE(seed);
        GradcheckResult r = c.run(seed);
        CHECK_MESSAGE(r.pass, r.worst);
        CHECK(r.checked > 0);
        ++ran;
      }
    }
  }
  set_backend(saved);
  CHECK(ran > 0);
}

// A factory that is never called (the registration is refused first).
LayerFactory make_layer_for_twins() {
  return [](LayerOptions&) -> std::shared_ptr<SequenceLayer> { return nullptr; };
}

}  // namespace

TEST_CASE("layers: gradcheck linear (inputs and parameters, shared use)") {
  run_cases("linear");
}
TEST_CASE("layers: gradcheck embedding") {
  run_cases("embedding");
}
TEST_CASE("layers: gradcheck positional_encoding") {
  run_cases("positional_encoding");
}
TEST_CASE("layers: gradcheck layer_norm") {
  run_cases("layer_norm");
}
TEST_CASE("layers: gradcheck dropout") {
  run_cases("dropout");
}
TEST_CASE("layers: gradcheck feed_forward") {
  run_cases("feed_forward");
}
TEST_CASE("layers: gradcheck softmax") {
  run_cases("softmax");
}
TEST_CASE("layers: gradcheck multi_head_attention (masks, gate, dropout)") {
  run_cases("multi_head_attention");
}
TEST_CASE("layers: gradcheck encoder_layer pre and post") {
  run_cases("encoder_layer");
}
TEST_CASE("layers: gradcheck a tiny encoder") {
  run_cases("encoder");
}

TEST_CASE("layers: gradcheck every registered layer built from the registry") {
  std::set<std::string> covered;
  for (const GradcheckCase& c : registry_gradcheck_cases()) {
    CAPTURE(c.name);
    GradcheckResult r = c.run(5);
    CHECK_MESSAGE(r.pass, r.worst);
    covered.insert(c.name);
  }
  for (const std::string& name : registered_layers()) CHECK(covered.count(name) == 1);
}

TEST_CASE("layers: built-in layers whose options change the backward declare several cases") {
  std::set<std::string> variants;
  for (const GradcheckCase& c : registry_gradcheck_cases())
    variants.insert(c.name + ": " + c.variant);
  for (const char* name :
       {"feed_forward", "layer_norm", "linear", "multi_head_attention", "positional_encoding"}) {
    CAPTURE(name);
    const std::vector<LayerCheckCase> cases = layer_check_cases(name);
    CHECK(cases.size() >= 2);
    int with_options = 0;
    for (const LayerCheckCase& c : cases) {
      CHECK(variants.count(std::string(name) + ": registry: " + c.variant) == 1);
      with_options += c.options.empty() ? 0 : 1;
    }
    CHECK(with_options >= 1);
  }
  // A layer without declared cases gets the one default case.
  REQUIRE(layer_check_cases("softmax").size() == 1);
  CHECK(layer_check_cases("softmax")[0].variant == "from the registry");
  CHECK(variants.count("softmax: from the registry") == 1);
}

TEST_CASE("layers: a registered layer's declared cases are checked with their options") {
  // A Linear reading "bias": the case without a bias must build a layer without one.
  std::vector<bool> built_with_bias;
  register_layer("test_checked_linear", LayerKind::other,
                 [&](LayerOptions& o) -> std::shared_ptr<SequenceLayer> {
                   const int64_t d = o.require_int("d_model");
                   const bool bias = o.get_bool("bias", true);
                   built_with_bias.push_back(bias);
                   return std::make_shared<Linear>(LinearOptions{d, d, bias}, o.init_rng());
                 },
                 {}, {{"bias", {}}, {"no bias", {{"bias", false}}}});
  int ran = 0;
  for (const GradcheckCase& c : registry_gradcheck_cases()) {
    if (c.name != "test_checked_linear") continue;
    CAPTURE(c.variant);
    const GradcheckResult r = c.run(4);
    CHECK_MESSAGE(r.pass, r.worst);
    CHECK(r.inputs == (c.variant == "registry: bias" ? 3 : 2));  // x, weight[, bias]
    ++ran;
  }
  CHECK(ran == 2);
  CHECK(built_with_bias == std::vector<bool>{true, false});
  unregister_layer("test_checked_linear");
  CHECK_THROWS_WITH_AS(register_layer("test_twin_cases", LayerKind::other, make_layer_for_twins(),
                                      {}, {{"a", {}}, {"a", {{"bias", false}}}}),
                       "register_layer: layer 'test_twin_cases' has two gradcheck cases named 'a'",
                       Error);
  CHECK_FALSE(has_layer("test_twin_cases"));
}
