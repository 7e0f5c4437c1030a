// headlab.load_model: a run's checkpoint loaded as `headlab eval` loads it (train/cli/eval.cpp),
// through the same library calls: the plugins first (the caller's, then the run's own from
// run.json), so that their layers and tasks are registered before the config is read.

#include <fmt/format.h>

#include "core/error.h"
#include "layers/encoder.h"
#include "python/model.h"
#include "train/config/config.h"
#include "train/run/checkpoint.h"
#include "train/run/run_checkpoint.h"
#include "train/run/run_dir.h"
#include "train/run/run_plugins.h"

namespace headlab::python {

std::unique_ptr<LoadedModel> load_model(const std::string& run_dir, const std::string& checkpoint,
                                        const std::vector<std::string>& plugins) {
  load_named_plugins(plugins, "load_model: plugins");
  // "latest" is how Python names the default; resolve_run_checkpoint reads "" as the latest
  // and then also takes a checkpoint directory given as the run.
  const std::string chosen = checkpoint == "latest" ? std::string{} : checkpoint;
  RunCheckpoint rc = resolve_run_checkpoint(run_dir, chosen);
  auto out = std::make_unique<LoadedModel>();
  CheckpointData c;
  // Everything read from the run comes from one run, even beside `train --overwrite`.
  read_run_stably(rc.run_dir, [&] {
    rc = resolve_run_checkpoint(run_dir, chosen);
    load_run_plugins(rc.run_dir);
    c = load_run_checkpoint(rc);
    const Config config =
        parse_config(c.resolved_config, (c.dir / "config.resolved.toml").string());
    check_memory(config, MemoryUse::evaluate);
    out->run = std::make_unique<RunModel>(config);
    out->run->restore(c, ConfigUse::evaluate, rc.run_dir);
  });
  out->run->encoder().eval();
  out->run_dir = rc.run_dir;
  out->checkpoint = c.dir;
  out->step = c.step;
  out->resolved_config = c.resolved_config;
  return out;
}

}  // namespace headlab::python
