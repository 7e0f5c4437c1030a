// libFuzzer target: the config loader. The input is TOML text for parse_config (file errors,
// types, ranges, cross-field checks), and its first line is also tried as a `--set` override
// over a minimal valid config. Every rejection must be a headlab::Error; anything else (another
// exception, a crash, a sanitizer report) is a finding. An accepted config must survive the
// round trip the header promises: parse_config(to_toml(c)) gives an equal config.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "train/config/config.h"

namespace {

void check_round_trip(const headlab::Config& config) {
  // The resolved config must read back to the same values; its "# override:" comments record
  // how it was made and are not read back (the config read from it has no overrides).
  headlab::Config values = config;
  values.overrides.clear();
  const headlab::Config again = headlab::parse_config(headlab::to_toml(config), "resolved.toml");
  if (headlab::to_toml(again) != headlab::to_toml(values)) std::abort();
  const headlab::MemoryEstimate m = headlab::estimate_memory(config);
  if (!(m.total_bytes() >= 0)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check_round_trip(headlab::parse_config(text, "fuzz.toml"));
  } catch (const headlab::Error&) {
  }
  const std::string_view line = text.substr(0, std::min(text.find('\n'), size_t{4096}));
  const std::string overrides[] = {std::string(line)};
  try {
    check_round_trip(
        headlab::parse_config("[task]\nname = \"dependency\"\n", "base.toml", overrides));
  } catch (const headlab::Error&) {
  }
  return 0;
}
