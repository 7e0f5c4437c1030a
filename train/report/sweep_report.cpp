// The sweep report: DIR/report.html from sweep.json and each run's curves and heads.json.

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "train/report/report.h"
#include "train/report/svg.h"

namespace headlab {
namespace {

using nlohmann::json;

struct Group {
  std::string label;         // "model.heads=4"
  std::vector<size_t> runs;  // indices into sweep["runs"]
};

struct Stats {
  double mean = NAN, sd = NAN, lo = NAN, hi = NAN;
  size_t n = 0;
};

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
  s.sd = v.size() > 1 ? std::sqrt(ss / (v.size() - 1)) : 0.0;  // sample standard deviation
  return s;
}

std::string mean_sd(const Stats& s, int digits) {
  if (s.n == 0) return "-";
  return s.n > 1 ? fmt::format("{:.{}f} &plusmn; {:.{}f}", s.mean, digits, s.sd, digits)
                 : fmt::format("{:.{}f}", s.mean, digits);
}

std::string value_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::vector<Group> group_runs(const json& sweep) {
  std::vector<Group> groups;
  std::map<std::string, size_t> index;
  const json& runs = sweep["runs"];
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

std::vector<double> field(const json& runs, const std::vector<size_t>& idx, const char* key) {
  std::vector<double> v;
  for (size_t i : idx)
    if (runs[i].contains(key) && runs[i][key].is_number()) v.push_back(runs[i][key].get<double>());
  return v;
}

// The seed mean of eval accuracy at the steps every run of the group evaluated.
svg::Series mean_curve(const std::vector<SweepRunData>& data, const Group& g) {
  svg::Series s;
  std::map<double, std::pair<double, int>> at;
  for (size_t i : g.runs) {
    const Curves& c = data[i].curves;
    for (size_t k = 0; k < c.eval_step.size(); ++k) {
      auto& [sum, n] = at[c.eval_step[k]];
      sum += c.eval_accuracy[k];
      ++n;
    }
  }
  for (const auto& [step, sn] : at) {
    if (sn.second != static_cast<int>(g.runs.size())) continue;
    s.x.push_back(step);
    s.y.push_back(sn.first / sn.second);
  }
  return s;
}

// One table row per setting: mean and spread over its seeds.
std::string table_row(const json& runs, const Group& g) {
  const Stats acc = stats(field(runs, g.runs, "eval_accuracy"));
  const Stats s95 = stats(field(runs, g.runs, "steps_to_95"));
  const Stats sm = stats(field(runs, g.runs, "s_match"));
  const Stats sx = stats(field(runs, g.runs, "s_max"));
  const Stats nc = stats(field(runs, g.runs, "n_claimed"));
  const Stats ts = stats(field(runs, g.runs, "train_seconds"));
  const std::vector<double> dk = field(runs, g.runs, "d_k");
  size_t ok = 0;
  for (size_t i : g.runs) ok += runs[i].value("ok", false) ? 1 : 0;
  const std::string range =
      acc.n ? fmt::format("{:.3f} &ndash; {:.3f}", acc.lo, acc.hi) : std::string("-");
  const std::string steps = s95.n == 0        ? std::string("never")
                            : s95.hi > s95.lo ? fmt::format("{:.0f} &ndash; {:.0f}", s95.lo, s95.hi)
                                              : fmt::format("{:.0f}", s95.lo);
  const std::string claimed = nc.n == 0        ? std::string("-")
                              : nc.lo == nc.hi ? fmt::format("{:.0f}", nc.lo)
                                               : fmt::format("{:.0f}&ndash;{:.0f}", nc.lo, nc.hi);
  return fmt::format(
      "<tr><td class=\"l\">{}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{} of "
      "{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
      svg::escape(g.label), dk.empty() || dk[0] <= 0 ? "-" : fmt::format("{}", dk[0]), ok,
      g.runs.size(), mean_sd(acc, 3), range, s95.n, ok, steps, mean_sd(sm, 2), mean_sd(sx, 2),
      claimed, ts.n ? fmt::format("{:.1f}", ts.mean) : "-");
}

std::string table_section(const json& runs, const std::vector<Group>& groups) {
  std::string table =
      "<table><tr><th class=\"l\">setting</th><th>d_k</th><th>runs</th><th>eval accuracy</th>"
      "<th>min &ndash; max</th><th>reached 95%</th><th>steps to 95%</th><th>s_match</th>"
      "<th>s_max</th><th>n_claimed</th><th>train s</th></tr>";
  for (const Group& g : groups) table += table_row(runs, g);
  return "<section id=\"table\"><h2>Results</h2><p class=\"lede\">Mean &plusmn; sample "
         "standard deviation over seeds. Steps to 95%: the first evaluation at or above 0.95 "
         "accuracy, over the seeds that got there. s_match: mean over relations of the attention "
         "mass that the best one-to-one assignment of relations to heads puts on the gold "
         "partners.</p>" +
         table + "</table></section>\n";
}

svg::LineChartOptions accuracy_chart(std::string title, int width, int height) {
  svg::LineChartOptions o;
  o.title = std::move(title);
  o.x_label = "step";
  o.y_label = "eval accuracy";
  o.width = width;
  o.height = height;
  o.y_min = 0.0;
  o.y_max = 1.0;
  o.reference_y = 0.95;
  return o;
}

// Seed means of every setting on one chart, then one chart per setting with every seed.
std::string curves_section(const json& runs, const std::vector<Group>& groups,
                           const std::vector<SweepRunData>& data) {
  std::vector<svg::Series> means;
  std::string small;
  for (size_t k = 0; k < groups.size(); ++k) {
    svg::Series m = mean_curve(data, groups[k]);
    m.name = groups[k].label;
    m.color = svg::palette(static_cast<int>(k));
    means.push_back(m);
    std::vector<svg::Series> seeds;
    for (size_t i : groups[k].runs) {
      svg::Series s;
      s.name = fmt::format("seed {}", runs[i].value("seed", 0));
      s.color = svg::palette(static_cast<int>(k));
      s.opacity = 0.35 + 0.65 / groups[k].runs.size() * (1 + seeds.size());
      s.x = data[i].curves.eval_step;
      s.y = data[i].curves.eval_accuracy;
      seeds.push_back(s);
    }
    small += "<figure class=\"figure\">" +
             svg::line_chart(seeds, accuracy_chart(groups[k].label, 300, 210)) + "</figure>";
  }
  return "<section id=\"curves\"><h2>Accuracy curves</h2><div class=\"row\"><figure "
         "class=\"figure\">" +
         svg::line_chart(means, accuracy_chart("Eval accuracy, mean over seeds", 560, 320)) +
         "</figure></div><div class=\"row\">" + small + "</div></section>\n";
}

svg::Series series(const char* name, const char* color, bool line, double opacity = 1.0) {
  svg::Series s;
  s.name = name;
  s.color = color;
  s.line = line;
  s.markers = line;
  s.opacity = opacity;
  return s;
}

// s_match and s_max, and n_claimed, per setting: each seed a dot, the mean a line.
std::string specialization_charts(const json& runs, const std::vector<Group>& groups,
                                  const std::string& over) {
  svg::LineChartOptions so;
  so.title = "Specialization (s_match; s_max dashed)";
  so.x_label = over;
  so.y_label = "mass on the gold partner";
  so.width = 460;
  so.height = 320;
  so.y_min = 0.0;
  so.y_max = 1.0;
  svg::Series sm_mean = series("s_match (mean)", "#2f5d9e", true);
  svg::Series sx_mean = series("s_max (mean)", "#9aa3ad", true);
  sx_mean.markers = false;
  sx_mean.dashed = true;
  svg::Series sm_dots = series("s_match (each seed)", "#2f5d9e", false, 0.45);
  svg::Series nc_mean = series("n_claimed (mean)", "#2e9e44", true);
  svg::Series nc_dots = series("each seed", "#2e9e44", false, 0.45);
  double max_claimed = 1;
  for (size_t k = 0; k < groups.size(); ++k) {
    const double x = static_cast<double>(k);
    std::string tick;
    const json values = runs[groups[k].runs[0]].value("values", json::object());
    for (const auto& [key, v] : values.items()) {
      if (!tick.empty()) tick += ',';
      tick += value_text(v);
    }
    so.x_ticks.emplace_back(x, tick);
    const std::vector<double> sm = field(runs, groups[k].runs, "s_match");
    const std::vector<double> nc = field(runs, groups[k].runs, "n_claimed");
    for (double v : sm) sm_dots.x.push_back(x), sm_dots.y.push_back(v);
    for (double v : nc)
      nc_dots.x.push_back(x), nc_dots.y.push_back(v), max_claimed = std::max(max_claimed, v);
    if (!sm.empty()) sm_mean.x.push_back(x), sm_mean.y.push_back(stats(sm).mean);
    if (!nc.empty()) nc_mean.x.push_back(x), nc_mean.y.push_back(stats(nc).mean);
    const Stats sx = stats(field(runs, groups[k].runs, "s_max"));
    if (sx.n) sx_mean.x.push_back(x), sx_mean.y.push_back(sx.mean);
  }
  svg::LineChartOptions no = so;
  no.title = "Relations claimed by distinct heads (n_claimed)";
  no.y_label = "n_claimed";
  no.y_max = max_claimed + 0.5;
  const std::vector<svg::Series> spec_series = {sm_mean, sx_mean, sm_dots};
  const std::vector<svg::Series> claim_series = {nc_mean, nc_dots};
  return "<figure class=\"figure\">" + svg::line_chart(spec_series, so) +
         "</figure><figure class=\"figure\">" + svg::line_chart(claim_series, no) + "</figure>";
}

// The head x relation matrix of each setting's first finished run.
std::string matrices(const json& runs, const std::vector<Group>& groups,
                     const std::vector<SweepRunData>& data) {
  std::string out;
  for (const Group& g : groups) {
    for (size_t i : g.runs) {
      if (!data[i].heads.is_object()) continue;
      const std::string svg_text = mass_matrix_svg(
          data[i].heads, fmt::format("{} (seed {})", g.label, runs[i].value("seed", 0)), 34);
      if (!svg_text.empty()) out += "<figure class=\"figure\">" + svg_text + "</figure>";
      break;
    }
  }
  return out;
}

std::string specialization_section(const json& runs, const std::vector<Group>& groups,
                                   const std::vector<SweepRunData>& data, const std::string& over) {
  return "<section id=\"specialization\"><h2>Specialization</h2><div class=\"row\">" +
         specialization_charts(runs, groups, over) +
         "</div><p class=\"lede\">The head x relation mass matrix of one run per setting "
         "(arrows: the relation assigned to each head).</p><div class=\"row\">" +
         matrices(runs, groups, data) + "</div></section>\n";
}

// The header's sentence about the grid, true to what it holds: counts with their plurals, and
// what more heads mean only when the grid varies the heads.
std::string grid_text(const json& sweep, const std::string& over) {
  const json runs = sweep.value("runs", json::array());
  const int64_t seeds = sweep.value("seeds", int64_t{0});
  std::string text = fmt::format(
      "{} run{} of {} ({} seed{} per setting).", runs.size(), runs.size() == 1 ? "" : "s",
      sweep.value("config", std::string("?")), seeds, seeds == 1 ? "" : "s");
  const bool heads = over.find("model.heads") != std::string::npos;
  const bool width = over.find("model.d_model") != std::string::npos ||
                     over.find("model.head_dim") != std::string::npos;
  std::set<int64_t> d_k;
  for (const json& r : runs)
    if (r.contains("d_k") && r["d_k"].is_number_integer() && r["d_k"].get<int64_t>() > 0)
      d_k.insert(r["d_k"].get<int64_t>());
  if (heads && !width && d_k.size() > 1)
    text += " Same d_model in every run: more heads means narrower heads.";
  else if (heads && d_k.size() == 1)
    text +=
        fmt::format(" Every head is {} wide: more heads means more attention width.", *d_k.begin());
  return text;
}

}  // namespace

std::string render_sweep_report(const json& sweep, const std::vector<SweepRunData>& data) {
  const json runs = sweep.value("runs", json::array());
  const std::vector<Group> groups = group_runs(sweep);
  std::string over;
  for (const json& k : sweep.value("over", json::array()))
    over += (over.empty() ? "" : ", ") + k.get<std::string>();
  std::string body = "<header class=\"top\"><h1>headlab sweep over " + svg::escape(over) +
                     "</h1><p>" + svg::escape(grid_text(sweep, over)) + "</p></header>\n";
  body += table_section(runs, groups);
  body += curves_section(runs, groups, data);
  body += specialization_section(runs, groups, data, over);
  body += "<footer>Written by headlab " HEADLAB_VERSION
          ". Every run's own report is report.html in its directory.</footer>";
  return html_page("headlab sweep over " + over, body);
}

}  // namespace headlab
