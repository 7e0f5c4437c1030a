// The sweep report's table, accuracy curves and head x relation matrices.

#include <map>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {

std::string mean_sd(const Stats& s, int digits) {
  if (s.n == 0) return "-";
  return s.n > 1 ? fmt::format("{:.{}f} &plusmn; {:.{}f}", s.mean, digits, s.sd, digits)
                 : fmt::format("{:.{}f}", s.mean, digits);
}

// "seed 1 · seed 2", each linked to its run's report.
std::string seed_links(const SweepView& v, const Group& g) {
  std::string out;
  for (size_t i : g.runs) {
    const std::string name = fmt::format("seed {}", v.runs[i].value("seed", 0));
    const std::string link = run_link(v, i);
    out += std::string(out.empty() ? "" : " \u00b7 ") +
           (link.empty() ? name : "<a href=\"" + svg::escape(link) + "\">" + name + "</a>");
  }
  return out;
}

// One table row per setting: mean and spread over its seeds.
std::string table_row(const SweepView& v, const Group& g) {
  const json& runs = v.runs;
  const Stats acc = stats(field(runs, g.runs, "eval_accuracy"));
  const Stats s95 = stats(field(runs, g.runs, "steps_to_95"));
  const Stats sm = stats(field(runs, g.runs, "s_match"));
  const Stats sx = stats(field(runs, g.runs, "s_max"));
  const Stats nc = stats(field(runs, g.runs, "n_claimed"));
  const Stats ts = stats(field(runs, g.runs, "train_seconds"));
  const std::vector<double> dk = field(runs, g.runs, "d_k");
  size_t ok = 0, specialized = 0;
  for (size_t i : g.runs) {
    ok += runs[i].value("ok", false) ? 1 : 0;
    specialized += run_specialized(v, i) ? 1 : 0;
  }
  const auto orders = claim_orders(v, g);
  size_t timed = 0;
  for (const auto& [order, n] : orders) timed += n;
  const std::string order =
      orders.empty()       ? std::string("-")
      : orders.size() == 1 ? fmt::format("{} (all {})", svg::escape(orders[0].first), timed)
                           : fmt::format("{} ({} of {}; {} orders)", svg::escape(orders[0].first),
                                         orders[0].second, timed, orders.size());
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
      "{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td>"
      "<td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
      svg::escape(g.label), dk.empty() || dk[0] <= 0 ? "-" : fmt::format("{}", dk[0]), ok,
      g.runs.size(), mean_sd(acc, 3), range, s95.n, ok, steps, mean_sd(sm, 2), mean_sd(sx, 2),
      claimed, specialized, g.runs.size(), order, ts.n ? fmt::format("{:.1f}", ts.mean) : "-",
      seed_links(v, g));
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
  o.reference_y = kLearnedAccuracy;
  return o;
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

}  // namespace

std::string sweep_table_body(const SweepView& v) {
  std::string table =
      "<table><tr><th class=\"l\">setting</th><th>d_k</th><th>runs</th><th>eval accuracy</th>"
      "<th>min &ndash; max</th><th>reached 95%</th><th>steps to 95%</th><th>s_match</th>"
      "<th>s_max</th><th>n_claimed</th><th>specialized</th><th class=\"l\">claim order</th>"
      "<th>train s</th><th class=\"l\">run reports</th></tr>";
  for (const Group& g : v.groups) table += table_row(v, g);
  return lede(
             "Mean &plusmn; sample standard deviation over seeds. Steps to 95%: the first "
             "evaluation at or above " +
             svg::number(kLearnedAccuracy, 2) +
             " accuracy, over the seeds that got there. s_match: mean over relations of the "
             "attention mass that the best one-to-one assignment of "
             "relations to heads puts on the gold partners. Specialized: eval accuracy at "
             "least " +
             svg::number(kLearnedAccuracy, 2) + ", every relation claimed and s_match at least " +
             svg::number(kSpecializedSMatch, 2) +
             ". Claim order: the order in which the relations were first claimed "
             "(\"Order of the first claims\" below), the most common over the seeds.") +
         table + "</table>";
}

// Seed means of every setting on one chart, then one chart per setting with every seed.
std::string sweep_curves_body(const SweepView& v) {
  std::vector<svg::Series> means;
  std::string small;
  for (size_t k = 0; k < v.groups.size(); ++k) {
    const Group& g = v.groups[k];
    svg::Series m = mean_curve(v.data, g);
    m.name = g.label;
    m.color = svg::palette(static_cast<int>(k));
    means.push_back(m);
    std::vector<svg::Series> seeds;
    for (size_t i : g.runs) {
      svg::Series s;
      s.name = fmt::format("seed {}", v.runs[i].value("seed", 0));
      s.color = svg::palette(static_cast<int>(k));
      s.opacity = 0.35 + 0.65 / g.runs.size() * (1 + seeds.size());
      s.x = v.data[i].curves.eval_step;
      s.y = v.data[i].curves.eval_accuracy;
      seeds.push_back(s);
    }
    small += figure(svg::line_chart(seeds, accuracy_chart(g.label, 300, 210)));
  }
  return "<div class=\"row\">" +
         figure(
             svg::line_chart(means, accuracy_chart("Eval accuracy, mean over seeds", 560, 320))) +
         "</div><div class=\"row\">" + small + "</div>";
}

// The head x relation matrix of each setting's first run that has one.
std::string sweep_specialization_body(const SweepView& v) {
  std::string out;
  for (const Group& g : v.groups) {
    for (size_t i : g.runs) {
      if (!v.data[i].heads.is_object()) continue;
      const std::string svg_text = mass_matrix_svg(
          v.data[i].heads, fmt::format("{} (seed {})", g.label, v.runs[i].value("seed", 0)), 34);
      if (!svg_text.empty()) out += figure(svg_text);
      break;
    }
  }
  if (out.empty()) return "";
  return lede(
             "The attention mass on each relation's gold partner (s_match is the mean over the "
             "outlined cells) for one run per setting. Arrows and solid outlines: the relation "
             "a head claims; grey and dashed: assigned but not claimed.") +
         "<div class=\"row\">" + out + "</div>";
}

}  // namespace headlab::report_parts
