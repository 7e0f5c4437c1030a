// The "timeline" section of the run report (sections.h): specialization over training.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/parts.h"
#include "train/report/sections.h"

namespace headlab::report_parts {
namespace {

using nlohmann::json;

// timeline.jsonl flattened: per row its step, s_match, accuracy and mass[l][h][r], and the
// relation each head ends with.
struct Timeline {
  std::vector<std::string> relations, colors;
  int layers = 0, heads = 0;
  std::vector<double> step, s_match, accuracy, claimed;  // [rows]
  std::vector<std::vector<std::vector<double>>> mass;    // [rows][l * H + h][r]
  std::vector<std::vector<int>> assigned;                // [rows][r]: l * H + h or -1
  std::vector<int> final_relation;                       // [l * H + h]
  std::vector<bool> final_assigned;                      // [l * H + h]
};

// The relations in digit order: heads.json's, else summary.json's.
std::vector<std::string> relations_of(const RunFiles& f) {
  for (const json* doc : {&f.heads, &f.summary})
    if (doc->is_object() && (*doc).contains("relations") && (*doc)["relations"].is_array())
      return (*doc)["relations"].get<std::vector<std::string>>();
  return {};
}

bool read_row(const json& row, Timeline& t) {
  const json mass = row.value("mass", json::array());
  if (!row.contains("step") || !row["step"].is_number() || !mass.is_array() || mass.empty() ||
      !mass[0].is_array())
    return false;
  if (t.step.empty()) {
    t.layers = static_cast<int>(mass.size());
    t.heads = static_cast<int>(mass[0].size());
  }
  if (static_cast<int>(mass.size()) != t.layers) return false;
  std::vector<std::vector<double>> m;
  for (const json& layer : mass) {
    if (!layer.is_array() || static_cast<int>(layer.size()) != t.heads) return false;
    for (const json& head : layer) {
      std::vector<double> v;
      for (const std::string& r : t.relations) v.push_back(num(head, r.c_str(), 0.0));
      m.push_back(std::move(v));
    }
  }
  std::vector<int> a;
  const json assignment = row.value("assignment", json::object());
  for (const std::string& r : t.relations) {
    const json ref = assignment.is_object() ? assignment.value(r, json()) : json();
    const bool ok = ref.is_array() && ref.size() == 2 && ref[0].is_number_integer() &&
                    ref[1].is_number_integer();
    const int k = ok ? ref[0].get<int>() * t.heads + ref[1].get<int>() : -1;
    a.push_back(k >= 0 && k < t.layers * t.heads ? k : -1);
  }
  t.step.push_back(row["step"].get<double>());
  t.s_match.push_back(num(row, "s_match"));
  t.accuracy.push_back(num(row, "accuracy"));
  t.claimed.push_back(num(row, "n_claimed") / std::max<size_t>(t.relations.size(), 1));
  t.mass.push_back(std::move(m));
  t.assigned.push_back(std::move(a));
  return true;
}

// Each head's final relation: the one heads.json (else the last row) assigns it, else its
// largest final mass.
void final_relations(const Heads& h, Timeline& t) {
  const size_t n = static_cast<size_t>(t.layers * t.heads), R = t.relations.size();
  t.final_relation.assign(n, 0);
  t.final_assigned.assign(n, false);
  for (size_t k = 0; k < n; ++k) {
    const std::vector<double>& m = t.mass.back()[k];
    t.final_relation[k] = static_cast<int>(std::max_element(m.begin(), m.end()) - m.begin());
  }
  const bool from_heads = h.assigned.size() == n && h.relations == t.relations;
  for (size_t k = 0; from_heads && k < n; ++k)
    if (h.assigned[k] >= 0) t.final_relation[k] = h.assigned[k], t.final_assigned[k] = true;
  for (size_t r = 0; !from_heads && r < R; ++r) {
    const int k = t.assigned.back()[r];
    if (k >= 0) t.final_relation[k] = static_cast<int>(r), t.final_assigned[k] = true;
  }
}

std::string head_label(const Timeline& t, int k) {
  return fmt::format("L{} H{}", k / t.heads, k % t.heads);
}

// The first row at which relation r's assigned head has mass > 0.5, or -1.
int first_claim(const Timeline& t, size_t r) {
  for (size_t i = 0; i < t.step.size(); ++i) {
    const int k = t.assigned[i][r];
    if (k >= 0 && t.mass[i][k][r] > 0.5) return static_cast<int>(i);
  }
  return -1;
}

std::string charts(const Timeline& t) {
  std::vector<svg::Series> spec = {
      series("s_match", "#1f2430", t.step, t.s_match, false, true),
      series("relations claimed / R", "#2f5d9e", t.step, t.claimed, true),
      series("eval accuracy", "#6b7280", t.step, t.accuracy, true)};
  svg::LineChartOptions so = chart("Specialization over training", "step", "");
  so.y_min = 0.0;
  so.y_max = 1.0;
  std::vector<svg::Series> heads;
  std::vector<std::string> names, labels, colors;
  for (int k = 0; k < t.layers * t.heads; ++k) {
    const int r = t.final_relation[k];
    std::vector<double> y;
    for (const auto& row : t.mass) y.push_back(row[k][r]);
    svg::Series s =
        series(head_label(t, k) + (t.final_assigned[k] ? " \u2192 " : " \u00b7 ") + t.relations[r],
               t.colors[r], t.step, y, !t.final_assigned[k]);
    if (!t.final_assigned[k]) s.opacity = 0.55;
    s.shape = relation_shape(r);  // the relation told apart without its colour
    names.push_back(s.name);
    labels.push_back(head_label(t, k));
    colors.push_back(s.color);
    heads.push_back(std::move(s));
  }
  svg::LineChartOptions ho = chart("Each head's mass on its final relation", "step", "mass");
  ho.y_min = 0.0;
  ho.y_max = 1.0;
  ho.reference_y = 0.5;
  return "<div class=\"row\">" +
         figure(svg::line_chart(spec, so),
                "s_match: mean mass of the best one-to-one relation-to-head assignment.") +
         "<div class=\"tl-heads\" id=\"tl-heads\">" +
         figure(svg::line_chart(heads, ho),
                "Solid: the head assigned to that relation at the end; dashed: the other heads, "
                "on their largest relation. Dotted line: the claim threshold 0.5.") +
         series_toggles("Heads drawn in the chart of each head's mass", names, labels, colors) +
         "</div></div>";
}

// The table of first claims and a sentence on their order.
std::string claims(const Timeline& t) {
  std::vector<std::pair<double, size_t>> order;
  std::string rows;
  for (size_t r = 0; r < t.relations.size(); ++r) {
    const int i = first_claim(t, r);
    const int k = t.assigned.back()[r];
    rows += fmt::format(
        "<tr><td class=\"l\"><span class=\"tag\" style=\"background:{}\">{}</span></td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>",
        t.colors[r], svg::escape(t.relations[r]), i < 0 ? "never" : fmt::format("{}", t.step[i]),
        k >= 0 ? head_label(t, k) : "-", k >= 0 ? svg::number(t.mass.back()[k][r], 2) : "-");
    if (i >= 0) order.push_back({t.step[i], r});
  }
  std::stable_sort(order.begin(), order.end());
  std::string text;
  for (size_t n = 0; n < order.size(); ++n) {
    const bool tie = n > 0 && order[n].first == order[n - 1].first;
    text += (n == 0 ? ""
             : tie  ? " = "
                    : " \u2192 ") +
            fmt::format("{} ({})", t.relations[order[n].second], order[n].first);
  }
  const std::string sentence =
      order.empty() ? "No relation was claimed during training."
                    : "Order of the first claims in this run: " + svg::escape(text) +
                          (order.size() < t.relations.size() ? "; the others never." : ".") +
                          " Whether the order is fixed shows across seeds (a sweep).";
  return "<table><tr><th class=\"l\">relation</th><th>first claimed at step</th><th>head at "
         "the end</th><th>its final mass</th></tr>" +
         rows + "</table><p>" + sentence + "</p>";
}

}  // namespace

std::string timeline_body(const RunView& v) {
  const RunFiles& f = v.files;
  Timeline t;
  t.relations = relations_of(f);
  for (size_t r = 0; r < t.relations.size(); ++r)
    t.colors.push_back(relation_color(static_cast<int>(r)));
  for (const json& row : f.timeline)
    if (!t.relations.empty()) read_row(row, t);
  if (t.step.empty())
    return missing("timeline.jsonl not found or empty (train.timeline = false?).");
  final_relations(v.heads, t);
  return lede(
             "At every evaluation the trainer measures each head's attention mass on each "
             "relation's gold partner (the evaluation sentences, no ablations) into "
             "timeline.jsonl. A relation is claimed once its assigned head puts more than "
             "half of its attention on the partner.") +
         charts(t) + claims(t) + induction_phase_change(f.timeline);
}

}  // namespace headlab::report_parts
