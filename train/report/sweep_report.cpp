// The sweep report: DIR/report.html from sweep.json and each run's files (see report.h for the
// sections; sweep_sections.cpp and sweep_seeds.cpp draw them).

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/version.h"
#include "train/report/sections.h"

namespace headlab {

using namespace report_parts;
using nlohmann::json;

namespace {

// The page, top to bottom (see report.h on adding a section).
const SectionSpec<SweepView> kSweepSections[] = {
    {"table", "Results per setting", sweep_table_body},
    {"grid", "Heat maps over pairs of keys", sweep_grid_body},
    {"seeds", "Every seed", sweep_seeds_body},
    {"claims", "Order of the first claims", sweep_claims_body},
    {"curves", "Accuracy curves", sweep_curves_body},
    {"specialization", "Head x relation matrix per setting", sweep_specialization_body},
};

std::vector<Group> group_runs(const json& runs) {
  std::vector<Group> groups;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::string label;
    const json values = runs[i].value("values", json::object());
    for (const auto& [k, v] : values.items())
      label += (label.empty() ? "" : ", ") + k + "=" + value_text(v);
    auto [it, inserted] = index.emplace(label, groups.size());
    if (inserted) groups.push_back({label, {}});
    groups[it->second].runs.push_back(i);
  }
  return groups;
}

std::vector<std::string> over_keys(const json& sweep) {
  std::vector<std::string> keys;
  for (const json& k : sweep.value("over", json::array()))
    if (k.is_string()) keys.push_back(k.get<std::string>());
  return keys;
}

// "model.heads (1, 2, 4)": a key and its values in the order the grid runs them.
std::string axis_text(const json& runs, const std::string& key) {
  std::vector<std::string> seen;
  for (const json& r : runs) {
    const json values = r.value("values", json::object());
    if (!values.contains(key)) continue;
    const std::string v = value_text(values[key]);
    if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  std::string list;
  for (const std::string& v : seen) list.append(list.empty() ? "" : ", ").append(v);
  return key + " (" + list + ")";
}

// "2 seeds each (train.seed 1, 2)", or "1 to 3 seeds each" when settings differ.
std::string seeds_text(const json& runs, const std::vector<Group>& groups) {
  size_t lo = SIZE_MAX, hi = 0;
  for (const Group& g : groups) lo = std::min(lo, g.runs.size()), hi = std::max(hi, g.runs.size());
  std::string seeds;
  std::set<int64_t> seen;
  for (const json& r : runs) {
    const int64_t s = r.value("seed", int64_t{0});
    if (seen.insert(s).second) seeds.append(seeds.empty() ? "" : ", ").append(std::to_string(s));
  }
  const std::string n =
      lo == hi ? count(lo, "seed", "seeds") : fmt::format("{} to {} seeds", lo, hi);
  return n + " each (train.seed " + seeds + ")";
}

// The width sentence: true only when the grid changes the head count and nothing else sets
// the head width.
std::string width_text(const json& runs, const std::vector<std::string>& keys) {
  std::set<double> dk;
  for (const json& r : runs)
    if (num(r, "d_k", 0) > 0) dk.insert(num(r, "d_k", 0));
  const auto has = [&](const char* k) { return std::count(keys.begin(), keys.end(), k) > 0; };
  if (dk.size() == 1) return fmt::format(" Every run has d_k = {}.", *dk.begin());
  if (dk.size() > 1 && has("model.heads") && !has("model.d_model") && !has("model.head_dim"))
    return fmt::format(
        " Same d_model in every run, so more heads means narrower heads (d_k {} down to {}).",
        *dk.rbegin(), *dk.begin());
  return "";
}

}  // namespace

namespace report_parts {

Stats stats(const std::vector<double>& v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  s.lo = *std::min_element(v.begin(), v.end());
  s.hi = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(ss / (v.size() - 1)) : 0.0;
  return s;
}

std::vector<double> field(const json& runs, const std::vector<size_t>& idx, const char* key) {
  std::vector<double> v;
  for (size_t i : idx)
    if (runs[i].contains(key) && runs[i][key].is_number()) v.push_back(runs[i][key].get<double>());
  return v;
}

std::string value_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string run_link(const SweepView& v, size_t i) {
  if (i >= v.data.size() || !v.data[i].has_report) return "";
  const json& dir = v.runs[i].contains("dir") ? v.runs[i]["dir"] : json();
  return dir.is_string() ? href(dir.get<std::string>() + "/report.html") : "";
}

}  // namespace report_parts

std::string sweep_description(const json& sweep) {
  const json runs = sweep.value("runs", json::array());
  const std::vector<Group> groups = group_runs(runs);
  const std::vector<std::string> keys = over_keys(sweep);
  std::string axes;
  for (const std::string& k : keys)
    axes.append(axes.empty() ? "" : " \u00d7 ").append(axis_text(runs, k));
  std::string out =
      count(runs.size(), "run", "runs") + " of " + sweep.value("config", std::string("?")) + ": " +
      count(groups.size(), "setting", "settings") + (keys.size() == 1 ? " of " : ": ") + axes +
      " \u00d7 " + seeds_text(runs, groups) + ".";
  size_t failed = 0;
  for (const json& r : runs) failed += r.value("ok", true) ? 0 : 1;
  if (failed) out += fmt::format(" {} failed (sweep.json says why).", count(failed, "run", "runs"));
  return out + width_text(runs, keys);
}

std::string render_sweep_report(const json& sweep, const std::vector<SweepRunData>& data) {
  const json runs = sweep.value("runs", json::array());
  std::string over;
  for (const std::string& k : over_keys(sweep)) over.append(over.empty() ? "" : ", ").append(k);
  const SweepView view{sweep, runs, data, group_runs(runs), over};
  std::string scripts;
  const std::string body =
      "<header class=\"top\"><h1>headlab sweep over " + svg::escape(over) + "</h1><p>" +
      svg::escape(sweep_description(sweep)) + "</p></header>\n" +
      render_sections<SweepView>(kSweepSections, view, scripts) +
      "<footer>Written by headlab " HEADLAB_VERSION
      ". Every run's own report is report.html in its directory, linked from its seed.</footer>";
  return html_page("headlab sweep over " + over, body, scripts);
}

}  // namespace headlab
