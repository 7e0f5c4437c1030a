// Planning a sweep: the grid of runs, each one's config validated, its directory name and, for
// --resume, what is left to do.

#include "train/sweep/plan.h"

#include <cctype>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "train/config/config.h"
#include "train/io/checksum.h"
#include "train/io/json.h"
#include "train/report/report.h"
#include "train/run/checkpoint.h"
#include "train/run/run_dir.h"
#include "train/run/run_json.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

// Characters outside [A-Za-z0-9.,+-] become '_'.
std::string sanitize(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != ',' && c != '-' &&
        c != '+')
      c = '_';
  return name;
}

// "model.heads" + "4" -> "heads-4".
std::string dir_part(const std::string& key, const std::string& plain) {
  return sanitize(key.substr(key.rfind('.') + 1) + "-" + plain);
}

std::string join(const std::vector<std::string>& values, const char* separator) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : separator) + v;
  return out;
}

std::string values_text(const SweepRun& r) {
  std::string s;
  for (size_t k = 0; k < r.values.size(); ++k)
    s += fmt::format("{}={} ", r.values[k].first, r.plain_values[k]);
  return s + fmt::format("seed={}", r.seed);
}

// A name no longer than kMaxRunNameBytes: a long one keeps its head and ends in a hash of all of
// it.
std::string bounded_name(const std::string& name) {
  if (name.size() <= kMaxRunNameBytes) return name;
  return name.substr(0, kMaxRunNameBytes - 17) + "-" + checksum_hex(name);
}

void check_spec(const SweepSpec& spec) {
  if (spec.over.empty()) fail("give at least one --over KEY=V1,V2,...");
  if (spec.seeds < 1 || spec.seeds > kMaxSeeds)
    fail("--seeds = {} is out of range: expected an integer in [1, {}]", spec.seeds, kMaxSeeds);
  std::set<std::string> keys;
  int64_t runs = spec.seeds;
  for (const SweepAxis& a : spec.over) {
    if (!keys.insert(a.key).second) fail("--over {} is given twice", a.key);
    if (a.key == "train.seed") fail("--over train.seed is not allowed; use --seeds N");
    runs = std::min<int64_t>(runs * static_cast<int64_t>(a.values.size()), kMaxRuns + 1);
  }
  if (runs > kMaxRuns)
    fail("the grid has more than {} runs (values x seeds): split it into several sweeps", kMaxRuns);
}

// Every run with its overrides, origins, values and seed, in grid order (directories not yet
// named).
std::vector<SweepRun> grid(const SweepSpec& spec, int64_t base_seed) {
  std::vector<SweepRun> runs;
  std::vector<size_t> index(spec.over.size(), 0);
  while (true) {
    for (int64_t s = 0; s < spec.seeds; ++s) {
      SweepRun run;
      run.overrides = spec.sets;
      for (const std::string& set : spec.sets) run.origins.push_back("--set " + set);
      for (size_t k = 0; k < spec.over.size(); ++k) {
        const SweepAxis& a = spec.over[k];
        const std::string& v = a.values[index[k]];
        run.values.emplace_back(a.key, v);
        run.plain_values.push_back(plain_value(v));
        run.overrides.push_back(a.key + "=" + v);
        run.origins.push_back(
            fmt::format("--over {}={} (value {})", a.key, join(a.values, ","), v));
      }
      run.seed_index = s;
      run.seed = base_seed + s;
      run.overrides.push_back(fmt::format("train.seed={}", run.seed));
      run.origins.push_back(fmt::format("--seeds {} (train.seed={})", spec.seeds, run.seed));
      runs.push_back(std::move(run));
    }
    size_t k = spec.over.size();  // odometer: the last axis turns fastest
    while (k > 0 && ++index[k - 1] == spec.over[k - 1].values.size()) index[--k] = 0;
    if (k == 0) break;
  }
  return runs;
}

// Directory names: from the values, bounded, and unique (a hash of the values where two
// sanitized names meet).
void name_runs(const SweepSpec& spec, std::vector<SweepRun>& runs) {
  std::vector<std::string> names;
  for (const SweepRun& r : runs) {
    std::string name;
    for (size_t k = 0; k < r.values.size(); ++k)
      name += dir_part(r.values[k].first, r.plain_values[k]) + "_";
    names.push_back(bounded_name(fmt::format("{}seed-{}", name, r.seed)));
  }
  std::map<std::string, int> count;
  for (const std::string& n : names) ++count[n];
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string name = names[i];
    if (count[name] > 1)
      name = bounded_name(name.substr(0, kMaxRunNameBytes - 17) + "-" +
                          checksum_hex(values_text(runs[i])));
    runs[i].dir = spec.out_dir / name;
  }
}

// The files of a run's analysis (train/run/analyze_run.h): all of them, as one set (not the
// mix of two analyses a kill between their renames leaves), or it is not done.
bool analysis_written(const fs::path& dir) {
  for (const char* name : {"heads.json", "attention.npy", "report.html"})
    if (!fs::is_regular_file(fs::symlink_status(dir / name))) return false;
  try {
    load_run_files(dir);
  } catch (const Error&) {
    return false;
  }
  return true;
}

// Whether run.json says the run's last session failed ("outcome": "failed: ...").
bool last_session_failed(const fs::path& dir) {
  const nlohmann::json run = read_run_json(dir);
  const auto it = run.find("outcome");
  return it != run.end() && it->is_string() && it->get<std::string>().rfind("failed", 0) == 0;
}

// What --resume does with run `r`, whose planned config is `planned`.
RunState state_from_dir(const SweepSpec& spec, const SweepRun& r, const Config& planned) {
  if (!fs::exists(fs::symlink_status(r.dir))) return RunState::fresh;
  check_run_dir(r.dir, RunDirUse::write);  // headlab's run, or a clear error
  const fs::path config_file = r.dir / "config.resolved.toml";
  if (!fs::exists(fs::symlink_status(config_file))) return RunState::overwrite;
  const std::vector<std::string> diffs =
      identity_differences(load_run_config(config_file), planned, ConfigUse::resume);
  if (!diffs.empty())
    fail(
        "--resume: run '{}' was trained with another config than this grid gives it ({}): "
        "restore the values, or sweep into another --out",
        r.dir.string(), join(diffs, "; "));
  const std::optional<nlohmann::json> summary = read_json_file_if_present(r.dir / "summary.json");
  if (summary && summary->value("steps", int64_t{-1}) == planned.train.steps &&
      analysis_written(r.dir))
    return RunState::done;
  if (spec.skip_failed && last_session_failed(r.dir)) return RunState::failed;
  return latest_checkpoint(r.dir) ? RunState::resume : RunState::overwrite;
}

}  // namespace

RunState resume_state(const SweepSpec& spec, const SweepRun& run) {
  return state_from_dir(spec, run,
                        load_config(spec.config, run.overrides, run.origins, spec.load_plugin));
}

std::string plain_value(const std::string& text) {
  const std::string t = trim(text);
  if (t.size() >= 2 && (t[0] == '"' || t[0] == '\'') && t.back() == t[0])
    return t.substr(1, t.size() - 2);
  if (t.size() >= 2 && t[0] == '[' && t.back() == ']') {
    std::string out, list = "x=";
    list.append(t, 1, t.size() - 2);
    const SweepAxis elements = parse_over(list);
    for (const std::string& e : elements.values) {
      if (!out.empty()) out += ',';
      out += plain_value(e);
    }
    return out;
  }
  return t;
}

SweepAxis parse_over(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) fail("--over {}: expected KEY=V1,V2,... (no '=')", text);
  SweepAxis axis;
  axis.key = trim(text.substr(0, eq));
  if (axis.key.empty()) fail("--over {}: the key before '=' is empty", text);
  const std::string list = text.substr(eq + 1);
  int depth = 0;
  char quote = 0;
  std::string cur;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      const std::string v = trim(cur);
      if (v.empty()) fail("--over {}: value {} is empty", text, axis.values.size() + 1);
      axis.values.push_back(v);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (quote || depth != 0) fail("--over {}: unbalanced brackets or quotes", text);
  return axis;
}

std::vector<SweepRun> plan_sweep(const SweepSpec& spec, SweepPlan plan) {
  check_spec(spec);
  const Config base = load_config(spec.config, spec.sets, {}, spec.load_plugin);
  if (base.train.seed > std::numeric_limits<int64_t>::max() - (spec.seeds - 1))
    fail("--seeds {}: train.seed = {} plus {} leaves the 64-bit integers", spec.seeds,
         base.train.seed, spec.seeds - 1);
  std::vector<SweepRun> runs = grid(spec, base.train.seed);
  name_runs(spec, runs);
  std::map<std::string, size_t> seen;  // config hash -> run
  for (size_t i = 0; i < runs.size(); ++i) {
    SweepRun& run = runs[i];
    // Every run's config is validated before anything trains.
    const Config c = load_config(spec.config, run.overrides, run.origins, spec.load_plugin);
    const auto [it, fresh] = seen.emplace(config_hash(c), i);
    if (!fresh)
      fail("{} and {} are the same run (a value given twice?): remove one of them",
           values_text(runs[it->second]), values_text(run));
    if (plan == SweepPlan::fresh) check_run_dir(run.dir, RunDirUse::create);
    if (plan == SweepPlan::resume) run.state = state_from_dir(spec, run, c);
  }
  return runs;
}

}  // namespace headlab
