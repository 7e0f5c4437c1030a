// Shared parts of the HTML reports: the page frame and style, relation colours, and reading the
// training curves out of metrics.jsonl.

#include "train/report/report.h"

#include <cmath>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "train/report/chart_tools.h"
#include "train/report/svg/svg.h"

namespace headlab {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr const char* kStyle = R"css(
:root { --ink: #1f2430; --muted: #5b6170; --line: #e3e6eb; --bg: #f4f5f7; --accent: #2f5d9e; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1440px; margin: 0 auto; padding: 20px 24px 48px; }
header.top { padding: 8px 0 14px; }
header.top h1 { margin: 0 0 4px; font-size: 24px; }
header.top p { margin: 0; color: var(--muted); }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 16px 20px 18px; margin: 16px 0; box-shadow: 0 1px 2px rgba(0,0,0,.04);
  overflow-x: auto; }
section h2 { margin: 0 0 4px; font-size: 18px; }
section p.lede { margin: 0 0 12px; color: var(--muted); max-width: 980px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 130px; background: #fafbfc; }
.card .k { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card.good .v { color: #2e7d32; } .card.bad .v { color: #c62828; }
.row { display: flex; flex-wrap: wrap; gap: 18px 22px; align-items: flex-start; }
.row > * { min-width: 0; max-width: 100%; }
.scroll { max-width: 100%; overflow-x: auto; }
.figure { margin: 0; display: table; }
.figure figcaption { display: table-caption; caption-side: bottom; font-size: 12px; color: var(--muted); margin-top: 2px; }
/* A table wider than its card scrolls inside it (display: block keeps the rows a table). */
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 13px;
  display: block; width: max-content; max-width: 100%; overflow-x: auto; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: right; }
th { background: #f7f8fa; font-weight: 600; text-align: center; }
td.l, th.l { text-align: left; }
td { white-space: nowrap; }
tr:nth-child(even) td { background: #fbfbfc; }
pre { background: #f7f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px;
  font-size: 12px; line-height: 1.35; max-height: 520px; overflow: auto; }
.note { color: var(--muted); font-style: italic; }
.chance { color: var(--muted); font-size: 11px; }
.tag { display: inline-block; padding: 0 7px; border-radius: 9px; color: #fff; font-size: 12px; font-weight: 600; }
.legend-inline span { margin-right: 14px; white-space: nowrap; }
.swatch { vertical-align: -2px; margin-right: 4px; }
svg.chart { display: block; overflow: visible; }
svg .ct { font-size: 13px; font-weight: 600; fill: var(--ink); }
svg .tick { font-size: 10px; fill: #5b6170; }
svg .axis { font-size: 11px; fill: #333; }
svg .legend { font-size: 11px; fill: #333; }
svg .lab { font-size: 11px; fill: #333; }
svg .val { font-size: 11px; fill: #222; font-variant-numeric: tabular-nums; }
svg .cv { font-variant-numeric: tabular-nums; }
svg .note { font-weight: 600; }
svg .grid { stroke: #eceef1; stroke-width: 1; }
svg .plot { fill: #fff; stroke: #cfd3da; }
svg .ref { stroke: #888; stroke-width: 1; stroke-dasharray: 4 3; }
footer { color: var(--muted); font-size: 12px; margin-top: 24px; }
p.verdict { margin: 8px 0 0; padding: 8px 12px; border-radius: 6px; font-size: 15px; font-weight: 600;
  border-left: 4px solid #c77c02; background: #fff8e6; }
p.verdict.good { border-left-color: #2e7d32; background: #eef7ee; }
nav.contents { font-size: 13px; color: var(--muted); margin: 2px 0 0; }
nav.contents a, a { color: var(--accent); }
.tag.open { background: #fff; border: 1.5px dashed; padding: 0 6px; }
.controls { display: flex; flex-wrap: wrap; gap: 10px 18px; align-items: center; margin: 0 0 10px; }
.controls label { font-weight: 600; }
.controls select { font: inherit; padding: 2px 4px; max-width: min(560px, 100%); }
.readout { min-height: 1.5em; font-variant-numeric: tabular-nums; color: var(--ink); margin: 4px 0 0; }
.thumbs { display: flex; flex-wrap: wrap; gap: 8px; align-content: flex-start; max-width: 640px; }
.thumbs svg { cursor: pointer; border: 2px solid transparent; border-radius: 4px; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
#att-map svg:focus { outline: 2px solid var(--accent); }
.thumbs svg.on { border-color: var(--accent); }
svg a circle:hover { stroke: #1f2430; stroke-width: 2; }
svg .halo { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
.sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
  white-space: nowrap; }
/* On paper every section is whole: nothing scrolls or is cut at a height, wide charts shrink to
   the page (their viewBox keeps them whole), a table's text gets smaller instead. */
@media print {
  body { background: #fff; font-size: 10pt; }
  main { max-width: none; padding: 0; }
  section { box-shadow: none; border: 0; border-radius: 0; padding: 0; margin: 0 0 14pt;
    overflow: visible; }
  section h2, h3 { break-after: avoid; }
  .figure, svg.chart, tr, .card, p.verdict { break-inside: avoid; }
  .scroll, table, pre, .thumbs { overflow: visible !important; max-height: none !important; }
  pre { white-space: pre-wrap; overflow-wrap: anywhere; }
  svg.chart { max-width: 100%; height: auto; }
  table { display: table; width: auto; max-width: 100%; font-size: 7.5pt; }
  th, td { padding: 2px 3px; white-space: normal; }
  .figure { display: block; max-width: 100%; }
  .figure figcaption { display: block; }
  .row > * { max-width: 100%; }
  .controls select { border: 1px solid #999; }
  nav.contents { display: none; }
}
)css";

// Every page's own script: a box that scrolls (a wide table or figure, the config) takes the
// keyboard focus, so that it can be scrolled without a mouse (WCAG 2.1.1); one that does not
// scroll stays out of the tab order. Again after a resize, which changes what scrolls.
constexpr const char* kScrollScript = R"js(
(function () {
  'use strict';
  function mark() {
    document.querySelectorAll('.scroll, table, pre').forEach(function (box) {
      var scrolls = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      if (scrolls && !box.hasAttribute('tabindex')) {
        box.setAttribute('tabindex', '0');
        box.setAttribute('data-scroll-focus', '');
      } else if (!scrolls && box.hasAttribute('data-scroll-focus')) {
        box.removeAttribute('tabindex');
        box.removeAttribute('data-scroll-focus');
      }
    });
  }
  mark();
  window.addEventListener('resize', mark);
})();
)js";

double number_or_nan(const nlohmann::json& row, const char* key) {
  auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return kNaN;
  return it->get<double>();
}

bool is_eval_row(const nlohmann::json& row) {
  if (row.contains("eval_accuracy")) return true;
  auto it = row.find("eval");
  if (it != row.end() && it->is_boolean() && it->get<bool>()) return true;
  for (const char* key : {"split", "kind", "type"}) {
    auto k = row.find(key);
    if (k != row.end() && k->is_string() && k->get<std::string>() == "eval") return true;
  }
  return false;
}

}  // namespace

std::string html_page(const std::string& title, const std::string& body,
                      const std::string& script) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         svg::escape(title) + "</title>\n<style>" + kStyle + report_parts::kViewsStyle +
         "</style>\n</head>\n<body>\n<main>\n" + body + "\n</main>\n<script>\n" + kScrollScript +
         script + report_parts::kChartDownloadScript + "</script>\n</body>\n</html>\n";
}

std::string relation_color(int index) {
  // Vermillion, blue, reddish purple, bluish green (the flagship's PREV, HEAD, SEM, NEXT): PREV
  // and HEAD sit on the two ends of the blue-yellow axis that protanopes and deuteranopes keep.
  static const char* const kRelationColors[] = {"#b34e00", "#0072b2", "#a84f86", "#007a5a"};
  if (index >= 0 && index < 4) return kRelationColors[index];
  return svg::palette(index);
}

std::string relation_dash(int index) {
  static const char* const kDashes[] = {"", "5 2", "1.5 1.5", "6 2 1.5 2"};
  return index >= 0 ? kDashes[index % 4] : "";
}

std::string relation_shape(int index) {
  static const char* const kShapes[] = {"circle", "square", "triangle", "diamond"};
  return index >= 0 ? kShapes[index % 4] : "circle";
}

Curves read_curves(const std::vector<nlohmann::json>& rows,
                   const std::vector<std::string>& relations) {
  Curves c;
  c.eval_component.resize(relations.size());
  for (const nlohmann::json& row : rows) {
    const double step = number_or_nan(row, "step");
    if (std::isnan(step)) continue;
    if (is_eval_row(row)) {
      double acc = number_or_nan(row, "eval_accuracy");
      if (std::isnan(acc)) acc = number_or_nan(row, "accuracy");
      double loss = number_or_nan(row, "eval_loss");
      if (std::isnan(loss)) loss = number_or_nan(row, "loss");
      c.eval_step.push_back(step);
      c.eval_accuracy.push_back(acc);
      c.eval_loss.push_back(loss);
      const nlohmann::json* comp = nullptr;
      for (const char* key : {"eval_component_accuracy", "component_accuracy"}) {
        if (row.contains(key)) comp = &row[key];
      }
      for (size_t r = 0; r < relations.size(); ++r) {
        double v = kNaN;
        if (comp && comp->is_object() && comp->contains(relations[r]) &&
            (*comp)[relations[r]].is_number()) {
          v = (*comp)[relations[r]].get<double>();
        } else if (comp && comp->is_array() && r < comp->size() && (*comp)[r].is_number()) {
          v = (*comp)[r].get<double>();
        }
        c.eval_component[r].push_back(v);
      }
      // A row may carry both parts ("loss" and "eval_loss"); otherwise it is evaluation only.
      const bool combined = row.contains("eval_loss") && row.contains("loss");
      if (!combined) continue;
    }
    const double loss = number_or_nan(row, "loss");
    if (std::isnan(loss)) continue;
    c.step.push_back(step);
    c.loss.push_back(loss);
    c.accuracy.push_back(number_or_nan(row, "accuracy"));
    c.lr.push_back(number_or_nan(row, "lr"));
  }
  return c;
}

double steps_to(const Curves& curves, double threshold) {
  for (size_t i = 0; i < curves.eval_step.size(); ++i) {
    if (curves.eval_accuracy[i] >= threshold) return curves.eval_step[i];
  }
  return -1;
}

}  // namespace headlab
