// The sweep report's "every seed" section: per setting, each seed's eval accuracy, s_match and
// n_claimed as a point that links to the run's own report, with the mean and spread.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {

// A setting's short label for the x axis: its values only ("4", "4, relu").
std::string tick_label(const SweepView& v, const Group& g) {
  std::string out;
  const json values = v.runs[g.runs[0]].value("values", json::object());
  for (const auto& [key, x] : values.items()) out += (out.empty() ? "" : ", ") + value_text(x);
  return out;
}

std::vector<svg::StripGroup> strips(const SweepView& v, const char* key, int digits) {
  std::vector<svg::StripGroup> out;
  for (size_t k = 0; k < v.groups.size(); ++k) {
    const Group& g = v.groups[k];
    svg::StripGroup s{tick_label(v, g), svg::palette(static_cast<int>(k)), {}};
    for (size_t i : g.runs) {
      const json& r = v.runs[i];
      const double value =
          r.contains(key) && r[key].is_number() ? r[key].get<double>() : std::nan("");
      s.points.push_back({value,
                          fmt::format("{}, seed {}: {} {} (click for its report)", g.label,
                                      r.value("seed", 0), key, svg::number(value, digits)),
                          run_link(v, i)});
    }
    out.push_back(std::move(s));
  }
  return out;
}

svg::StripChartOptions options(std::string title, const std::string& over, std::string y_label) {
  svg::StripChartOptions o;
  o.title = std::move(title);
  o.x_label = over;
  o.y_label = std::move(y_label);
  return o;
}

}  // namespace

std::string sweep_seeds_body(const SweepView& v) {
  if (v.groups.empty()) return "";
  const int width = std::clamp(static_cast<int>(120 + 70 * v.groups.size()), 360, 640);
  svg::StripChartOptions acc = options("Eval accuracy", v.over, "eval accuracy");
  acc.y_min = 0.0;
  acc.y_max = 1.0;
  acc.reference_y = kLearnedAccuracy;
  acc.digits = 3;
  svg::StripChartOptions sm = options("s_match", v.over, "mass on the gold partner");
  sm.y_min = 0.0;
  sm.y_max = 1.0;
  svg::StripChartOptions nc = options("Relations claimed (n_claimed)", v.over, "n_claimed");
  nc.y_min = 0.0;
  double most = 1;
  for (const json& r : v.runs) most = std::max(most, num(r, "n_claimed", 0.0));
  nc.y_max = most + 0.5;
  nc.digits = 1;
  for (svg::StripChartOptions* o : {&acc, &sm, &nc}) o->width = width;
  return lede(
             "Every dot is one seed's run: click it to open that run's report. The black tick "
             "is the mean over the setting's seeds, the line through it one sample standard "
             "deviation either side; dashed: " +
             svg::number(kLearnedAccuracy, 2) + " eval accuracy.") +
         "<div class=\"row\">" + figure(svg::strip_chart(strips(v, "eval_accuracy", 3), acc)) +
         figure(svg::strip_chart(strips(v, "s_match", 2), sm)) +
         figure(svg::strip_chart(strips(v, "n_claimed", 0), nc)) + "</div>";
}

}  // namespace headlab::report_parts
