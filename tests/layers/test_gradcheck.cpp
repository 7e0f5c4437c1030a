#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "core/kernels/kernels.h"
#include "core/threads.h"
#include "layers/layer_checks.h"
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
    if (c.name != name || c.variant == "from the registry") continue;
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
