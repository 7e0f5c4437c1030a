// The reports for every reader, on the generated text (the browser checks are in
// tests/train/report_a11y_browser.py): colours with 4.5:1 contrast computed from the page's own
// stylesheet and palettes, a second cue beside each relation's colour, every chart named, and
// the defects that were fixed (a one-point line, labels in relation colour, the matrix's marks,
// the 0.95 label, the pruning order's words, empty ablation groups, the run's wall time).

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/train/analysis_test_util.h"
#include "train/report/report.h"
#include "train/report/svg/svg.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

// WCAG 2 relative luminance and contrast ratio of two "#rrggbb" / "#rgb" colours.
double luminance(std::string hex) {
  if (hex.size() == 4) hex = {'#', hex[1], hex[1], hex[2], hex[2], hex[3], hex[3]};
  REQUIRE(hex.size() == 7);
  double out = 0;
  const double weight[3] = {0.2126, 0.7152, 0.0722};
  for (int c = 0; c < 3; ++c) {
    const double v = std::stoi(hex.substr(1 + 2 * c, 2), nullptr, 16) / 255.0;
    out += weight[c] * (v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4));
  }
  return out;
}

double contrast(const std::string& a, const std::string& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

const std::vector<std::string> kRelations = {"PREV", "HEAD", "SEM"};

// heads.json of 1 layer: mass[k] per relation, assigned[r] = head of relation r (-1: none).
json heads_doc(const std::vector<std::vector<double>>& mass, const std::vector<int>& assigned) {
  json heads = json::array(), assignment = json::object();
  for (size_t k = 0; k < mass.size(); ++k) {
    json m = json::object();
    for (int r = 0; r < 3; ++r) m[kRelations[r]] = mass[k][r];
    heads.push_back({{"head", k}, {"mass", m}, {"ablation_accuracy", 0.5}, {"importance", 0.2}});
  }
  for (int r = 0; r < 3; ++r)
    assignment[kRelations[r]] = assigned[r] < 0 ? json(nullptr) : json::array({0, assigned[r]});
  return {
      {"relations", kRelations},
      {"layers", json::array({{{"layer", 0}, {"heads", heads}}})},
      {"eval_accuracy", 0.9},
      {"specialization", {{"assignment", assignment}, {"claim_threshold", 0.5}, {"s_match", 0.6}}}};
}

std::string report(const fs::path& dir, const json& heads) {
  std::ofstream(dir / "heads.json") << heads.dump();
  const std::string html = slurp(write_run_report(dir));
  CHECK(check_tags(html) == "");
  return html;
}

json pruning_step(int k, json pruned, double acc) {
  return {{"heads_pruned", k},
          {"pruned", std::move(pruned)},
          {"accuracy", acc},
          {"component_accuracy", {{"PREV", acc}, {"HEAD", 1.0}, {"SEM", 1.0}}}};
}

size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = 0; (p = s.find(what, p)) != std::string::npos; p += what.size()) ++n;
  return n;
}

}  // namespace

TEST_CASE("train: report colours give text 4.5:1 on white, the stylesheet's colours included") {
  // The relations' colours and the chart palette: as text on white and under white text (tags).
  std::vector<std::string> colours = {kUnclaimedGrey};
  for (int i = 0; i < 8; ++i) colours.push_back(relation_color(i));
  for (int i = 0; i < 8; ++i) colours.push_back(svg::palette(i));
  for (const std::string& c : colours) {
    CAPTURE(c);
    CHECK(contrast(c, "#ffffff") >= 4.5);
  }
  for (int i = 0; i < 4; ++i) CHECK(contrast("#ffffff", relation_color(i)) >= 4.5);
  // Every colour the stylesheet gives text (color, fill, the --ink/--muted/--accent variables),
  // on white and on the page's grey background; white itself is only used on filled tags.
  const std::string page = html_page("t", "");
  const std::regex declaration(
      R"((?:^|[^-\w])(color|fill|--ink|--muted|--accent):\s*(#[0-9a-fA-F]{3,6})\b)");
  int checked = 0;
  for (std::sregex_iterator it(page.begin(), page.end(), declaration), end; it != end; ++it) {
    const std::string c = (*it)[2];
    if (c == "#fff" || c == "#ffffff") continue;
    CAPTURE((*it)[0].str());
    CHECK(contrast(c, "#ffffff") >= 4.5);
    CHECK(contrast(c, "#f4f5f7") >= 4.5);
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("train: report relations have a second cue besides colour") {
  std::set<std::string> dashes, shapes, colours;
  for (int r = 0; r < 4; ++r) {
    dashes.insert(relation_dash(r));
    shapes.insert(relation_shape(r));
    colours.insert(relation_color(r));
  }
  CHECK(dashes.size() == 4);
  CHECK(shapes.size() == 4);
  CHECK(colours.size() == 4);
  // On a chart: the shape on the line, at a few points, and in the legend.
  svg::Series s;
  s.name = "HEAD";
  s.color = relation_color(1);
  s.shape = relation_shape(1);
  for (int i = 0; i < 40; ++i) s.x.push_back(i), s.y.push_back(i * 0.01);
  const std::string chart = svg::line_chart(std::span(&s, 1), {});
  const size_t squares = occurrences(chart, "<rect x=") - 1;  // less the plot's frame
  CHECK(squares >= 6);
  CHECK(squares <= 11);
}

TEST_CASE("train: report charts are named and labels in relation colour keep it") {
  TempDir dir("headlab-report-a11y-named");
  json doc = heads_doc({{0.9, 0.05, 0.05}, {0.05, 0.8, 0.1}, {0.1, 0.45, 0.1}}, {0, 1, -1});
  doc["pruning"] = {pruning_step(0, nullptr, 1.0), pruning_step(1, {0, 2}, 0.9),
                    pruning_step(2, {0, 1}, 0.5)};
  const std::string html = report(dir.path, doc);
  // Every chart: role="img" (or "group" where it holds links) and a name.
  const std::regex open("<svg class=\"chart\"[^>]*>");
  int charts = 0;
  for (std::sregex_iterator it(html.begin(), html.end(), open), end; it != end; ++it) {
    const std::string tag = (*it)[0];
    CAPTURE(tag);
    CHECK(tag.find(" role=\"img\" aria-label=\"") != std::string::npos);
    ++charts;
  }
  CHECK(charts >= 5);
  // A column label in PREV's colour is a style, which the stylesheet's `svg .lab` cannot win.
  CHECK(html.find("class=\"lab\" text-anchor=\"middle\" font-size=\"11\" style=\"fill:" +
                  relation_color(0) + "\">PREV</text>") != std::string::npos);
  CHECK(html.find("font-size=\"11\" fill=\"" + relation_color(0) + "\">PREV") == std::string::npos);
  // The matrix: the claimed outline carries the relation's initial; the unassigned head's note
  // says it is unassigned, and the caption says what each mark means.
  const std::string spec = section(html, "specialization");
  CHECK(spec.find("(unassigned: HEAD)</text>") != std::string::npos);
  CHECK(spec.find("(HEAD)</text>") == std::string::npos);
  CHECK(spec.find("&quot;(unassigned: R)&quot; in grey: a head with no relation assigned") !=
        std::string::npos);
  CHECK(spec.find("fill=\"" + relation_color(0) + "\">P</text>") != std::string::npos);
}

TEST_CASE("train: report pruning chart draws one head and keeps its width at 16 heads") {
  TempDir dir("headlab-report-a11y-pruning");
  // One head: the curve is a single point, drawn as a marker (a lone polyline point is invisible).
  json one = heads_doc({{0.9, 0.05, 0.05}}, {0, -1, -1});
  one["pruning"] = {pruning_step(0, nullptr, 0.4)};
  std::string s = section(report(dir.path, one), "pruning");
  CHECK(s.find("<circle cx=") != std::string::npos);
  // 16 heads, 17 steps: the chart stops at 720 px and turns its tick labels.
  std::vector<std::vector<double>> mass(16, {0.05, 0.05, 0.05});
  json many = heads_doc(mass, {0, 1, 2});
  many["pruning"] = {pruning_step(0, nullptr, 1.0)};
  for (int k = 0; k < 16; ++k) many["pruning"].push_back(pruning_step(k + 1, {0, k}, 0.9));
  s = section(report(dir.path, many), "pruning");
  CHECK(s.find("width=\"720\"") != std::string::npos);
  CHECK(s.find("rotate(-45)") != std::string::npos);
}

TEST_CASE("train: report reference label lies over the dots and empty ablation groups say n/a") {
  svg::Series dots;
  dots.name = "eval";
  dots.markers = true;
  dots.x = {0, 1, 2};
  dots.y = {0.5, 0.95, 0.96};
  svg::LineChartOptions o;
  o.reference_y = 0.95;
  const std::string chart = svg::line_chart(std::span(&dots, 1), o);
  const size_t label = chart.find("class=\"tick halo\" text-anchor=\"end\">0.95</text>");
  REQUIRE(label != std::string::npos);
  CHECK(label > chart.rfind("<circle"));

  TempDir dir("headlab-report-a11y-groups");
  json doc = heads_doc({{0.9, 0.05, 0.05}, {0.05, 0.8, 0.1}}, {0, 1, -1});
  doc["relation_groups"] = {{"PREV", {{0, 0}}}, {"HEAD", {{0, 1}}}, {"SEM", json::array()}};
  doc["group_ablation_drop"] = {{"PREV", {{"PREV", 0.4}, {"HEAD", 0.0}, {"SEM", 0.01}}},
                                {"HEAD", {{"PREV", 0.0}, {"HEAD", 0.5}, {"SEM", 0.0}}},
                                {"SEM", {{"PREV", 0.0}, {"HEAD", 0.0}, {"SEM", 0.0}}}};
  const std::string ablation = section(report(dir.path, doc), "ablation");
  CHECK(ablation.find("SEM heads off (none)") != std::string::npos);
  CHECK(occurrences(ablation, ">n/a</text>") == 3);  // SEM's row, not 0.00
  CHECK(ablation.find(">0.40</text>") != std::string::npos);
}

TEST_CASE("train: the CLI's wall time includes the analysis after training") {
  TempDir dir("headlab-report-a11y-wall");
  const CommandResult out =
      run_command(std::string(HEADLAB_CLI) + " train " + HEADLAB_SOURCE_DIR +
                  "/configs/tiny.toml --set train.steps=30 --set schedule.warmup_steps=5 --set "
                  "train.eval_every=30 --set train.checkpoint_every=30 --no-progress --out " +
                  (dir.path / "run").string() + " 2>/dev/null");
  REQUIRE(out.code == 0);
  const std::smatch m = [&] {
    std::smatch found;
    std::regex_search(out.output, found,
                      std::regex(R"(wall time (\d+\.\d+) s \(the analysis (\d+\.\d+) s of it\))"));
    return found;
  }();
  REQUIRE(m.size() == 3);
  const json summary = json::parse(slurp(dir.path / "run" / "summary.json"));
  // The training's own wall time (summary.json) plus the analysis, to the printed 0.01 s.
  CHECK(std::stod(m[1]) ==
        doctest::Approx(summary.at("wall_seconds").get<double>() + std::stod(m[2])).epsilon(0.02));
  CHECK(std::stod(m[2]) > 0);
}
