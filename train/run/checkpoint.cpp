#include "train/run/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include <dnnl.h>
#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/version.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"

namespace headlab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxTextBytes = 64ull << 20;  // state.json, config.resolved.toml
constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kTrashPrefix = ".trash-";
constexpr const char* kFiles[] = {"state.json", "model.safetensors", "optimizer.safetensors",
                                  "config.resolved.toml"};

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The step of a "step-<digits>" directory name, or -1.
int64_t parse_step_name(const std::string& name) {
  if (!starts_with(name, "step-") || name.size() == 5 || name.size() > 5 + 18) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// The target of the symbolic link `link`, or nullopt if `link` does not exist or is no link.
std::optional<std::string> read_link(const fs::path& link) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0 || n == static_cast<ssize_t>(sizeof buf)) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

void check_rng_states(const std::map<std::string, std::string>& states, const std::string& where) {
  for (const auto& [name, text] : states) {
    try {
      Rng::parse_state(text);
    } catch (const Error& e) {
      fail("{}: RNG state '{}' is malformed: {}", where, name, e.what());
    }
  }
}

json make_state_json(const CheckpointData& data) {
  json state = json::object();
  state["format_version"] = kCheckpointFormatVersion;
  state["step"] = data.step;
  state["data_cursor"] = data.data_cursor;
  state["config_hash"] = data.config_hash;
  state["rng"] = data.rng_states;
  state["versions"] = library_versions();
  state["extra"] = data.extra;
  return state;
}

// Writes the checkpoint's four files into a fresh directory `dir` (inside checkpoints/) and
// fsyncs them and the directory.
void write_checkpoint_files(const fs::path& dir, const CheckpointData& data,
                            const std::string& state_text) {
  remove_tree(dir);
  if (::mkdir(dir.c_str(), 0755) != 0)
    fail("cannot create directory '{}': {}", dir.string(), std::strerror(errno));
  const SafetensorsMetadata meta = {{"step", std::to_string(data.step)}};
  write_safetensors(dir / "model.safetensors", data.model, meta);
  write_safetensors(dir / "optimizer.safetensors", data.optimizer, meta);
  write_file_durable(dir / "config.resolved.toml", data.resolved_config);
  write_file_durable(dir / "state.json", state_text);
  fsync_directory(dir);
}

// The entry names of `dir` (without "." and "..").
std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) fail("cannot list '{}': {}", dir.string(), std::strerror(errno));
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) fail("cannot list '{}': {}", dir.string(), std::strerror(err));
  return names;
}

// Best effort, for unwinding after an error: the original error is the one worth reporting.
void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// Removes leftovers of interrupted saves (.tmp-*, .trash-*, latest.tmp), except the directory
// `latest` points to (a save that replaces the current step points it at a .tmp-* directory for
// a moment).
void remove_leftovers(const fs::path& root, const std::optional<std::string>& latest) {
  for (const std::string& name : list_dir(root)) {
    if (latest && name == *latest) continue;
    if (starts_with(name, kTmpPrefix) || starts_with(name, kTrashPrefix) || name == "latest.tmp")
      remove_tree(root / name);
  }
}

void apply_retention(const fs::path& root, int64_t step, int64_t keep, const std::string& latest) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const std::string& name : list_dir(root)) {
    const int64_t s = parse_step_name(name);
    if (s < 0 || name == latest) continue;
    if (s > step)
      remove_tree(root / name);  // abandoned by a crash before `latest` moved
    else
      steps.emplace_back(s, root / name);
  }
  if (keep == 0) return;
  std::sort(steps.begin(), steps.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  // `latest` itself is one of the kept.
  for (size_t i = static_cast<size_t>(keep) - 1; i < steps.size(); ++i)
    remove_tree(steps[i].second);
}

int64_t get_int(const json& state, const char* key, const std::string& where) {
  if (!state.contains(key)) fail("{}: missing key '{}'", where, key);
  const json& v = state[key];
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    fail("{}: '{}' is {} but expected an integer", where, key, v.dump().substr(0, 100));
  return v.get<int64_t>();
}

const json& get_object(const json& state, const char* key, const std::string& where) {
  if (!state.contains(key)) fail("{}: missing key '{}'", where, key);
  const json& v = state[key];
  if (!v.is_object())
    fail("{}: '{}' is {} but expected an object", where, key, v.dump().substr(0, 100));
  return v;
}

void check_step_metadata(const SafetensorsFile& file, int64_t step, const fs::path& path) {
  auto it = file.metadata.find("step");
  if (it != file.metadata.end() && it->second != std::to_string(step))
    fail("{}: metadata step is '{}' but state.json says {} (files from different checkpoints?)",
         path.string(), it->second.substr(0, 100), step);
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) {
  return fmt::format("step-{:06d}", step);
}

json library_versions() {
  const dnnl_version_t* d = dnnl_version();
  json v = json::object();
  v["headlab"] = HEADLAB_VERSION;
  v["onednn"] = fmt::format("{}.{}.{}", d->major, d->minor, d->patch);
  v["openblas"] = blas_info().version;
  v["nlohmann_json"] = fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR,
                                   NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH);
  return v;
}

fs::path save_checkpoint(const fs::path& run_dir, const CheckpointData& data, int64_t keep) {
  if (data.step < 0) fail("save_checkpoint: step is {} but expected >= 0", data.step);
  if (data.data_cursor < 0)
    fail("save_checkpoint: data_cursor is {} but expected >= 0", data.data_cursor);
  if (keep < 0) fail("save_checkpoint: keep is {} but expected >= 0 (0 keeps all)", keep);
  if (!data.extra.is_object())
    fail("save_checkpoint: extra state is {} but expected a JSON object", data.extra.type_name());
  check_rng_states(data.rng_states, "save_checkpoint");
  std::string state_text;
  try {
    state_text = make_state_json(data).dump(2) + "\n";
  } catch (const json::exception& e) {
    fail("save_checkpoint: state.json cannot be written: {}", e.what());
  }

  const fs::path root = run_dir / "checkpoints";
  make_directories(root);
  const fs::path latest_link = root / "latest";
  const std::optional<std::string> old_latest = read_link(latest_link);
  remove_leftovers(root, old_latest);

  const std::string name = checkpoint_dir_name(data.step);
  const fs::path final_dir = root / name;
  const std::string tmp_name = fmt::format("{}{}-{}", kTmpPrefix, name, ::getpid());
  const fs::path tmp = root / tmp_name;
  const fs::path trash = root / fmt::format("{}{}-{}", kTrashPrefix, name, ::getpid());
  try {
    write_checkpoint_files(tmp, data, state_text);
    struct stat st {};
    if (::lstat(final_dir.c_str(), &st) != 0) {
      rename_path(tmp, final_dir);
    } else if (old_latest != name) {
      rename_path(final_dir, trash);
      rename_path(tmp, final_dir);
    } else {
      // Replacing the directory `latest` points to: point `latest` at the complete temporary
      // copy first, so it never dangles, then move the old one away and write the final
      // directory afresh (a directory cannot be renamed onto a non-empty one).
      replace_symlink(latest_link, tmp_name);
      rename_path(final_dir, trash);
      const fs::path tmp2 = root / (tmp_name + "b");
      write_checkpoint_files(tmp2, data, state_text);
      rename_path(tmp2, final_dir);
    }
    fsync_directory(root);
    replace_symlink(latest_link, name);
  } catch (...) {
    // Never remove what `latest` points to now.
    const std::optional<std::string> now = read_link(latest_link);
    if (now != tmp_name) remove_quietly(tmp);
    remove_quietly(root / (tmp_name + "b"));
    throw;
  }
  remove_tree(tmp);
  remove_tree(trash);
  apply_retention(root, data.step, keep, name);
  return final_dir;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const fs::path root = run_dir / "checkpoints";
  const fs::path link = root / "latest";
  struct stat st {};
  if (::lstat(link.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot read '{}': {}", link.string(), std::strerror(errno));
  }
  if (!S_ISLNK(st.st_mode))
    fail("'{}' is not a symbolic link to a checkpoint directory", link.string());
  const std::optional<std::string> target = read_link(link);
  if (!target) fail("cannot read the symbolic link '{}': {}", link.string(), std::strerror(errno));
  if (target->empty() || target->find('/') != std::string::npos || *target == "." ||
      *target == "..")
    fail("'{}' points to '{}', but it must name a directory inside '{}'", link.string(),
         target->substr(0, 200), root.string());
  const fs::path dir = root / *target;
  if (::stat(dir.c_str(), &st) != 0)
    fail("'{}' points to '{}', which does not exist (a dangling link: the checkpoint was removed)",
         link.string(), *target);
  if (!S_ISDIR(st.st_mode))
    fail("'{}' points to '{}', which is not a directory", link.string(), *target);
  return dir;
}

CheckpointData load_checkpoint(const fs::path& run_dir) {
  const std::optional<fs::path> dir = latest_checkpoint(run_dir);
  if (!dir)
    fail("no checkpoint in '{}': '{}' does not exist", run_dir.string(),
         (run_dir / "checkpoints" / "latest").string());
  return load_checkpoint_dir(*dir);
}

CheckpointData load_checkpoint_dir(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("checkpoint '{}' is not a directory", dir.string());
  for (const char* file : kFiles)
    if (::lstat((dir / file).c_str(), &st) != 0)
      fail("checkpoint '{}' is missing {}", dir.string(), file);

  const fs::path state_path = dir / "state.json";
  const std::string where = state_path.string();
  const json state = read_json_file(state_path, kMaxTextBytes);
  const int64_t version = get_int(state, "format_version", where);
  if (version > kCheckpointFormatVersion)
    fail(
        "{}: format_version is {}, but this headlab reads up to {}: the checkpoint was written "
        "by a newer headlab",
        where, version, kCheckpointFormatVersion);
  if (version < 1) fail("{}: format_version is {} but expected >= 1", where, version);

  CheckpointData out;
  out.dir = dir;
  out.step = get_int(state, "step", where);
  if (out.step < 0) fail("{}: step is {} but expected >= 0", where, out.step);
  out.data_cursor = get_int(state, "data_cursor", where);
  if (out.data_cursor < 0) fail("{}: data_cursor is {} but expected >= 0", where, out.data_cursor);
  if (!state.contains("config_hash") || !state["config_hash"].is_string())
    fail("{}: 'config_hash' is missing or not a string", where);
  out.config_hash = state["config_hash"].get<std::string>();
  for (const auto& [name, value] : get_object(state, "rng", where).items()) {
    if (!value.is_string())
      fail("{}: rng '{}' is {} but expected a string", where, name, value.type_name());
    out.rng_states[name] = value.get<std::string>();
  }
  check_rng_states(out.rng_states, where);
  out.versions = get_object(state, "versions", where);
  out.extra = get_object(state, "extra", where);

  const std::string dir_name = dir.filename().string();
  const int64_t named_step = parse_step_name(dir_name);
  if (named_step >= 0 && named_step != out.step)
    fail("{}: step is {} but the directory is named '{}'", where, out.step, dir_name);

  SafetensorsFile model = read_safetensors(dir / "model.safetensors");
  check_step_metadata(model, out.step, dir / "model.safetensors");
  out.model = std::move(model.tensors);
  SafetensorsFile optimizer = read_safetensors(dir / "optimizer.safetensors");
  check_step_metadata(optimizer, out.step, dir / "optimizer.safetensors");
  out.optimizer = std::move(optimizer.tensors);
  out.resolved_config = read_file(dir / "config.resolved.toml", kMaxTextBytes);
  return out;
}

}  // namespace headlab
