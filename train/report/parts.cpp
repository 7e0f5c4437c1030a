// Internal building blocks of the HTML reports (see report_parts.h).

#include "train/report/parts.h"

#include <fmt/format.h>

#include "train/report/report.h"

namespace headlab::report_parts {

using nlohmann::json;

double num(const json& j, const char* key, double fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string card(const std::string& key, const std::string& value, const char* cls) {
  return fmt::format(
      "<div class=\"card {}\"><div class=\"k\">{}</div><div class=\"v\">{}</div></div>", cls,
      svg::escape(key), svg::escape(value));
}

std::string figure(const std::string& svg_text, const std::string& caption) {
  return "<figure class=\"figure\">" + svg_text +
         (caption.empty() ? "" : "<figcaption>" + svg::escape(caption) + "</figcaption>") +
         "</figure>";
}

std::string section(const char* id, const std::string& title, const std::string& lede,
                    const std::string& body) {
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}{}\n</section>\n", id, svg::escape(title),
                     lede.empty() ? "" : "<p class=\"lede\">" + lede + "</p>\n", body);
}

svg::LineChartOptions chart(std::string title, std::string x_label, std::string y_label) {
  svg::LineChartOptions o;
  o.title = std::move(title);
  o.x_label = std::move(x_label);
  o.y_label = std::move(y_label);
  return o;
}

svg::BarChartOptions bars(std::string title, std::string value_label) {
  svg::BarChartOptions o;
  o.title = std::move(title);
  o.value_label = std::move(value_label);
  return o;
}

svg::Series series(std::string name, std::string color, std::vector<double> x,
                   std::vector<double> y, bool dashed, bool markers) {
  svg::Series s;
  s.name = std::move(name);
  s.color = std::move(color);
  s.x = std::move(x);
  s.y = std::move(y);
  s.dashed = dashed;
  s.markers = markers;
  return s;
}

Heads parse_heads(const json& doc) {
  Heads h;
  if (!doc.is_object()) return h;
  h.task = doc.value("task", std::string());
  h.relations = doc.value("relations", std::vector<std::string>{});
  for (size_t r = 0; r < h.relations.size(); ++r)
    h.colors.push_back(relation_color(static_cast<int>(r)));
  for (const json& layer : doc.value("layers", json::array())) {
    ++h.layers;
    const json heads = layer.value("heads", json::array());
    h.heads = static_cast<int>(heads.size());
    for (const json& head : heads) {
      h.per_head.push_back(head);
      h.label.push_back(fmt::format("L{} H{}", layer.value("layer", 0), head.value("head", 0)));
      h.assigned.push_back(-1);
    }
  }
  const json assignment = doc.contains("specialization")
                              ? doc["specialization"].value("assignment", json::object())
                              : json::object();
  for (size_t r = 0; r < h.relations.size(); ++r) {
    auto it = assignment.find(h.relations[r]);
    if (it == assignment.end() || !it->is_array() || it->size() != 2) continue;
    const size_t k = static_cast<size_t>((*it)[0].get<int>() * h.heads + (*it)[1].get<int>());
    if (k < h.assigned.size()) h.assigned[k] = static_cast<int>(r);
  }
  return h;
}

int strongest(const Heads& h, size_t k) {
  const json m = h.per_head[k].value("mass", json::object());
  int best = -1;
  for (size_t r = 0; r < h.relations.size(); ++r)
    if (best < 0 || num(m, h.relations[r].c_str(), 0.0) > num(m, h.relations[best].c_str(), 0.0))
      best = static_cast<int>(r);
  return best;
}

std::string relation_legend(const Heads& h) {
  std::string out = "<p class=\"legend-inline\">";
  for (size_t r = 0; r < h.relations.size(); ++r) {
    out += fmt::format("<span><i class=\"swatch\" style=\"border-color:{}\"></i>{}</span>",
                       h.colors[r], svg::escape(h.relations[r]));
  }
  return out + "</p>";
}

std::string matrix(const Heads& h, const char* key, const std::string& title, bool notes,
                   int cell) {
  std::vector<double> values;
  std::vector<std::string> row_notes, note_colors;
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const json m = h.per_head[k].value(key, json::object());
    for (const std::string& r : h.relations) values.push_back(num(m, r.c_str(), 0.0));
    const int a = h.assigned[k];
    // Unassigned heads name their strongest relation in grey when it is a clear one (> 0.3,
    // the relation-group threshold): typically a second head backing up a relation.
    const int top = strongest(h, k);
    const bool backup = a < 0 && top >= 0 && num(m, h.relations[top].c_str(), 0.0) > 0.3;
    row_notes.push_back(!notes   ? ""
                        : a >= 0 ? "\u2192 " + h.relations[a]
                        : backup ? "(" + h.relations[top] + ")"
                                 : "");
    note_colors.push_back(a >= 0 ? h.colors[a] : "#8a919c");
  }
  svg::HeatmapOptions o;
  o.title = title;
  o.row_labels = h.label;
  o.col_labels = h.relations;
  o.col_label_colors = h.colors;
  o.cell = cell;
  o.row_notes = row_notes;
  o.row_note_colors = note_colors;
  return svg::heatmap(static_cast<int>(h.per_head.size()), static_cast<int>(h.relations.size()),
                      values, o);
}

}  // namespace headlab::report_parts
