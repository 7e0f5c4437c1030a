#include "train/run/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>

#include <dnnl.h>
#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/version.h"
#include "train/io/checksum.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/run/checkpoint_dir.h"
#include "train/run/run_dir.h"

namespace headlab {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace checkpoint_detail;

namespace {

constexpr uint64_t kMaxTextBytes = 64ull << 20;  // state.json, config.resolved.toml
constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kTrashPrefix = ".trash-";
const std::string kChecksumKey = std::string(kChecksumAlgorithm) + ":";

void check_rng_states(const std::map<std::string, std::string>& states, const std::string& where) {
  for (const auto& [name, text] : states) {
    try {
      Rng::parse_state(text);
    } catch (const Error& e) {
      fail("{}: RNG state '{}' is malformed: {}", where, name, e.what());
    }
  }
}

// Throws naming the first NaN or Inf of `tensors`.
void check_finite(const StateDict& tensors, const std::string& where, const char* what) {
  for (const NamedTensor& t : tensors) {
    const float* x = t.tensor.data();
    for (int64_t i = 0; i < t.tensor.numel(); ++i)
      if (!std::isfinite(x[i]))
        fail("{}: tensor '{}' of the {} holds {} at element {}: a checkpoint must be finite", where,
             t.name, what, std::isnan(x[i]) ? "NaN" : "Inf", i);
  }
}

// The metadata of a tensor file: the checkpoint's run id and step, the algorithm and one checksum
// per tensor.
SafetensorsMetadata tensor_metadata(const StateDict& tensors, const CheckpointData& data) {
  SafetensorsMetadata meta = {{"step", std::to_string(data.step)},
                              {"run_id", data.run_id},
                              {"checksum", kChecksumAlgorithm}};
  for (const NamedTensor& t : tensors)
    meta[kChecksumKey + t.name] =
        checksum_hex(t.tensor.data(), static_cast<size_t>(t.tensor.numel()) * sizeof(float));
  return meta;
}

json make_state_json(const CheckpointData& data) {
  json state = json::object();
  state["format_version"] = kCheckpointFormatVersion;
  state["step"] = data.step;
  state["data_cursor"] = data.data_cursor;
  state["config_hash"] = data.config_hash;
  state["run_id"] = data.run_id;
  state["rng"] = data.rng_states;
  state["versions"] = library_versions();
  state["extra"] = data.extra;
  state["files"] = {
      {"config.resolved.toml", checksum_hex(data.resolved_config)},
      {"model.safetensors", tensor_file_digest(data.model, tensor_metadata(data.model, data))},
      {"optimizer.safetensors",
       tensor_file_digest(data.optimizer, tensor_metadata(data.optimizer, data))}};
  state["checksum"] = state_checksum(state);
  return state;
}

// Writes the checkpoint's four files into a fresh directory `dir` (inside checkpoints/) and
// fsyncs them and the directory.
void write_checkpoint_files(const fs::path& dir, const CheckpointData& data,
                            const std::string& state_text) {
  remove_tree(dir);
  if (::mkdir(dir.c_str(), 0755) != 0)
    fail("cannot create directory '{}': {}", dir.string(), std::strerror(errno));
  write_safetensors(dir / "model.safetensors", data.model, tensor_metadata(data.model, data));
  write_safetensors(dir / "optimizer.safetensors", data.optimizer,
                    tensor_metadata(data.optimizer, data));
  write_file_durable(dir / "config.resolved.toml", data.resolved_config);
  write_file_durable(dir / "state.json", state_text);
  fsync_directory(dir);
}

// Best effort, for unwinding after an error: the original error is the one worth reporting.
void remove_quietly(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

void check_save_inputs(const CheckpointData& data, int64_t keep) {
  if (data.step < 0) fail("save_checkpoint: step is {} but expected >= 0", data.step);
  if (data.data_cursor < 0)
    fail("save_checkpoint: data_cursor is {} but expected >= 0", data.data_cursor);
  if (keep < 0) fail("save_checkpoint: keep is {} but expected >= 0 (0 keeps all)", keep);
  if (!data.extra.is_object())
    fail("save_checkpoint: extra state is {} but expected a JSON object", data.extra.type_name());
  check_rng_states(data.rng_states, "save_checkpoint");
  check_finite(data.model, "save_checkpoint", "model");
  check_finite(data.optimizer, "save_checkpoint", "optimizer state");
}

// Moves the finished temporary directory `tmp_name` to `name` and points `latest` at it.
void install_checkpoint(const fs::path& root, const std::string& name, const std::string& tmp_name,
                        const std::optional<std::string>& old_latest, const CheckpointData& data,
                        const std::string& state_text) {
  const fs::path final_dir = root / name, latest_link = root / "latest";
  const std::string trash = fmt::format("{}{}-{}", kTrashPrefix, name, ::getpid());
  struct stat st {};
  if (::lstat(final_dir.c_str(), &st) != 0) {
    rename_path(root / tmp_name, final_dir);
  } else if (old_latest != name) {
    move_checkpoint_away(root, name, trash, true);
    rename_path(root / tmp_name, final_dir);
  } else {
    // Replacing the directory `latest` points to: point `latest` at the complete temporary
    // copy first, so it never dangles, then move the old one away and write the final
    // directory afresh (a directory cannot be renamed onto a non-empty one).
    replace_symlink(latest_link, tmp_name);
    move_checkpoint_away(root, name, trash, true);
    const fs::path tmp2 = root / (tmp_name + "b");
    write_checkpoint_files(tmp2, data, state_text);
    rename_path(tmp2, final_dir);
  }
  fsync_directory(root);
  replace_symlink(latest_link, name);
  remove_tree(root / trash);
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

std::string get_string(const json& state, const char* key, const std::string& where) {
  if (!state.contains(key) || !state[key].is_string())
    fail("{}: '{}' is missing or not a string", where, key);
  return state[key].get<std::string>();
}

// The checksum `stored` of `what` (in `where`) must equal `computed`.
void check_checksum(const std::string& where, const std::string& what, const std::string& stored,
                    const std::string& computed) {
  if (!is_checksum_text(stored))
    fail("{}: the checksum of {} is '{}', not 16 hex digits", where, what, stored.substr(0, 40));
  if (stored != computed)
    fail("{}: {} fails its checksum ({} {} stored, {} computed): the file was changed or damaged",
         where, what, kChecksumAlgorithm, stored, computed);
}

// The format of state.json: kCheckpointFormatVersion, or kOldestCheckpointFormat (read as it
// was written: its tensor files are tied to it by their step only).
int64_t check_version(const json& state, const std::string& where) {
  const int64_t version = get_int(state, "format_version", where);
  if (version > kCheckpointFormatVersion)
    fail(
        "{}: format_version is {}, but this headlab reads only {} and {}: the checkpoint was "
        "written by a newer headlab",
        where, version, kOldestCheckpointFormat, kCheckpointFormatVersion);
  if (version < 1) fail("{}: format_version is {} but expected >= 1", where, version);
  if (version < kOldestCheckpointFormat)
    fail(
        "{}: format_version is {}, written by an older headlab without checksums; this headlab "
        "reads only {} and {}: train the run again",
        where, version, kOldestCheckpointFormat, kCheckpointFormatVersion);
  return version;
}

// What a checkpoint's state.json says its tensor files must be: the format, the run id and
// step they must name, and (format 3) the digest of each file's contents.
struct Owner {
  int64_t version = 0;
  std::string run_id;
  int64_t step = 0;
  const json* files = nullptr;  // state.json's "files"
};

std::string describe_run(const std::string& run_id) {
  return run_id.empty() ? std::string("a checkpoint outside a run directory")
                        : fmt::format("run {}", run_id);
}

// The id of the run directory that holds the checkpoint directory `dir`, or "" when it is not
// inside one (or its marker cannot be read: the run's own check says why).
std::string enclosing_run_id(const fs::path& dir) {
  const fs::path root = dir.parent_path();
  if (root.filename() != "checkpoints" || !has_run_marker(root.parent_path())) return "";
  try {
    return read_run_marker(root.parent_path());
  } catch (const Error&) {
    return "";
  }
}

// A tensor file must belong to the checkpoint whose state.json sits beside it: the same run id
// and step in its metadata (format 3; format 2 files name only the step), and, in format 3, the
// contents state.json recorded. A file copied in from another run, another step or another save
// is refused, naming what it belongs to and what was expected.
void check_tensor_owner(const fs::path& path, const SafetensorsFile& file, const Owner& owner) {
  const std::string where = path.string();
  const std::string name = path.filename().string();
  const auto meta = [&](const std::string& key) -> const std::string* {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? nullptr : &it->second;
  };
  const std::string* step_text = meta("step");
  const std::string* run_id = meta("run_id");
  if (owner.version < kCheckpointFormatVersion) {
    if (run_id)
      fail(
          "{}: it belongs to {} at step {} (written by a headlab that writes checkpoint format "
          "{}), but state.json is format {}: files from different checkpoints",
          where, describe_run(*run_id), step_text ? step_text->substr(0, 100) : "(none)",
          kCheckpointFormatVersion, owner.version);
    if (!step_text || *step_text != std::to_string(owner.step))
      fail("{}: metadata step is '{}' but state.json says {} (files from different checkpoints?)",
           where, step_text ? step_text->substr(0, 100) : "(none)", owner.step);
    return;
  }
  const std::string expected =
      fmt::format("{} at step {} (state.json)", describe_run(owner.run_id), owner.step);
  if (!step_text || !run_id) {
    if (!step_text || *step_text != std::to_string(owner.step))
      fail(
          "{}: metadata step is '{}' but state.json says {}: it belongs to another checkpoint "
          "(and names no run), not to {}",
          where, step_text ? step_text->substr(0, 100) : "(none)", owner.step, expected);
    fail(
        "{}: its metadata names no run id, so it belongs to no checkpoint of this headlab "
        "(copied from an older checkpoint or another tool?); expected the {} of {}",
        where, name, expected);
  }
  const std::string actual =
      fmt::format("{} at step {}", describe_run(run_id->substr(0, 100)), step_text->substr(0, 100));
  if (*run_id != owner.run_id) {
    // Which of the two is the stranger: the run directory's own id decides when there is one.
    const std::string run = enclosing_run_id(path.parent_path());
    if (!run.empty() && run == *run_id)
      fail(
          "{}: it belongs to {} at step {}, but its {} and the run directory are run {}: a "
          "state.json copied in from another run; put back the checkpoint's own state.json",
          (path.parent_path() / "state.json").string(), describe_run(owner.run_id), owner.step,
          name, run);
    fail(
        "{}: it belongs to {}, but the checkpoint is {}: a file copied in from another run; put "
        "back the checkpoint's own {}",
        where, actual, expected, name);
  }
  if (*step_text != std::to_string(owner.step))
    fail(
        "{}: metadata step is '{}' but state.json says {}: it belongs to {}, not to {} (a file "
        "from another checkpoint of the run)",
        where, step_text->substr(0, 100), owner.step, actual, expected);
  if (!owner.files->contains(name) || !(*owner.files)[name].is_string())
    fail("{}/state.json: 'files' has no digest of {}", path.parent_path().string(), name);
  const std::string recorded = (*owner.files)[name].get<std::string>();
  const std::string digest = tensor_file_digest(file.tensors, file.metadata);
  if (recorded != digest)
    fail(
        "{}: it names {}, but its contents are not those state.json recorded (digest {} "
        "recorded, {} found): a file from another save of this step; put back the checkpoint's "
        "own {}",
        where, actual, recorded.substr(0, 40), digest, name);
}

// Reads and verifies the tensor file `path` of the checkpoint `owner` describes.
StateDict read_tensor_file(const fs::path& path, const Owner& owner, const char* what) {
  SafetensorsFile file = read_safetensors(path);
  const std::string where = path.string();
  const auto meta = [&](const std::string& key) -> const std::string* {
    auto it = file.metadata.find(key);
    return it == file.metadata.end() ? nullptr : &it->second;
  };
  const std::string* step_text = meta("step");
  if (owner.version < kCheckpointFormatVersion || !meta("run_id") || !step_text ||
      *step_text != std::to_string(owner.step) || *meta("run_id") != owner.run_id)
    check_tensor_owner(path, file, owner);  // throws for a file of another checkpoint
  const std::string* algorithm = meta("checksum");
  if (!algorithm || *algorithm != kChecksumAlgorithm)
    fail("{}: metadata checksum is '{}' but expected '{}'", where,
         algorithm ? algorithm->substr(0, 100) : "(none)", kChecksumAlgorithm);
  size_t checksums = 0;
  for (const auto& [key, value] : file.metadata) checksums += key.rfind(kChecksumKey, 0) == 0;
  if (checksums != file.tensors.size())
    fail("{}: metadata has {} tensor checksums but the file holds {} tensors", where, checksums,
         file.tensors.size());
  for (const NamedTensor& t : file.tensors) {
    const std::string* stored = meta(kChecksumKey + t.name);
    if (!stored) fail("{}: tensor '{}' has no checksum in the metadata", where, t.name);
    check_checksum(
        where, fmt::format("tensor '{}'", t.name), *stored,
        checksum_hex(t.tensor.data(), static_cast<size_t>(t.tensor.numel()) * sizeof(float)));
  }
  check_finite(file.tensors, where, what);
  // Last, once the file is sound: that it is the very file state.json recorded.
  if (owner.version >= kCheckpointFormatVersion) check_tensor_owner(path, file, owner);
  return std::move(file.tensors);
}

void read_state_fields(const json& state, const std::string& where, CheckpointData& out) {
  out.step = get_int(state, "step", where);
  if (out.step < 0) fail("{}: step is {} but expected >= 0", where, out.step);
  out.data_cursor = get_int(state, "data_cursor", where);
  if (out.data_cursor < 0) fail("{}: data_cursor is {} but expected >= 0", where, out.data_cursor);
  out.config_hash = get_string(state, "config_hash", where);
  out.run_id = get_string(state, "run_id", where);
  for (const auto& [name, value] : get_object(state, "rng", where).items()) {
    if (!value.is_string())
      fail("{}: rng '{}' is {} but expected a string", where, name, value.type_name());
    out.rng_states[name] = value.get<std::string>();
  }
  check_rng_states(out.rng_states, where);
  out.versions = get_object(state, "versions", where);
  out.extra = get_object(state, "extra", where);
}

// Reads the files of `dir`, which the caller holds locked.
CheckpointData read_checkpoint_files(const fs::path& dir) {
  struct stat st {};
  for (const char* file : kFiles)
    if (::lstat((dir / file).c_str(), &st) != 0)
      fail("checkpoint '{}' is missing {}", dir.string(), file);
  const fs::path state_path = dir / "state.json";
  const std::string where = state_path.string();
  const json state = read_json_file(state_path, kMaxTextBytes);
  const int64_t version = check_version(state, where);
  check_checksum(where, "state.json", get_string(state, "checksum", where), state_checksum(state));
  CheckpointData out;
  out.dir = dir;
  read_state_fields(state, where, out);
  const std::string dir_name = dir.filename().string();
  const int64_t named_step = parse_checkpoint_name(dir_name);
  if (named_step >= 0 && named_step != out.step)
    fail("{}: step is {} but the directory is named '{}'", where, out.step, dir_name);
  const json& files = get_object(state, "files", where);
  const Owner owner{version, out.run_id, out.step, &files};
  out.model = read_tensor_file(dir / "model.safetensors", owner, "model");
  out.optimizer = read_tensor_file(dir / "optimizer.safetensors", owner, "optimizer state");
  const fs::path config_path = dir / "config.resolved.toml";
  out.resolved_config = read_file(config_path, kMaxTextBytes);
  if (!files.contains("config.resolved.toml") || !files["config.resolved.toml"].is_string())
    fail("{}: 'files' has no checksum of config.resolved.toml", where);
  check_checksum(config_path.string(), "config.resolved.toml",
                 files["config.resolved.toml"].get<std::string>(),
                 checksum_hex(out.resolved_config));
  return out;
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) {
  return fmt::format("step-{:06d}", step);
}

int64_t parse_checkpoint_name(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
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

std::string tensor_file_digest(const StateDict& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::string text;
  for (const auto& [key, value] : metadata) text += key + '\0' + value + '\n';
  for (const NamedTensor& t : tensors) {
    text += t.name + '\0';
    for (const int64_t d : t.tensor.shape()) text += std::to_string(d) + ',';
    text += '\n';
  }
  return checksum_hex(text);
}

std::string state_checksum(const json& state) {
  json rest = state;
  if (rest.is_object()) rest.erase("checksum");
  return checksum_hex(rest.dump());
}

fs::path save_checkpoint(const fs::path& run_dir, const CheckpointData& data, int64_t keep) {
  check_save_inputs(data, keep);
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
  const std::string tmp_name = fmt::format("{}{}-{}", kTmpPrefix, name, ::getpid());
  const fs::path tmp = root / tmp_name;
  try {
    write_checkpoint_files(tmp, data, state_text);
    install_checkpoint(root, name, tmp_name, old_latest, data, state_text);
  } catch (...) {
    // Never remove what `latest` points to now.
    const std::optional<std::string> now = read_link(latest_link);
    if (now != tmp_name) remove_quietly(tmp);
    remove_quietly(root / (tmp_name + "b"));
    throw;
  }
  remove_tree(tmp);
  apply_retention(root, data.step, keep, name);
  return root / name;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  const fs::path root = run_dir / "checkpoints";
  const fs::path link = root / "latest";
  struct stat st {};
  if (::lstat(link.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
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
  // Retention may remove the directory `latest` named a moment ago; `latest` then names a newer
  // one. A handful of tries is plenty: each save moves `latest` once.
  for (int attempt = 0;; ++attempt) {
    const std::optional<fs::path> dir = latest_checkpoint(run_dir);
    if (!dir)
      fail("no checkpoint in '{}': '{}' does not exist", run_dir.string(),
           (run_dir / "checkpoints" / "latest").string());
    ReaderLock lock(*dir);
    if (!lock.removed()) return read_checkpoint_files(*dir);
    if (attempt == 8)
      fail(
          "checkpoint '{}' was removed while it was read, {} times: is something deleting "
          "checkpoints?",
          dir->string(), attempt + 1);
  }
}

CheckpointData load_checkpoint_dir(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("checkpoint '{}' is not a directory", dir.string());
  ReaderLock lock(dir);
  if (lock.removed())
    fail("checkpoint '{}' was removed (train.keep_checkpoints) while it was being read",
         dir.string());
  return read_checkpoint_files(dir);
}

}  // namespace headlab
