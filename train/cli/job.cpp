#include "train/cli/job.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/threads.h"
#include "core/version.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/distributed/agree.h"
#include "train/distributed/build_id.h"
#include "train/plugins/loader.h"
#include "train/tasks/registry.h"

namespace headlab::cli {
namespace {

std::unique_ptr<Comm>& world_slot() {
  static std::unique_ptr<Comm> comm = std::make_unique<LocalComm>();
  return comm;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

Comm& world() {
  return *world_slot();
}

void set_world(std::unique_ptr<Comm> comm) {
  world_slot() = std::move(comm);
}

std::string build_fingerprint() {
  const std::string id = executable_build_id();
  std::string plugins;
  for (const LoadedPlugin& p : loaded_plugins())
    plugins +=
        fmt::format("{}{} (sha256 {})", plugins.empty() ? "" : ", ", p.path.string(), p.sha256);
  return fmt::format(
      "headlab {}\nbuild id {}\nplugins: {}\nlayers: {}\ntasks: {}\nonednn isa: {}\n",
      HEADLAB_VERSION, id.empty() ? "(none)" : id, plugins.empty() ? "none" : plugins,
      joined(registered_layers()), joined(registered_tasks()), onednn_info().isa);
}

void check_ranks_agree(const Config& config) {
  Comm& comm = world();
  comm.set_timeout(config.runtime.dist_timeout);
  const std::string text = to_toml(config);
  check_same_on_every_rank(comm, "the headlab build", build_fingerprint());
  // The resolved values, without the comment lines (the overrides that led to them).
  std::string values;
  for (size_t at = 0, end = 0; at < text.size(); at = end + 1) {
    end = std::min(text.find('\n', at), text.size());
    if (text[at] != '#') values.append(text, at, end - at).push_back('\n');
  }
  check_same_on_every_rank(comm, "the resolved config", values);
}

}  // namespace headlab::cli
