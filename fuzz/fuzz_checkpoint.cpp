// libFuzzer target: the checkpoint reader (latest_checkpoint + load_checkpoint_dir) on a real
// directory. A valid checkpoint is written once; every input then replaces one part of it,
// chosen by its first byte, with the rest of the input:
//   0 state.json   1 model.safetensors   2 optimizer.safetensors   3 config.resolved.toml
//   4 the target of checkpoints/latest
// and the run directory is loaded. With the first byte's high bit set, a state.json that parses
// and a tensor file that parses are re-signed first (their checksums recomputed, as a tool that
// knows the format would), so the checks behind the checksums are fuzzed too. Every rejection
// must be a headlab::Error; an accepted checkpoint must carry the step its directory is named
// after.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "train/io/checksum.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/io/safetensors.h"
#include "train/run/checkpoint.h"

namespace {

namespace fs = std::filesystem;

struct Fixture {
  fs::path run;
  fs::path dir;
  std::string originals[4];
};

const char* const kParts[] = {"state.json", "model.safetensors", "optimizer.safetensors",
                              "config.resolved.toml"};

Fixture make_fixture() {
  // /dev/shm keeps the per-input writes off the disk when it exists.
  const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  Fixture f;
  f.run = base / ("headlab-fuzz-checkpoint-" + std::to_string(::getpid()));
  fs::remove_all(f.run);
  headlab::CheckpointData c;
  c.step = 3;
  c.data_cursor = 3;
  headlab::Tensor w = headlab::Tensor::zeros({2, 3});
  headlab::Tensor b = headlab::Tensor::zeros({3});
  c.model = {{"w", w}, {"b", b}};
  c.optimizer = {{"w.exp_avg", w}, {"b.exp_avg", b}};
  c.rng_states["dropout"] = headlab::Rng(7).state_string();
  c.resolved_config = "[task]\nname = \"dependency\"\n";
  c.config_hash = "0123456789abcdef";
  f.dir = headlab::save_checkpoint(f.run, c, 1);
  for (int i = 0; i < 4; ++i)
    f.originals[i] = headlab::read_file(f.dir / kParts[i], uint64_t{1} << 20);
  static fs::path created;
  created = f.run;
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(created, ec);
  });
  return f;
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// `bytes` for part `part` with fresh checksums, when it parses; else unchanged.
std::string resign(int part, const std::string& bytes) {
  try {
    if (part == 0) {
      nlohmann::json state = headlab::parse_json(bytes, "state.json");
      state["checksum"] = headlab::state_checksum(state);
      return state.dump();
    }
    if (part == 1 || part == 2) {
      headlab::SafetensorsFile f = headlab::parse_safetensors(bytes, "tensors");
      for (const auto& t : f.tensors)
        f.metadata["xxh3_64:" + t.name] = headlab::checksum_hex(
            t.tensor.data(), static_cast<size_t>(t.tensor.numel()) * sizeof(float));
      const fs::path tmp =
          fs::temp_directory_path() / ("headlab-fuzz-resign-" + std::to_string(::getpid()));
      headlab::write_safetensors(tmp, f.tensors, f.metadata);
      std::string out = headlab::read_file(tmp, uint64_t{1} << 30);
      fs::remove(tmp);
      return out;
    }
  } catch (const headlab::Error&) {
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Fixture f = make_fixture();
  if (size == 0) return 0;
  const int part = (data[0] & 0x7f) % 5;
  std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 0x80) rest = resign(part, rest);
  const fs::path link = f.run / "checkpoints" / "latest";
  if (part < 4) {
    write(f.dir / kParts[part], rest);
  } else {
    fs::remove(link);
    // A link target cannot hold NUL; keep it a plausible path.
    std::error_code ec;
    fs::create_symlink(rest.substr(0, rest.find('\0')), link, ec);
  }
  try {
    const headlab::CheckpointData c = headlab::load_checkpoint(f.run);
    if (c.step != 3) std::abort();  // the directory is step-000003
  } catch (const headlab::Error&) {
  }
  if (part < 4) {
    write(f.dir / kParts[part], f.originals[part]);
  } else {
    fs::remove(link);
    fs::create_symlink(f.dir.filename(), link);
  }
  return 0;
}
