#include "train/cli/world.h"

#include <fmt/format.h>

#include "core/threads.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/dist/agree.h"
#include "train/dist/build_id.h"
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
  return fmt::format("headlab {}\nbuild id {}\nlayers: {}\ntasks: {}\nonednn isa: {}\n",
                     HEADLAB_VERSION, id.empty() ? "(none)" : id, joined(registered_layers()),
                     joined(registered_tasks()), onednn_info().isa);
}

void check_ranks_agree(const Config& config) {
  Comm& comm = world();
  comm.set_timeout(config.runtime.dist_timeout);
  check_same_on_every_rank(comm, "the headlab build", build_fingerprint());
  check_same_on_every_rank(comm, "the resolved config", to_toml(config));
}

}  // namespace headlab::cli
