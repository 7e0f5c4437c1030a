// Internal building blocks of the HTML reports (see parts.h).

#include "train/report/parts.h"

#include <cctype>

#include <fmt/format.h>

#include "train/report/report.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {
const char* const kGrey = kUnclaimedGrey;  // unclaimed and unassigned heads
}  // namespace

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
  // The wrapper scrolls a figure wider than its card, so that the page never does.
  return "<div class=\"scroll\"><figure class=\"figure\">" + svg_text +
         (caption.empty() ? "" : "<figcaption>" + svg::escape(caption) + "</figcaption>") +
         "</figure></div>";
}

std::string section(const char* id, const std::string& title, const std::string& lede,
                    const std::string& body) {
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}{}\n</section>\n", id, svg::escape(title),
                     lede.empty() ? "" : "<p class=\"lede\">" + lede + "</p>\n", body);
}

std::string lede(const std::string& html) {
  return "<p class=\"lede\">" + html + "</p>\n";
}

std::string missing(const std::string& text) {
  return "<p class=\"note\">" + svg::escape(text) + "</p>";
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
  const json spec = doc.value("specialization", json::object());
  const json assignment = spec.is_object() ? spec.value("assignment", json::object()) : json();
  h.threshold = num(spec, "claim_threshold", 0.5);
  h.assigned_mass.assign(h.per_head.size(), NAN);
  h.claimed.assign(h.per_head.size(), 0);
  for (size_t r = 0; r < h.relations.size() && assignment.is_object(); ++r) {
    auto it = assignment.find(h.relations[r]);
    if (it == assignment.end() || !it->is_array() || it->size() != 2) continue;
    const size_t k = static_cast<size_t>((*it)[0].get<int>() * h.heads + (*it)[1].get<int>());
    if (k >= h.assigned.size()) continue;
    h.assigned[k] = static_cast<int>(r);
    h.assigned_mass[k] =
        num(h.per_head[k].value("mass", json::object()), h.relations[r].c_str(), 0);
    h.claimed[k] = h.assigned_mass[k] > h.threshold;
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
    // The outline as the maps draw it: the relation's colour and its dash pattern.
    out += fmt::format(
        "<span><svg class=\"swatch\" width=\"14\" height=\"14\" aria-hidden=\"true\"><rect "
        "x=\"1\" y=\"1\" width=\"12\" height=\"12\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2\" stroke-dasharray=\"{}\"/></svg>{}</span>",
        h.colors[r], relation_dash(static_cast<int>(r)), svg::escape(h.relations[r]));
  }
  return out + "</p>";
}

std::string matrix(const Heads& h, const char* key, const std::string& title, bool notes,
                   int cell) {
  std::vector<double> values;
  std::vector<std::string> row_notes, note_colors;
  std::vector<svg::CellMark> marks;
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const json m = h.per_head[k].value(key, json::object());
    for (const std::string& r : h.relations) values.push_back(num(m, r.c_str(), 0.0));
    const int a = h.assigned[k];
    // Unassigned heads name their strongest relation in grey when it is a clear one (> 0.3,
    // the relation-group threshold): typically a second head backing up a relation.
    const int top = strongest(h, k);
    const bool backup = a < 0 && top >= 0 && num(m, h.relations[top].c_str(), 0.0) > 0.3;
    row_notes.push_back(!notes   ? ""
                        : a >= 0 ? "\u2192 " + h.relations[a] + (h.claimed[k] ? "" : " (unclaimed)")
                        : backup ? "(unassigned: " + h.relations[top] + ")"
                                 : "");
    note_colors.push_back(head_color(h, k));
    // The assignment outlined: solid in the relation's colour when claimed, dashed grey not;
    // the relation's initial in the corner says which without the colour.
    if (notes && a >= 0)
      marks.push_back({static_cast<int>(k), a, h.claimed[k] ? h.colors[a] : kGrey,
                       h.relations[a].substr(0, 1), !h.claimed[k]});
  }
  svg::HeatmapOptions o;
  o.title = title;
  o.row_labels = h.label;
  o.col_labels = h.relations;
  o.col_label_colors = h.colors;
  o.cell = cell;
  o.row_notes = row_notes;
  o.row_note_colors = note_colors;
  o.marks = marks;
  return svg::heatmap(static_cast<int>(h.per_head.size()), static_cast<int>(h.relations.size()),
                      values, o);
}

std::string head_caption(const Heads& h, size_t k) {
  const int a = h.assigned[k];
  if (a >= 0)
    return fmt::format("{} \u2192 {} {:.2f}{}", h.label[k], h.relations[a], h.assigned_mass[k],
                       h.claimed[k] ? "" : " (unclaimed)");
  const int top = strongest(h, k);
  if (top < 0) return h.label[k];
  return fmt::format("{} \u00b7 {} {:.2f}", h.label[k], h.relations[top],
                     num(h.per_head[k].value("mass", json::object()), h.relations[top].c_str(), 0));
}

std::string head_color(const Heads& h, size_t k) {
  return h.assigned[k] >= 0 && h.claimed[k] ? h.colors[h.assigned[k]] : kGrey;
}

std::string tag(const Heads& h, int r, bool filled) {
  const std::string name = svg::escape(h.relations[r]);
  if (filled)
    return fmt::format("<span class=\"tag\" style=\"background:{}\">{}</span>", h.colors[r], name);
  return fmt::format("<span class=\"tag open\" style=\"border-color:{0};color:{0}\">{1}</span>",
                     h.colors[r], name);
}

std::string href(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string count(size_t n, const char* singular, const char* plural) {
  return fmt::format("{} {}", n, n == 1 ? singular : plural);
}

}  // namespace headlab::report_parts
