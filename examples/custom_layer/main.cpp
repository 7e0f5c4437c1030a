// custom_layer: a project outside headlab that adds a layer and trains with it.
//   1. rms_norm.cpp defines RMSNorm and registers it as "rms_norm" (one line);
//   2. here it is gradchecked (input and weight), directly and as built from the registry;
//   3. the config (custom_layer.toml: norm_layer = "rms_norm") trains headlab's encoder on the
//      dependency task with RMSNorm in every norm slot, through headlab's own Trainer.
// Usage: custom_layer <config.toml> <run_dir> [--set key=value ...]
// Exit 0 when the gradchecks pass, the memory estimate counted the model's parameters exactly
// and the evaluation loss fell by 10% or more; 1 otherwise.

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/layer_checks.h"
#include "layers/registry.h"
#include "rms_norm.h"
#include "train/config/config.h"
#include "train/run/run_dir.h"
#include "train/run/trainer.h"

namespace {

bool report(const char* what, const headlab::GradcheckResult& r) {
  std::printf("gradcheck %-34s %s (max rel error %.2e over %d values)\n", what,
              r.pass ? "pass" : "FAIL", r.max_rel_error, r.checked);
  if (!r.pass) std::printf("  worst: %s\n", r.worst.c_str());
  return r.pass;
}

bool check_gradients() {
  using namespace headlab;
  bool ok = true;
  // The op itself, with a gain away from 1 so both gradients matter.
  Rng rng(7);
  Tensor xs = Tensor::empty({3, 5}), ws = Tensor::empty({5});
  for (float& v : xs.span()) v = rng.normal();
  for (float& v : ws.span()) v = rng.normal();
  Var x(xs, true), w(ws, true);
  ok &= report("rms_norm op (x, weight)",
               gradcheck([&] { return custom::rms_norm(x, w, 1e-6f); }, {x, w}));
  // The layer as a config would build it, on [2, 3, 8] inputs.
  auto layer = make_layer("rms_norm", OptionMap{{"d_model", 8}, {"eps", 1e-5}}, rng);
  ok &= report("rms_norm layer from the registry", gradcheck_sequence_layer(*layer, 8, 1));
  // Every registered layer, the new one included, as `headlab gradcheck` runs them.
  for (const GradcheckCase& c : registry_gradcheck_cases())
    ok &= report(("registry: " + c.name).c_str(), c.run(3));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: custom_layer <config.toml> <run_dir> [--set key=value ...]\n");
    return 2;
  }
  try {
    if (!check_gradients()) return 1;

    std::vector<std::string> overrides;
    for (int i = 3; i + 1 < argc; i += 2)
      if (std::string(argv[i]) == "--set") overrides.emplace_back(argv[i + 1]);
    headlab::Config config = headlab::load_config(argv[1], overrides);
    headlab::Trainer trainer(config, argv[2]);
    // The run directory is this program's until it exits (train/run/run_dir.h).
    const headlab::RunDirClaim claim =
        headlab::claim_run_dir(argv[2], headlab::RunDirUse::overwrite);
    const auto* norm = dynamic_cast<custom::RMSNorm*>(trainer.model().layer(0).norm1.get());
    const int64_t estimated = headlab::estimate_memory(config).parameters;
    std::printf("model: %lld parameters (estimated before building: %lld), norm slot holds %s\n",
                static_cast<long long>(trainer.parameter_count()),
                static_cast<long long>(estimated), norm ? "custom::RMSNorm" : "something else");
    if (estimated != trainer.parameter_count()) return 1;
    const headlab::EvalMetrics before = trainer.evaluate();
    const headlab::TrainResult result = trainer.run();
    std::printf("eval loss %.4f -> %.4f, accuracy %.3f -> %.3f after %lld steps (%.1f s)\n",
                before.loss, result.final_eval.loss, before.accuracy, result.final_eval.accuracy,
                static_cast<long long>(result.steps), result.wall_seconds);
    if (!norm) return 1;
    return result.final_eval.loss < 0.9 * before.loss ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_layer: error: %s\n", e.what());
    return 1;
  }
}
