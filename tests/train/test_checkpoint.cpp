// Checkpoint directories: layout, round trip, retention, `latest` handling, validation of what
// is read back, and failed saves (unwritable directory, full file system, a killed process)
// that leave the previous checkpoint and `latest` intact.

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/version.h"
#include "layers/module.h"
#include "tests/temp_dir.h"
#include "train/io/checksum.h"
#include "train/io/files.h"
#include "train/io/safetensors.h"
#include "train/run/checkpoint.h"
#include "train/run/checkpoint_dir.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

using TempDir = testing::TempDir;

class TinyModel : public Module {
 public:
  TinyModel() {
    w = register_parameter("w", Tensor::zeros({3, 4}));
    b = register_parameter("b", Tensor::zeros({4}));
  }
  Var w, b;
};

// Checkpoint contents that depend on `step`, so a loaded one can be checked against its step.
CheckpointData make_data(int64_t step, int64_t numel = 12) {
  CheckpointData c;
  c.step = step;
  Tensor w = Tensor::empty({numel / 4, 4}), b = Tensor::empty({4});
  for (int64_t i = 0; i < w.numel(); ++i)
    w[i] = static_cast<float>(step) + 0.25f * static_cast<float>(i);
  for (int64_t i = 0; i < 4; ++i) b[i] = -static_cast<float>(step) - static_cast<float>(i);
  c.model = {{"w", w}, {"b", b}};
  c.optimizer = {{"exp_avg.w", w.clone()},
                 {"exp_avg.b", b.clone()},
                 {"step", Tensor::from({2}, {0, static_cast<float>(step)})}};
  Rng rng(static_cast<uint64_t>(step));
  c.rng_states["dropout"] = rng.state_string();
  c.data_cursor = step;
  c.extra["best_eval"] = 0.5;
  c.resolved_config = fmt::format("[train]\nsteps = {}\n", step * 10);
  c.config_hash = fmt::format("{:016x}", step);
  return c;
}

void check_matches(const CheckpointData& got, int64_t step) {
  const CheckpointData want = make_data(step, got.model.at(0).tensor.numel());
  CHECK(got.step == step);
  REQUIRE(got.model.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(got.model[i].name == want.model[i].name);
    CHECK(got.model[i].tensor.to_vector() == want.model[i].tensor.to_vector());
  }
  REQUIRE(got.optimizer.size() == 3);
  CHECK(got.optimizer[2].name == "step");
  CHECK(got.optimizer[2].tensor.to_vector() == want.optimizer[2].tensor.to_vector());
  CHECK(got.rng_states == want.rng_states);
  CHECK(got.data_cursor == step);
  CHECK(got.extra == want.extra);
  CHECK(got.resolved_config == want.resolved_config);
  CHECK(got.config_hash == want.config_hash);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string load_error(const fs::path& run) {
  try {
    load_checkpoint(run);
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find('\n') == std::string::npos);
    return message;
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("train: checkpoint save writes the layout and loads back exactly") {
  TempDir run("headlab-ckpt");
  const fs::path dir = save_checkpoint(run.path, make_data(5), 3);
  CHECK(dir == run.path / "checkpoints" / "step-000005");
  CHECK(entries(run.path / "checkpoints") == std::vector<std::string>{"latest", "step-000005"});
  CHECK(entries(dir) == std::vector<std::string>{"config.resolved.toml", "model.safetensors",
                                                 "optimizer.safetensors", "state.json"});
  CHECK(fs::is_symlink(run.path / "checkpoints" / "latest"));
  CHECK(fs::read_symlink(run.path / "checkpoints" / "latest") == "step-000005");  // relative
  const auto state = nlohmann::json::parse(read_text(dir / "state.json"));
  CHECK(state["format_version"].is_number_integer());
  CHECK(state["format_version"] == kCheckpointFormatVersion);
  CHECK(state["step"] == 5);
  CHECK(state["versions"]["headlab"] == HEADLAB_VERSION);
  CHECK(state["versions"].contains("onednn"));
  CHECK(state["versions"].contains("openblas"));
  CHECK(read_safetensors(dir / "model.safetensors").metadata.at("step") == "5");

  CHECK(latest_checkpoint(run.path) == dir);
  const CheckpointData loaded = load_checkpoint(run.path);
  check_matches(loaded, 5);
  CHECK(loaded.dir == dir);
  CHECK(loaded.versions == state["versions"]);
  TinyModel model;
  model.load_state_dict(loaded.model);
  CHECK(model.w.value().to_vector() == loaded.model[0].tensor.to_vector());
  CHECK(checkpoint_dir_name(1234567) == "step-1234567");
}

TEST_CASE("train: checkpoint retention keeps the newest and never what latest points to") {
  TempDir run("headlab-ckpt");
  for (int64_t step = 10; step <= 50; step += 10) save_checkpoint(run.path, make_data(step), 2);
  CHECK(entries(run.path / "checkpoints") ==
        std::vector<std::string>{"latest", "step-000040", "step-000050"});
  check_matches(load_checkpoint(run.path), 50);
  save_checkpoint(run.path, make_data(60), 1);
  CHECK(entries(run.path / "checkpoints") == std::vector<std::string>{"latest", "step-000060"});
  for (int64_t step = 70; step <= 90; step += 10) save_checkpoint(run.path, make_data(step), 0);
  CHECK(entries(run.path / "checkpoints").size() == 5);  // keep = 0 keeps all
  // Saving the step `latest` points to again replaces it (crash-safe path).
  CheckpointData again = make_data(90);
  again.extra["note"] = "second";
  save_checkpoint(run.path, again, 0);
  CHECK(load_checkpoint(run.path).extra["note"] == "second");
  CHECK(entries(run.path / "checkpoints").size() == 5);
  // Saving an existing older step that latest does not point to replaces it as well.
  save_checkpoint(run.path, make_data(80), 0);
  CHECK(fs::read_symlink(run.path / "checkpoints" / "latest") == "step-000080");
  // step-000090 was newer than the saved step: abandoned, removed.
  CHECK(entries(run.path / "checkpoints") ==
        std::vector<std::string>{"latest", "step-000060", "step-000070", "step-000080"});
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path, make_data(1), -1), doctest::Contains("keep is -1"),
                       Error);
}

TEST_CASE("train: checkpoint leftovers of a crashed save are ignored and then cleaned") {
  TempDir run("headlab-ckpt");
  save_checkpoint(run.path, make_data(100), 3);
  const fs::path root = run.path / "checkpoints";
  // What a save killed mid-way leaves: a partial temporary directory, a trash directory, a
  // stale latest.tmp link, and a complete step directory that `latest` never pointed to.
  fs::create_directories(root / ".tmp-step-000200-999");
  write_text(root / ".tmp-step-000200-999" / "model.safetensors", "partial");
  fs::create_directories(root / ".trash-step-000100-998");
  fs::create_symlink("step-000200", root / "latest.tmp");
  fs::copy(root / "step-000100", root / "step-000300");
  check_matches(load_checkpoint(run.path), 100);  // still `latest`, untouched
  save_checkpoint(run.path, make_data(200), 3);
  CHECK(entries(root) == std::vector<std::string>{"latest", "step-000100", "step-000200"});
  check_matches(load_checkpoint(run.path), 200);
}

TEST_CASE("train: checkpoint latest missing, dangling or pointing outside is a clear error") {
  TempDir run("headlab-ckpt");
  CHECK_FALSE(latest_checkpoint(run.path).has_value());
  CHECK(load_error(run.path) == fmt::format("no checkpoint in '{}': '{}' does not exist",
                                            run.path.string(),
                                            (run.path / "checkpoints" / "latest").string()));
  save_checkpoint(run.path, make_data(1), 3);
  const fs::path root = run.path / "checkpoints";
  fs::remove_all(root / "step-000001");
  CHECK(load_error(run.path).find("points to 'step-000001', which does not exist (a dangling") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(latest_checkpoint(run.path), doctest::Contains("dangling"), Error);
  fs::remove(root / "latest");
  fs::create_symlink("/etc", root / "latest");
  CHECK(load_error(run.path).find("points to '/etc', but it must name a directory inside") !=
        std::string::npos);
  fs::remove(root / "latest");
  fs::create_symlink("../..", root / "latest");
  CHECK(load_error(run.path).find("must name a directory inside") != std::string::npos);
  fs::remove(root / "latest");
  write_text(root / "latest", "step-000001");
  CHECK(load_error(run.path).find("is not a symbolic link") != std::string::npos);
  // A fresh save repairs it.
  fs::remove(root / "latest");
  save_checkpoint(run.path, make_data(2), 3);
  check_matches(load_checkpoint(run.path), 2);
}

TEST_CASE("train: checkpoint state.json problems and missing files are named") {
  TempDir run("headlab-ckpt");
  const fs::path dir = save_checkpoint(run.path, make_data(3), 3);
  const fs::path state_path = dir / "state.json";
  const std::string good = read_text(state_path);
  // Edits as a tool that knows the format would, signing the result (a checksum mismatch is
  // its own case below), so the checks behind the checksum are reached.
  auto with_state = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto j = nlohmann::json::parse(good);
    edit(j);
    j["checksum"] = state_checksum(j);
    write_text(state_path, j.dump());
    return load_error(run.path);
  };
  auto contains = [](const std::string& message, const std::string& fragment) {
    INFO("message: " << message);
    CHECK(message.find(fragment) != std::string::npos);
  };
  contains(with_state([](auto& j) { j["format_version"] = 7; }),
           state_path.string() +
               ": format_version is 7, but this headlab reads only 2 and 3: the "
               "checkpoint was written by a newer headlab");
  contains(with_state([](auto& j) { j["format_version"] = 1; }),
           "format_version is 1, written by an older headlab without checksums");
  contains(with_state([](auto& j) { j["format_version"] = "1"; }),
           "'format_version' is \"1\" but expected an integer");
  contains(with_state([](auto& j) { j["format_version"] = 0; }), "format_version is 0");
  contains(with_state([](auto& j) { j.erase("step"); }), "missing key 'step'");
  contains(with_state([](auto& j) { j["step"] = 4; }),
           "step is 4 but the directory is named 'step-000003'");
  contains(with_state([](auto& j) { j["step"] = 1.5; }), "'step' is 1.5 but expected an integer");
  contains(with_state([](auto& j) { j["rng"]["dropout"] = "xoshiro256**:zz"; }),
           "RNG state 'dropout' is malformed");
  contains(with_state([](auto& j) { j["extra"] = 3; }), "'extra' is 3 but expected an object");
  // Unsigned edits: the checksum says the file changed.
  auto unsigned_state = nlohmann::json::parse(good);
  unsigned_state["step"] = 3;
  unsigned_state["data_cursor"] = 2;
  write_text(state_path, unsigned_state.dump());
  contains(load_error(run.path), state_path.string() + ": state.json fails its checksum");
  unsigned_state = nlohmann::json::parse(good);
  unsigned_state.erase("checksum");
  write_text(state_path, unsigned_state.dump());
  contains(load_error(run.path), "'checksum' is missing or not a string");
  write_text(state_path, good.substr(0, good.size() / 2));
  contains(load_error(run.path), state_path.string() + ": not valid JSON");
  write_text(state_path, std::string(200000, '[') + std::string(200000, ']'));
  contains(load_error(run.path), "nests deeper than 64 levels");
  write_text(state_path, good);
  check_matches(load_checkpoint(run.path), 3);

  // Tensor files: missing, truncated, from another step.
  const std::string model = read_text(dir / "model.safetensors");
  fs::remove(dir / "optimizer.safetensors");
  contains(load_error(run.path), "is missing optimizer.safetensors");
  write_safetensors(dir / "optimizer.safetensors", make_data(3).optimizer, {{"step", "2"}});
  contains(load_error(run.path),
           "optimizer.safetensors: metadata step is '2' but state.json says 3");
  write_safetensors(dir / "optimizer.safetensors", make_data(3).optimizer, {{"step", "3"}});
  contains(load_error(run.path), "optimizer.safetensors: its metadata names no run id");
  write_safetensors(dir / "optimizer.safetensors", make_data(3).optimizer,
                    {{"step", "3"}, {"run_id", ""}});
  contains(load_error(run.path), "optimizer.safetensors: metadata checksum is '(none)'");
  save_checkpoint(run.path, make_data(3), 3);
  write_text(dir / "model.safetensors", model.substr(0, model.size() - 3));
  contains(load_error(run.path), (dir / "model.safetensors").string() + ": ");
  write_text(dir / "model.safetensors", model);
  check_matches(load_checkpoint(run.path), 3);
  fs::remove(dir / "config.resolved.toml");
  contains(load_error(run.path), "is missing config.resolved.toml");
}

// The run ids of two runs, and a second save of the same run and step with other weights.
CheckpointData of_run(int64_t step, const std::string& run_id, float shift = 0) {
  CheckpointData c = make_data(step);
  c.run_id = run_id;
  for (NamedTensor& t : c.model)
    for (int64_t i = 0; i < t.tensor.numel(); ++i) t.tensor[i] += shift;
  return c;
}

TEST_CASE("train: checkpoint files of another run, step or save are refused, naming both") {
  TempDir a("headlab-ckpt"), b("headlab-ckpt"), again("headlab-ckpt");
  save_checkpoint(a.path, of_run(2, "aaaaaaaaaaaaaaaa"), 0);
  const fs::path dir = save_checkpoint(a.path, of_run(3, "aaaaaaaaaaaaaaaa"), 0);
  const fs::path other = save_checkpoint(b.path, of_run(3, "bbbbbbbbbbbbbbbb"), 0);
  const fs::path resaved = save_checkpoint(again.path, of_run(3, "aaaaaaaaaaaaaaaa", 0.5f), 0);
  const auto state = nlohmann::json::parse(read_text(dir / "state.json"));
  CHECK(state["format_version"] == 3);
  CHECK(state["files"]["model.safetensors"].get<std::string>().size() == 16);
  CHECK(read_safetensors(dir / "optimizer.safetensors").metadata.at("run_id") ==
        "aaaaaaaaaaaaaaaa");
  const auto swapped = [&](const char* file, const fs::path& from) {
    const std::string own = read_text(dir / file);
    write_text(dir / file, read_text(from / file));
    const std::string message = load_error(a.path);
    write_text(dir / file, own);
    return message;
  };
  const std::string where = (dir / "model.safetensors").string();
  CHECK(swapped("model.safetensors", other) ==
        where +
            ": it belongs to run bbbbbbbbbbbbbbbb at step 3, but the checkpoint is run "
            "aaaaaaaaaaaaaaaa at step 3 (state.json): a file copied in from another run; put back "
            "the checkpoint's own model.safetensors");
  CHECK(swapped("optimizer.safetensors", a.path / "checkpoints" / "step-000002")
            .find("optimizer.safetensors: metadata step is '2' but state.json says 3: it belongs "
                  "to run aaaaaaaaaaaaaaaa at step 2, not to run aaaaaaaaaaaaaaaa at step 3") !=
        std::string::npos);
  // The same run and step, another save: only the digest in state.json tells them apart.
  CHECK(swapped("model.safetensors", resaved)
            .find("its contents are not those state.json "
                  "recorded") != std::string::npos);
  CHECK(swapped("optimizer.safetensors", resaved) == "(no error)");  // the same optimizer state
  // Outside a run directory nothing says which one is the stranger: the tensor file is named.
  CHECK(
      swapped("state.json", other).find("model.safetensors: it belongs to run aaaaaaaaaaaaaaaa") !=
      std::string::npos);
  check_matches(load_checkpoint(a.path), 3);
}

TEST_CASE("train: checkpoint format 2 (tensor files tied by their step only) still loads") {
  TempDir run("headlab-ckpt");
  const fs::path dir = save_checkpoint(run.path, of_run(3, "aaaaaaaaaaaaaaaa"), 0);
  const std::string format3_model = read_text(dir / "model.safetensors");
  // What a headlab of format 2 wrote: no run id in the tensor files, no digests in state.json.
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    SafetensorsFile f = read_safetensors(dir / file);
    f.metadata.erase("run_id");
    write_safetensors(dir / file, f.tensors, f.metadata);
  }
  auto state = nlohmann::json::parse(read_text(dir / "state.json"));
  state["format_version"] = 2;
  state["files"].erase("model.safetensors");
  state["files"].erase("optimizer.safetensors");
  state["checksum"] = state_checksum(state);
  write_text(dir / "state.json", state.dump());
  check_matches(load_checkpoint(run.path), 3);
  // A format-3 file beside a format-2 state.json is from another checkpoint.
  write_text(dir / "model.safetensors", format3_model);
  CHECK(load_error(run.path).find(
            "model.safetensors: it belongs to run aaaaaaaaaaaaaaaa at step 3 (written by a headlab "
            "that writes checkpoint format 3), but state.json is format 2") != std::string::npos);
}

TEST_CASE("train: checkpoint tensors carry checksums, damage and non-finite values are refused") {
  TempDir run("headlab-ckpt");
  const fs::path dir = save_checkpoint(run.path, make_data(6, 1 << 12), 3);
  const fs::path model = dir / "model.safetensors";
  const SafetensorsFile f = read_safetensors(model);
  CHECK(f.metadata.at("checksum") == "xxh3_64");
  CHECK(f.metadata.at("xxh3_64:w").size() == 16);
  CHECK(f.metadata.at("xxh3_64:b").size() == 16);
  const std::string good = read_text(model);
  // Zeroing 4 KB inside the data: the checksum of the tensor there fails, naming both.
  std::string zeroed = good;
  std::fill(zeroed.end() - 4096 - 64, zeroed.end() - 64, '\0');
  write_text(model, zeroed);
  const std::string damaged = load_error(run.path);
  CHECK_MESSAGE(
      damaged.find(model.string() + ": tensor 'w' fails its checksum") != std::string::npos,
      damaged);
  // One flipped bit anywhere in the data.
  std::string flipped = good;
  flipped[flipped.size() - 5] ^= 0x10;
  write_text(model, flipped);
  CHECK(load_error(run.path).find("fails its checksum") != std::string::npos);
  // The config saved beside it is checked too.
  write_text(model, good);
  const std::string config = read_text(dir / "config.resolved.toml");
  write_text(dir / "config.resolved.toml", config + "# edited\n");
  CHECK(load_error(run.path).find("config.resolved.toml fails its checksum") != std::string::npos);
  write_text(dir / "config.resolved.toml", config);
  check_matches(load_checkpoint(run.path), 6);

  // NaN weights with valid checksums: refused on load, and never saved.
  CheckpointData nan = make_data(7);
  nan.model[0].tensor[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path, nan, 3),
                       doctest::Contains("tensor 'w' of the model holds NaN at element 3"), Error);
  CHECK(fs::read_symlink(run.path / "checkpoints" / "latest") == "step-000006");
  SafetensorsFile all_nan = read_safetensors(model);
  for (NamedTensor& t : all_nan.tensors)
    for (int64_t i = 0; i < t.tensor.numel(); ++i) t.tensor[i] = std::nanf("");
  SafetensorsMetadata meta = all_nan.metadata;
  for (const NamedTensor& t : all_nan.tensors)
    meta["xxh3_64:" + t.name] =
        checksum_hex(t.tensor.data(), static_cast<size_t>(t.tensor.numel()) * sizeof(float));
  write_safetensors(model, all_nan.tensors, meta);
  CHECK(load_error(run.path).find("holds NaN at element 0: a checkpoint must be finite") !=
        std::string::npos);
}

TEST_CASE("train: checkpoint retention and cleanup touch only headlab's own names") {
  TempDir run("headlab-ckpt");
  const fs::path root = run.path / "checkpoints";
  save_checkpoint(run.path, make_data(1), 1);
  // Someone else's things that look like ours.
  fs::create_directories(root / "step-000000");  // a user's directory, not a checkpoint
  write_text(root / "step-000000" / "notes.txt", "mine");
  fs::create_directories(root / ".tmp-mine");
  fs::create_directories(root / ".trash-step-x");
  write_text(root / "step-000005", "a file named like a step");
  for (int64_t step = 2; step <= 4; ++step) save_checkpoint(run.path, make_data(step), 1);
  CHECK(entries(root) == std::vector<std::string>{".tmp-mine", ".trash-step-x", "latest",
                                                  "step-000000", "step-000004", "step-000005"});
  CHECK(read_text(root / "step-000000" / "notes.txt") == "mine");
  CHECK(foreign_checkpoint_entry(run.path) == "checkpoints/.tmp-mine");
}

TEST_CASE("train: checkpoint readers hold a lock that retention respects") {
  TempDir run("headlab-ckpt");
  save_checkpoint(run.path, make_data(1), 1);
  const fs::path held = run.path / "checkpoints" / "step-000001";
  {
    checkpoint_detail::ReaderLock reader(held);
    CHECK_FALSE(reader.removed());
    save_checkpoint(run.path, make_data(2), 1);  // retention would remove step-000001
    CHECK(fs::exists(held / "model.safetensors"));
    check_matches(load_checkpoint_dir(held), 1);
  }
  save_checkpoint(run.path, make_data(3), 1);  // the reader is gone: now it goes
  CHECK(entries(run.path / "checkpoints") == std::vector<std::string>{"latest", "step-000003"});
}

TEST_CASE("train: checkpoint tensors missing, extra or mis-shaped are reported by the model") {
  TempDir run("headlab-ckpt");
  CheckpointData c = make_data(4, 16);  // w is [4, 4] but the model's is [3, 4]
  c.model.push_back({"extra", Tensor::zeros({1})});
  save_checkpoint(run.path, c, 3);
  TinyModel model;
  CHECK_THROWS_WITH_AS(model.load_state_dict(load_checkpoint(run.path).model),
                       "load_state_dict: 2 problems: 'w' has shape [4, 4] but the model expects "
                       "[3, 4]; unexpected 'extra'",
                       Error);
  c = make_data(5);
  c.model.pop_back();
  save_checkpoint(run.path, c, 3);
  CHECK_THROWS_WITH_AS(model.load_state_dict(load_checkpoint(run.path).model),
                       doctest::Contains("missing 'b'"), Error);
}

TEST_CASE("train: checkpoint save refuses bad data before writing anything") {
  TempDir run("headlab-ckpt");
  CheckpointData c = make_data(1);
  c.rng_states["dropout"] = "not a state";
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path, c, 3), doctest::Contains("RNG state 'dropout'"),
                       Error);
  c = make_data(1);
  c.model.push_back({"w", Tensor::zeros({1})});
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path, c, 3), doctest::Contains("'w' appears twice"),
                       Error);
  c = make_data(-1);
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path, c, 3), doctest::Contains("step is -1"), Error);
  CHECK(!fs::exists(run.path / "checkpoints" / "latest"));
  CHECK(entries(run.path / "checkpoints").empty());  // the failed temporary directory is gone
}

TEST_CASE("train: checkpoint into an unwritable directory fails clearly and keeps the last one") {
  TempDir run("headlab-ckpt");
  write_text(run.path / "file", "x");
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path / "file" / "run", make_data(1), 3),
                       doctest::Contains("Not a directory"), Error);

  save_checkpoint(run.path, make_data(1), 3);
  if (::geteuid() == 0) {
    MESSAGE("skipped the chmod check: running as root, whom permissions do not stop");
    return;
  }
  fs::permissions(run.path / "checkpoints", fs::perms::owner_read | fs::perms::owner_exec);
  CHECK_THROWS_WITH_AS(save_checkpoint(run.path, make_data(2), 3),
                       doctest::Contains("Permission denied"), Error);
  fs::permissions(run.path / "checkpoints", fs::perms::owner_all);
  check_matches(load_checkpoint(run.path), 1);
}

TEST_CASE("train: checkpoint on a full file system fails clearly and keeps the last one") {
  // RLIMIT_FSIZE makes write() fail with EFBIG at a chosen byte, as a full disk fails with
  // ENOSPC, also for root. Every cut point must leave `latest` at the previous checkpoint.
  TempDir run("headlab-ckpt");
  save_checkpoint(run.path, make_data(1, 4096), 3);
  struct rlimit old_limit {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  int failures = 0;
  for (rlim_t limit : {rlim_t{0}, rlim_t{100}, rlim_t{4096}, rlim_t{16400}, rlim_t{16500}}) {
    struct rlimit small = old_limit;
    small.rlim_cur = limit;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string message;
    try {
      save_checkpoint(run.path, make_data(2, 4096), 3);
    } catch (const Error& e) {
      message = e.what();
    }
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    INFO("limit " << limit << ": " << message);
    CHECK(message.find("File too large") != std::string::npos);
    CHECK(message.find("cannot write '") != std::string::npos);
    failures += !message.empty();
    check_matches(load_checkpoint(run.path), 1);
    CHECK(entries(run.path / "checkpoints") == std::vector<std::string>{"latest", "step-000001"});
  }
  ::signal(SIGXFSZ, old_handler);
  CHECK(failures == 5);
  save_checkpoint(run.path, make_data(2, 4096), 3);
  check_matches(load_checkpoint(run.path), 2);
}

TEST_CASE("train: checkpoint survives SIGKILL at any moment of a save") {
  // A child saves checkpoints in a loop; the parent kills it after delays drawn from a fixed
  // seed. Wherever the kill lands, `latest` must name a complete checkpoint of some saved step.
  TempDir run("headlab-ckpt");
  // The kill delays are drawn over a few save durations, measured here, so kills land before,
  // during and between saves on fast and slow disks alike (no assertion depends on timing).
  const auto t0 = std::chrono::steady_clock::now();
  save_checkpoint(run.path, make_data(0, 1 << 16), 2);
  const auto save_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  Rng rng(2024);
  int64_t last_seen = 0;
  for (int round = 0; round < 8; ++round) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        for (int64_t step = last_seen + 1;; ++step)
          save_checkpoint(run.path, make_data(step, 1 << 16), 2);
      } catch (...) {
        ::_exit(1);
      }
    }
    ::usleep(static_cast<useconds_t>(1000 + rng.below(static_cast<uint64_t>(4 * save_us + 1))));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    const CheckpointData c = load_checkpoint(run.path);
    check_matches(c, c.step);
    CHECK(c.step >= last_seen);
    last_seen = c.step;
  }
  MESSAGE("one save took " << save_us << " us; after 8 kills the latest checkpoint is step "
                           << last_seen);
  save_checkpoint(run.path, make_data(last_seen + 1, 1 << 16), 2);
  CHECK(entries(run.path / "checkpoints").size() == 3);  // leftovers cleaned: latest + 2 steps
}
