// The "pruning" section of the run report (sections.h): the pruning curve of heads.json.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/parts.h"
#include "train/report/report.h"
#include "train/report/sections.h"

namespace headlab::report_parts {
namespace {

using nlohmann::json;

struct Step {
  int head = -1;  // l * H + h, -1 at 0 heads pruned
  double accuracy = NAN;
  std::vector<double> component;  // [R]
};

// The relation a head carried: its assigned one when its mass there is above 0.3, else (as a
// backup) its largest mass when above 0.3, else -1. `specialized` is set for an assigned head with
// mass > 0.5 (a claim).
int carried(const Heads& h, size_t k, bool* specialized) {
  const json m = h.per_head[k].value("mass", json::object());
  const int a = h.assigned[k];
  const double assigned_mass = a >= 0 ? num(m, h.relations[a].c_str(), 0.0) : 0.0;
  *specialized = assigned_mass > 0.5;
  if (assigned_mass > 0.3) return a;
  const int top = strongest(h, k);
  return top >= 0 && num(m, h.relations[top].c_str(), 0.0) > 0.3 ? top : -1;
}

std::vector<Step> read_curve(const json& doc, const Heads& h) {
  std::vector<Step> out;
  for (const json& p : doc.value("pruning", json::array())) {
    Step s;
    const json ref = p.value("pruned", json());
    if (ref.is_array() && ref.size() == 2 && ref[0].is_number_integer() &&
        ref[1].is_number_integer()) {
      s.head = ref[0].get<int>() * h.heads + ref[1].get<int>();
      if (s.head < 0 || s.head >= static_cast<int>(h.per_head.size())) continue;
    }
    s.accuracy = num(p, "accuracy");
    for (const std::string& r : h.relations)
      s.component.push_back(num(p.value("component_accuracy", json::object()), r.c_str()));
    out.push_back(std::move(s));
  }
  return out;
}

std::string curve_chart(const Heads& h, const std::vector<Step>& c) {
  std::vector<double> x, acc;
  std::vector<std::pair<double, std::string>> ticks;
  for (size_t i = 0; i < c.size(); ++i) {
    x.push_back(static_cast<double>(i));
    acc.push_back(c[i].accuracy);
    ticks.push_back({static_cast<double>(i), c[i].head < 0 ? "none" : h.label[c[i].head]});
  }
  std::vector<svg::Series> s = {series("accuracy", "#1f2430", x, acc)};
  for (size_t r = 0; r < h.relations.size(); ++r) {
    std::vector<double> comp, mx, my;
    for (size_t i = 0; i < c.size(); ++i) {
      comp.push_back(c[i].component[r]);
      bool spec = false;
      if (c[i].head >= 0 && carried(h, c[i].head, &spec) == static_cast<int>(r))
        mx.push_back(x[i]), my.push_back(acc[i]);
    }
    svg::Series component = series(h.relations[r] + " component", h.colors[r], x, comp, true);
    component.shape = relation_shape(static_cast<int>(r));
    s.push_back(std::move(component));
    svg::Series dots = series("pruned a " + h.relations[r] + " head", h.colors[r], mx, my);
    dots.markers = true;
    dots.line = false;
    dots.shape = relation_shape(static_cast<int>(r));
    s.push_back(std::move(dots));
  }
  svg::LineChartOptions o =
      chart("Accuracy as heads are pruned", "head pruned (in order)", "eval accuracy");
  // 60 px a step up to 720 px (10 heads); past that the ticks turn and the chart keeps its width.
  o.width = std::clamp(60 * static_cast<int>(c.size()) + 120, 410, 720);
  o.y_min = 0.0;
  o.y_max = 1.0;
  o.x_ticks = ticks;
  return figure(svg::line_chart(s, o),
                "After each removal the importance |dL/dg| of every remaining head is measured "
                "again with the removed heads gated off (Michel et al. 2019). A dot in a "
                "relation's colour marks the removal of a head that carried it.");
}

// The heads in the order they were removed, then the survivor(s).
std::vector<int> removal_order(const Heads& h, const std::vector<Step>& c) {
  std::vector<int> order;
  std::vector<bool> seen(h.per_head.size(), false);
  for (const Step& s : c)
    if (s.head >= 0 && !seen[s.head]) order.push_back(s.head), seen[s.head] = true;
  for (size_t k = 0; k < seen.size(); ++k)
    if (!seen[k]) order.push_back(static_cast<int>(k));
  return order;
}

// 1st, 2nd, 3rd, 4th, .. 11th, 12th, 13th, .. 21st.
std::string ordinal(size_t n) {
  const size_t tens = n % 100, ones = n % 10;
  const char* suffix = tens >= 11 && tens <= 13 ? "th"
                       : ones == 1              ? "st"
                       : ones == 2              ? "nd"
                       : ones == 3              ? "rd"
                                                : "th";
  return fmt::format("{}{}", n, suffix);
}

// Whether the specialized heads (those the assignment behind s_match gives a relation with
// mass > 0.5) outlasted every other head, in words.
std::string verdict(const Heads& h, const std::vector<Step>& c) {
  const std::vector<int> order = removal_order(h, c);
  std::string names;
  size_t specialized = 0, first_special = order.size();
  for (size_t i = 0; i < order.size(); ++i) {
    bool spec = false;
    const int r = carried(h, order[i], &spec);
    if (!spec) continue;
    names += (names.empty() ? "" : ", ") + h.label[order[i]] + " " + h.relations[r];
    ++specialized;
    first_special = std::min(first_special, i);
  }
  if (specialized == 0) return "No head is specialized (no relation claimed).";
  const std::string head = fmt::format("The {} specialized head{} ({})", specialized,
                                       specialized == 1 ? "" : "s", svg::escape(names));
  const std::string is = specialized == 1 ? " is" : " are";
  if (specialized == order.size()) return head + " are all the heads there are.";
  if (first_special == order.size() - specialized)
    return head + is +
           " the last to go: every other head was pruned first, and accuracy with only them "
           "left is " +
           svg::number(c[std::min(order.size() - specialized, c.size() - 1)].accuracy, 3) + ".";
  return head + is + " not the last to go: " + h.label[order[first_special]] + " is the " +
         ordinal(first_special + 1) + fmt::format(" of the {} heads pruned", order.size() - 1) +
         ", while a head without a claim is still there.";
}

// For each relation, the last head standing among those with more than 0.3 of their attention
// on it, and whether that head is sharp (> 0.5): whether pruning keeps a specialist per
// relation to the end, whichever duplicate it removes first.
std::string last_carriers(const Heads& h, const std::vector<Step>& c) {
  const std::vector<int> order = removal_order(h, c);
  std::string list;
  bool all_sharp = true;
  for (size_t r = 0; r < h.relations.size(); ++r) {
    int last = -1;
    double mass = 0.0;
    for (int k : order) {
      const double m =
          num(h.per_head[k].value("mass", json::object()), h.relations[r].c_str(), 0.0);
      if (m > 0.3) last = k, mass = m;
    }
    all_sharp = all_sharp && last >= 0 && mass > 0.5;
    list += fmt::format("{}{} {}", list.empty() ? "" : ", ", svg::escape(h.relations[r]),
                        last < 0 ? "none" : fmt::format("{} ({:.2f})", h.label[last], mass));
  }
  return std::string(all_sharp ? "Each relation's last head is a specialized one"
                               : "Not every relation's last head is a specialized one") +
         " (the last to go among the heads with more than 0.3 of their attention on it: " + list +
         ").";
}

std::string steps_table(const Heads& h, const std::vector<Step>& c) {
  std::string head =
      "<tr><th>pruned</th><th class=\"l\">head</th><th class=\"l\">carried</th>"
      "<th>accuracy</th>";
  for (const std::string& r : h.relations) head += "<th>" + svg::escape(r) + "</th>";
  std::string rows;
  for (size_t i = 0; i < c.size(); ++i) {
    bool spec = false;
    const int r = c[i].head >= 0 ? carried(h, c[i].head, &spec) : -1;
    rows += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>", i,
        c[i].head < 0 ? "-" : h.label[c[i].head],
        r < 0 ? "-"
              : fmt::format("<span class=\"tag\" style=\"background:{}\">{}</span>"
                            "{}",
                            h.colors[r], svg::escape(h.relations[r]), spec ? "" : " (backup)"),
        svg::number(c[i].accuracy, 3));
    for (double v : c[i].component) rows += "<td>" + svg::number(v, 3) + "</td>";
    rows += "</tr>";
  }
  return "<table>" + head + "</tr>" + rows + "</table>";
}

}  // namespace

std::string pruning_body(const RunView& v) {
  const RunFiles& f = v.files;
  const Heads& h = v.heads;
  const std::vector<Step> c = h.per_head.empty() ? std::vector<Step>{} : read_curve(f.heads, h);
  if (c.empty()) return missing("heads.json has no pruning curve.");
  return lede(
             "Heads removed one at a time, least important first, until one is left "
             "(heads.json \"pruning\"). A head carried a relation when more than 0.3 of its "
             "attention is on its partner: the relation assigned to it (specialized when "
             "above 0.5), else as a backup.") +
         "<div class=\"row\">" + curve_chart(h, c) + "</div><p>" + verdict(h, c) + " " +
         last_carriers(h, c) + "</p>" + steps_table(h, c);
}

}  // namespace headlab::report_parts
