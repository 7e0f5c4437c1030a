// The sweep report's "grid" section: for each pair of --over keys, three heat maps (share of seeds
// specialized, mean eval accuracy, lowest s_match) whose cells link to their runs (sections.h).

#include <algorithm>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {

std::vector<std::string> over_keys(const json& sweep) {
  std::vector<std::string> keys;
  for (const json& k : sweep.value("over", json::array()))
    if (k.is_string()) keys.push_back(k.get<std::string>());
  return keys;
}

// Run i's value of `key` as text, or "" when it has none.
std::string value_of(const json& run, const std::string& key) {
  const json values = run.value("values", json::object());
  return values.is_object() && values.contains(key) ? value_text(values[key]) : std::string();
}

std::vector<std::string> values_in_order(const json& runs, const std::string& key) {
  std::vector<std::string> out;
  for (const json& r : runs) {
    const std::string v = value_of(r, key);
    if (!v.empty() && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

SweepGrid make_grid(const SweepView& v, const std::string& row_key, const std::string& col_key) {
  SweepGrid g{
      row_key, col_key, values_in_order(v.runs, row_key), values_in_order(v.runs, col_key), {}};
  g.cells.resize(g.row_values.size() * g.col_values.size());
  for (size_t i = 0; i < v.runs.size(); ++i) {
    const auto r =
        std::find(g.row_values.begin(), g.row_values.end(), value_of(v.runs[i], row_key));
    const auto c =
        std::find(g.col_values.begin(), g.col_values.end(), value_of(v.runs[i], col_key));
    if (r == g.row_values.end() || c == g.col_values.end()) continue;
    GridCell& cell =
        g.cells[(r - g.row_values.begin()) * g.col_values.size() + (c - g.col_values.begin())];
    cell.runs.push_back(i);
    if (!v.runs[i].value("ok", false)) continue;
    ++cell.ok;
    cell.specialized += run_specialized(v, i) ? 1 : 0;
  }
  for (GridCell& cell : g.cells) {
    const Stats acc = stats(field(v.runs, cell.runs, "eval_accuracy"));
    const Stats sm = stats(field(v.runs, cell.runs, "s_match"));
    cell.mean_accuracy = acc.mean;
    cell.lowest_s_match = sm.lo;
  }
  return g;
}

std::string cell_id(size_t pair, size_t k, size_t cols) {
  return fmt::format("grid-{}-{}-{}", pair, k / cols, k % cols);
}

std::string cell_label(const SweepGrid& g, size_t k) {
  const size_t cols = g.col_values.size();
  return g.row_key + "=" + g.row_values[k / cols] + ", " + g.col_key + "=" + g.col_values[k % cols];
}

// One heat map of the pair: `value` and `text` of each cell, its tooltip "<cell>: <what>".
template <class Value, class Text, class What>
std::string grid_map(const SweepGrid& g, size_t pair, const std::string& title, int digits,
                     Value value, Text text, What what) {
  const size_t cols = g.col_values.size();
  svg::HeatmapOptions o;
  o.title = title;
  o.row_labels = g.row_values;
  o.col_labels = g.col_values;
  o.y_label = g.row_key;
  o.x_label = g.col_key;
  o.cell = 52;
  o.digits = digits;
  std::vector<double> values;
  for (size_t k = 0; k < g.cells.size(); ++k) {
    values.push_back(value(g.cells[k]));
    o.cell_texts.push_back(text(g.cells[k]));
    o.cell_titles.push_back(cell_label(g, k) + ": " + what(g.cells[k]) + " (its runs below)");
    o.cell_links.push_back("#" + cell_id(pair, k, cols));
  }
  return figure(
      svg::heatmap(static_cast<int>(g.row_values.size()), static_cast<int>(cols), values, o));
}

std::string number_or_dash(double v, int digits) {
  return std::isnan(v) ? std::string("-") : svg::number(v, digits);
}

// The pair's heat maps, then one table row per cell with its runs (the cells' link targets).
std::string pair_html(const SweepView& v, const SweepGrid& g, size_t pair) {
  const auto share = [](const GridCell& c) {
    return c.runs.empty() ? NAN : static_cast<double>(c.specialized) / c.runs.size();
  };
  const auto share_text = [](const GridCell& c) {
    return fmt::format("{}/{}", c.specialized, c.runs.size());
  };
  const auto share_what = [](const GridCell& c) {
    return fmt::format("{}/{} seeds specialized", c.specialized, c.runs.size());
  };
  const auto acc = [](const GridCell& c) { return c.mean_accuracy; };
  const auto acc_text = [](const GridCell& c) { return number_or_dash(c.mean_accuracy, 3); };
  const auto acc_what = [](const GridCell& c) {
    return "mean eval accuracy " + number_or_dash(c.mean_accuracy, 3);
  };
  const auto sm = [](const GridCell& c) { return c.lowest_s_match; };
  const auto sm_text = [](const GridCell& c) { return number_or_dash(c.lowest_s_match, 2); };
  const auto sm_what = [](const GridCell& c) {
    return "lowest s_match " + number_or_dash(c.lowest_s_match, 2);
  };
  std::string out = "<h3>" + svg::escape(g.row_key) + " \u00d7 " + svg::escape(g.col_key) +
                    "</h3><div class=\"row\">" +
                    grid_map(g, pair, "Seeds specialized", 2, share, share_text, share_what) +
                    grid_map(g, pair, "Mean eval accuracy", 3, acc, acc_text, acc_what) +
                    grid_map(g, pair, "Lowest s_match", 2, sm, sm_text, sm_what) + "</div>";
  out += "<table><tr><th class=\"l\">" + svg::escape(g.row_key) + "</th><th class=\"l\">" +
         svg::escape(g.col_key) +
         "</th><th>specialized</th><th>mean eval accuracy</th><th>lowest s_match</th>"
         "<th class=\"l\">runs</th></tr>";
  const size_t cols = g.col_values.size();
  for (size_t k = 0; k < g.cells.size(); ++k) {
    const GridCell& c = g.cells[k];
    std::string links;
    for (size_t i : c.runs) {
      const std::string name = fmt::format("seed {}", v.runs[i].value("seed", 0));
      const std::string link = run_link(v, i);
      links += std::string(links.empty() ? "" : " \u00b7 ") +
               (link.empty() ? name : "<a href=\"" + svg::escape(link) + "\">" + name + "</a>");
    }
    out += fmt::format(
        "<tr id=\"{}\"><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{} of {}</td><td>{}</td>"
        "<td>{}</td><td class=\"l\">{}</td></tr>",
        cell_id(pair, k, cols), svg::escape(g.row_values[k / cols]),
        svg::escape(g.col_values[k % cols]), c.specialized, c.runs.size(),
        number_or_dash(c.mean_accuracy, 3), number_or_dash(c.lowest_s_match, 2), links);
  }
  return out + "</table>";
}

}  // namespace

std::vector<SweepGrid> sweep_grids(const SweepView& v) {
  const std::vector<std::string> keys = over_keys(v.sweep);
  std::vector<SweepGrid> out;
  for (size_t a = 0; a < keys.size(); ++a)
    for (size_t b = a + 1; b < keys.size(); ++b) out.push_back(make_grid(v, keys[a], keys[b]));
  return out;
}

std::string sweep_grid_body(const SweepView& v) {
  const std::vector<SweepGrid> grids = sweep_grids(v);
  if (grids.empty()) return "";
  std::string out = lede(fmt::format(
      "For each pair of swept keys, each cell takes every run with both values (over seeds{}). "
      "Specialized: eval accuracy at least {}, every relation claimed (its head's mass above "
      "0.5) and s_match at least {}; a failed run counts as not specialized. Click a cell for "
      "the list of its runs, each linked to its report.",
      over_keys(v.sweep).size() > 2 ? " and the other keys' values" : "",
      svg::number(kLearnedAccuracy, 2), svg::number(kSpecializedSMatch, 2)));
  for (size_t p = 0; p < grids.size(); ++p) out += pair_html(v, grids[p], p);
  return out;
}

}  // namespace headlab::report_parts
