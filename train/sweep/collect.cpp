// Collecting a sweep: what each run left (summary.json, heads.json), sweep.json, sweep.csv and the
// report.

#include "train/sweep/collect.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "train/config/config.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/report/report.h"

namespace headlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A value in sweep.json: a JSON number, boolean or array as its text parses, else the string.
json value_json(const std::string& text) {
  if (!text.empty() && (text[0] == '"' || text[0] == '\'')) return json(plain_value(text));
  json v = json::parse(text, nullptr, false);
  return v.is_discarded() ? json(plain_value(text)) : v;
}

// A run file, or null with the reason in `error` (a sweep reports a broken run, never fails).
json read_json(const fs::path& path, std::string& error) {
  try {
    if (std::optional<json> doc = read_json_file_if_present(path)) return *doc;
    error = fmt::format("{} is missing", path.filename().string());
  } catch (const Error& e) {
    error = e.what();
  }
  return nullptr;
}

// {relation: step or null}, or null without a timeline.
json claims_json(const std::vector<FirstClaim>& claims) {
  if (claims.empty()) return nullptr;
  json out = json::object();
  for (const FirstClaim& c : claims) out[c.relation] = c.step ? json(*c.step) : json(nullptr);
  return out;
}

// "HEAD=100;SEM=150;PREV=never" in the task's order, for the CSV.
std::string claims_text(const std::vector<FirstClaim>& claims) {
  std::string out;
  for (const FirstClaim& c : claims)
    out += fmt::format("{}{}={}", out.empty() ? "" : ";", c.relation,
                       c.step ? std::to_string(*c.step) : std::string("never"));
  return out;
}

std::vector<FirstClaim> claims_from_json(const json& j) {
  std::vector<FirstClaim> out;
  for (const json& c : j) {
    FirstClaim f{c.at("relation").get<std::string>(), std::nullopt};
    if (!c.at("step").is_null()) f.step = c.at("step").get<int64_t>();
    out.push_back(std::move(f));
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

SweepOutcome collect_run(const SweepRun& run) {
  SweepOutcome out;
  out.run = run;
  std::string error;
  const json summary = read_json(run.dir / "summary.json", error);
  const json heads = summary.is_null() ? json() : read_json(run.dir / "heads.json", error);
  if (summary.is_null() || heads.is_null()) {
    out.error = error;
    return out;
  }
  try {
    out.eval_accuracy = heads.value("eval_accuracy", summary.value("eval_accuracy", 0.0));
    out.train_seconds = summary.value("train_seconds", 0.0);
    const auto it = summary.find("steps_to_95");
    if (it != summary.end() && it->is_number() && it->get<int64_t>() >= 0) {
      out.steps_to_95 = it->get<int64_t>();
    } else if (it == summary.end()) {
      const double s = steps_to(read_curves(read_jsonl(run.dir / "metrics.jsonl"), {}));
      if (s >= 0) out.steps_to_95 = static_cast<int64_t>(s);
    }
    const json spec = heads.value("specialization", json::object());
    out.s_match = spec.value("s_match", 0.0);
    out.s_max = spec.value("s_max", 0.0);
    out.n_claimed = spec.value("n_claimed", int64_t{0});
    out.relations = heads.value("relations", std::vector<std::string>{});
    out.specialized =
        is_specialized(out.eval_accuracy, out.n_claimed, out.relations.size(), out.s_match);
    try {  // the claims are extra: an unreadable timeline leaves them out, the run stays ok
      const std::vector<json> timeline = read_jsonl(run.dir / "timeline.jsonl");
      if (!timeline.empty()) out.first_claims = first_claims(timeline, out.relations);
    } catch (const Error&) {
      out.first_claims.clear();
    }
    try {
      const Config c = load_run_config(run.dir / "config.resolved.toml");
      out.d_k = c.model.head_dim > 0 ? c.model.head_dim : c.model.d_model / c.model.heads;
    } catch (const Error&) {
      out.d_k = 0;
    }
    out.ok = true;
  } catch (const json::exception& e) {
    out.error = std::string("summary.json or heads.json has an unexpected value: ") + e.what();
  }
  return out;
}

json sweep_to_json(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes) {
  json over = json::array();
  for (const SweepAxis& a : spec.over) over.push_back(a.key);
  json runs = json::array();
  for (const SweepOutcome& o : outcomes) {
    json values = json::object();
    for (const auto& [k, v] : o.run.values) values[k] = value_json(v);
    std::error_code ec;
    fs::path rel = fs::relative(o.run.dir, spec.out_dir, ec);
    if (ec || rel.empty()) rel = o.run.dir;
    json r = {{"values", values},
              {"seed", o.run.seed},
              {"eval_accuracy", o.ok ? json(o.eval_accuracy) : json(nullptr)},
              {"steps_to_95", o.steps_to_95 ? json(*o.steps_to_95) : json(nullptr)},
              {"train_seconds", o.ok ? json(o.train_seconds) : json(nullptr)},
              {"s_match", o.ok ? json(o.s_match) : json(nullptr)},
              {"s_max", o.ok ? json(o.s_max) : json(nullptr)},
              {"n_claimed", o.ok ? json(o.n_claimed) : json(nullptr)},
              {"d_k", o.d_k},
              {"dir", rel.generic_string()},
              {"ok", o.ok},
              {"specialized", o.ok ? json(o.specialized) : json(nullptr)},
              {"first_claims", claims_json(o.first_claims)},
              {"claim_order",
               o.first_claims.empty() ? json(nullptr) : json(claim_order(o.first_claims))}};
    if (!o.ok) r["error"] = o.error;
    runs.push_back(std::move(r));
  }
  return {{"config", spec.config.filename().string()},
          {"over", over},
          {"seeds", spec.seeds},
          {"runs", runs}};
}

std::string sweep_to_csv(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes) {
  std::string csv;
  for (const SweepAxis& a : spec.over) csv += csv_field(a.key) + ",";
  csv +=
      "seed,eval_accuracy,steps_to_95,train_seconds,s_match,s_max,n_claimed,d_k,dir,ok,"
      "specialized,claim_order,first_claims\n";
  const json doc = sweep_to_json(spec, outcomes);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const SweepOutcome& o = outcomes[i];
    for (const auto& kv : o.run.values) csv += csv_field(plain_value(kv.second)) + ",";
    csv += fmt::format("{},", o.run.seed);
    if (o.ok) {
      csv += fmt::format("{:.6f},{},{:.3f},{:.6f},{:.6f},{},", o.eval_accuracy,
                         o.steps_to_95 ? std::to_string(*o.steps_to_95) : "", o.train_seconds,
                         o.s_match, o.s_max, o.n_claimed);
    } else {
      csv += ",,,,,,";
    }
    csv += fmt::format(
        "{},{},{},{},{},{}\n", o.d_k, csv_field(doc["runs"][i]["dir"].get<std::string>()),
        o.ok ? "true" : "false", o.ok ? (o.specialized ? "true" : "false") : "",
        csv_field(claim_order(o.first_claims)), csv_field(claims_text(o.first_claims)));
  }
  return csv;
}

namespace {

// The report data of one run, from its directory.
SweepRunData read_run_data(const SweepOutcome& o) {
  SweepRunData d;
  d.curves = read_curves(read_jsonl(o.run.dir / "metrics.jsonl"), {});
  std::string error;
  d.heads = read_json(o.run.dir / "heads.json", error);
  d.has_report = fs::is_regular_file(o.run.dir / "report.html");
  return d;
}

}  // namespace

void write_sweep(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes) {
  std::vector<SweepRunData> data;
  try {
    for (const SweepOutcome& o : outcomes) data.push_back(read_run_data(o));
  } catch (const json::exception& e) {  // a hand-edited metrics.jsonl or heads.json
    fail("sweep: the run files under '{}' are not as headlab writes them: {}",
         spec.out_dir.string(), e.what());
  }
  write_sweep(spec, outcomes, data);
}

void write_sweep(const SweepSpec& spec, const std::vector<SweepOutcome>& outcomes,
                 const std::vector<SweepRunData>& data) {
  make_directories(spec.out_dir);
  const json doc = sweep_to_json(spec, outcomes);
  std::string report;
  try {
    report = render_sweep_report(doc, data);
  } catch (const json::exception& e) {  // a hand-edited metrics.jsonl or heads.json
    fail("sweep: the run files under '{}' are not as headlab writes them: {}",
         spec.out_dir.string(), e.what());
  }
  write_file_atomic(spec.out_dir / "sweep.json", doc.dump(2) + "\n");
  write_file_atomic(spec.out_dir / "sweep.csv", sweep_to_csv(spec, outcomes));
  write_file_atomic(spec.out_dir / "report.html", report);
}

json run_record(const SweepOutcome& o) {
  std::string error;
  json heads = read_json(o.run.dir / "heads.json", error);
  json claims_record = json::array();
  for (const FirstClaim& c : o.first_claims)
    claims_record.push_back({{"relation", c.relation}, {"step", c.step ? json(*c.step) : json()}});
  return {{"ok", o.ok},
          {"error", o.error},
          {"eval_accuracy", o.eval_accuracy},
          {"steps_to_95", o.steps_to_95 ? json(*o.steps_to_95) : json(nullptr)},
          {"train_seconds", o.train_seconds},
          {"s_match", o.s_match},
          {"s_max", o.s_max},
          {"n_claimed", o.n_claimed},
          {"d_k", o.d_k},
          {"relations", o.relations},
          {"specialized", o.specialized},
          {"first_claims", claims_record},
          {"metrics", read_jsonl(o.run.dir / "metrics.jsonl")},
          {"heads", std::move(heads)},
          {"has_report", fs::is_regular_file(o.run.dir / "report.html")}};
}

SweepOutcome outcome_from_record(const json& r, const SweepRun& run, SweepRunData& data) {
  SweepOutcome o;
  o.run = run;
  o.ok = r.at("ok").get<bool>();
  o.error = r.at("error").get<std::string>();
  o.eval_accuracy = r.at("eval_accuracy").get<double>();
  if (!r.at("steps_to_95").is_null()) o.steps_to_95 = r.at("steps_to_95").get<int64_t>();
  o.train_seconds = r.at("train_seconds").get<double>();
  o.s_match = r.at("s_match").get<double>();
  o.s_max = r.at("s_max").get<double>();
  o.n_claimed = r.at("n_claimed").get<int64_t>();
  o.d_k = r.at("d_k").get<int64_t>();
  o.relations = r.at("relations").get<std::vector<std::string>>();
  o.specialized = r.at("specialized").get<bool>();
  o.first_claims = claims_from_json(r.at("first_claims"));
  data.curves = read_curves(r.at("metrics").get<std::vector<json>>(), {});
  data.heads = r.at("heads");
  data.has_report = r.at("has_report").get<bool>();
  return o;
}

}  // namespace headlab
