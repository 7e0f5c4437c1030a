// The run report's activation patching (heads.json "patching", each head's "patching_restored"
// and its mean ablation), from an analysis result written as heads.json by the analysis' own
// writer: the "patching" section's map, numbers and residual tables, "n/a" where a fraction is
// undefined, the verdict's line exactly when the head by mass is not the head patching names,
// and a task that cannot corrupt or an older heads.json rendering without it. Also: the
// heatmaps' cell text keeps 4.5:1 contrast on every shade.

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/train/analysis_test_util.h"
#include "train/analysis/analysis.h"
#include "train/report/report.h"
#include "train/report/svg/svg.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

using Restored = std::vector<std::vector<std::optional<double>>>;  // [R][head]

// One layer of three heads of the dependency task: head k looks at relation k's partner (mass
// 0.9) and is assigned it; patching restores `restored` of each relation's logit difference.
AnalysisResult result(const Restored& restored) {
  AnalysisResult r;
  r.task = "dependency";
  r.relations = {"PREV", "HEAD", "SEM"};
  r.layers = 1;
  r.heads = 3;
  for (int h = 0; h < 3; ++h) {
    HeadAnalysis a;
    a.head = h;
    for (int k = 0; k < 3; ++k) a.mass.push_back(k == h ? 0.9 : 0.05);
    a.mass_distinct = a.argmax_accuracy = a.mass;
    a.ablation_accuracy = 0.5 + 0.1 * h;
    a.mean_ablation_accuracy = 0.625 + 0.1 * h;
    a.keep_only_accuracy = 0.3;
    a.ablation_component = a.mean_ablation_component = a.keep_only_component = {0.5, 0.5, 0.5};
    r.per_head.push_back(a);
  }
  r.specialization.assignment = {{0, 0}, {0, 1}, {0, 2}};
  r.specialization.n_claimed = 3;
  r.eval = LabelAccuracy{0.99, {0.99, 0.99, 0.99}, 1000};
  r.groups.resize(3);
  r.group_drops.assign(3, std::vector<double>(3, 0.0));
  PatchingMap& p = r.patching;
  p.available = true;
  p.seed = 7;
  p.tokens = {256, 839, 256};
  p.clean = {0.09, 5.1, 3.8};
  p.corrupted = {-0.05, -5.1, -3.8};
  p.heads = restored;
  p.residual = {{"blocks.0.hook_resid_pre", {1.0, 1.0, 1.0}, {0.0, 0.0, std::nullopt}},
                {"blocks.0.hook_resid_post", {0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}}};
  return r;
}

// Each relation's own head restores the most: mass and patching agree. L0 H2 on PREV undefined.
const Restored kAgree = {{0.94, 0.008, std::nullopt}, {0.05, 0.61, 0.2}, {0.1, 0.0, 0.82}};

std::string report(const fs::path& dir, const json& doc) {
  std::ofstream(dir / "heads.json") << doc.dump();
  const std::string html = slurp(write_run_report(dir));
  CHECK(check_tags(html) == "");
  return html;
}

// The verdict's text.
std::string verdict(const std::string& html) {
  const size_t a = html.find("id=\"verdict\">");
  if (a == std::string::npos) return "";
  const size_t b = html.find("</p>", a);
  return html.substr(a + 13, b - a - 13);
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

constexpr const char* kSpecialized =
    "3 of 3 relations have their own head: PREV L0H0 0.90, HEAD L0H1 0.90, SEM L0H2 0.90.";

// WCAG 2 contrast ratio of two "#rrggbb" colours.
double contrast(const std::string& a, const std::string& b) {
  const auto luminance = [](const std::string& c) {
    double out = 0;
    const double weight[3] = {0.2126, 0.7152, 0.0722};
    for (int i = 0; i < 3; ++i) {
      const double v = std::stoi(c.substr(1 + 2 * i, 2), nullptr, 16) / 255.0;
      out += weight[i] * (v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4));
    }
    return out;
  };
  const double x = luminance(a), y = luminance(b);
  return (std::max(x, y) + 0.05) / (std::min(x, y) + 0.05);
}

}  // namespace

TEST_CASE("train: run report draws activation patching as a head x relation map with its numbers") {
  TempDir dir("headlab-report-patching");
  const std::string html = report(dir.path, analysis_to_json(result(kAgree)));
  const std::string s = section(html, "patching");
  REQUIRE(!s.empty());
  CHECK(html.find("<a href=\"#patching\">Activation patching</a>") != std::string::npos);
  // Right after the mass matrix.
  CHECK(html.find("<section id=\"specialization\">") < html.find("<section id=\"patching\">"));
  CHECK(html.find("<section id=\"patching\">") < html.find("<section id=\"attention\">"));

  // The map: every fraction written in its cell, "n/a" where undefined, tooltips saying which.
  CHECK(s.find(">0.94</text>") != std::string::npos);
  CHECK(s.find(">0.61</text>") != std::string::npos);
  CHECK(s.find(">0.82</text>") != std::string::npos);
  CHECK(occurrences(s, ">n/a</text>") == 1);
  CHECK(s.find("<title>L0 H2, PREV: undefined</title>") != std::string::npos);
  CHECK(s.find("<title>L0 H0, PREV: 0.940 of the logit difference restored</title>") !=
        std::string::npos);
  CHECK(s.find("best for PREV") != std::string::npos);
  // The caption: what the number is, and what was measured.
  CHECK(s.find("the fraction of the clean-minus-corrupted logit difference restored when that "
               "head&#39;s output is patched from the clean sentence into the corrupted one; 1 = "
               "the head alone carries the relation&#39;s information to the output, 0 = none") !=
        std::string::npos);
  CHECK(s.find("Measured: PREV 256 tokens, logit difference 0.090 clean and -0.050 corrupted; "
               "HEAD 839 tokens, logit difference 5.100 clean and -5.100 corrupted;") !=
        std::string::npos);
  CHECK(s.find("(seed 7)") != std::string::npos);
  // Per relation: the head patching names against the head mass names.
  CHECK(s.find("<td class=\"l\">PREV</td><td>256</td><td>0.090</td><td>-0.050</td><td "
               "class=\"l\">L0 H0 (0.940)</td><td class=\"l\">L0 H0 (0.940)</td><td "
               "class=\"l\">agree</td>") != std::string::npos);
  CHECK(s.find("disagree") == std::string::npos);
  // The residual stream, per relation; SEM's undefined destination as "n/a".
  CHECK(occurrences(s, "<th class=\"l\">hook</th><th>source</th><th>destination</th>") == 3);
  CHECK(s.find("<td class=\"l\"><code>blocks.0.hook_resid_pre</code></td><td>1.000</td><td>0.000"
               "</td>") != std::string::npos);
  CHECK(s.find("<td class=\"l\"><code>blocks.0.hook_resid_pre</code></td><td>1.000</td><td>n/a"
               "</td>") != std::string::npos);

  CHECK(verdict(html) == std::string(kSpecialized) + " Patching agrees.");
  // The per-head table's mean ablation.
  const std::string table = section(html, "heads");
  CHECK(table.find("<th>acc. ablated</th><th>acc. mean-ablated</th>") != std::string::npos);
  CHECK(table.find("<td>0.500</td><td>0.625</td>") != std::string::npos);
}

TEST_CASE("train: the verdict names a relation exactly when mass and patching name other heads") {
  TempDir dir("headlab-report-patching-verdict");
  // PREV: L0 H2 restores the most, not L0 H0, its head by mass.
  Restored r = kAgree;
  r[0] = {0.1, 0.02, 0.9};
  std::string html = report(dir.path, analysis_to_json(result(r)));
  CHECK(verdict(html) == std::string(kSpecialized) +
                             " PREV: mass names L0H0 (restores 0.10) but patching names L0H2 "
                             "(0.90).");
  CHECK(occurrences(section(html, "patching"), "<strong>disagree</strong>") == 1);

  // Two relations: both, in relation order.
  r[2] = {0.7, 0.0, 0.3};
  html = report(dir.path, analysis_to_json(result(r)));
  CHECK(verdict(html) == std::string(kSpecialized) +
                             " PREV: mass names L0H0 (restores 0.10) but patching names L0H2 "
                             "(0.90); SEM: mass names L0H2 (restores 0.30) but patching names "
                             "L0H0 (0.70).");

  // A tie is agreement; the head by mass undefined where another head is defined is not.
  r = kAgree;
  r[0] = {0.9, 0.02, 0.9};
  html = report(dir.path, analysis_to_json(result(r)));
  CHECK(verdict(html) == std::string(kSpecialized) + " Patching agrees.");
  r[0] = {std::nullopt, 0.02, 0.5};
  html = report(dir.path, analysis_to_json(result(r)));
  CHECK(verdict(html) == std::string(kSpecialized) +
                             " PREV: mass names L0H0 (restores n/a) but patching names L0H2 "
                             "(0.50).");

  // Nothing defined for any relation: nothing to compare, nothing said.
  r = Restored(3, std::vector<std::optional<double>>(3));
  html = report(dir.path, analysis_to_json(result(r)));
  CHECK(verdict(html) == kSpecialized);
  CHECK(occurrences(section(html, "patching"), ">n/a</text>") == 9);
}

TEST_CASE("train: run report without patching says it is not available, or leaves it out") {
  TempDir dir("headlab-report-no-patching");
  // A task that cannot corrupt: "patching": null and each head's "patching_restored" null.
  AnalysisResult r = result(kAgree);
  r.patching = PatchingMap{};
  json doc = analysis_to_json(r);
  REQUIRE(doc["patching"].is_null());
  std::string html = report(dir.path, doc);
  CHECK(section(html, "patching")
            .find("Activation patching not available: the dependency task makes no corrupted "
                  "sentences, so there is nothing to patch.") != std::string::npos);
  CHECK(section(html, "patching").find("<svg") == std::string::npos);
  CHECK(verdict(html) == kSpecialized);

  // A heads.json written before patching and mean ablation: no section, no link, no column.
  for (json& head : doc["layers"][0]["heads"])
    for (const char* key : {"patching_restored", "mean_ablation_accuracy", "mean_ablation_drop",
                            "mean_ablation_component_accuracy"})
      head.erase(key);
  doc.erase("patching");
  html = report(dir.path, doc);
  CHECK(section(html, "patching").empty());
  CHECK(html.find("#patching") == std::string::npos);
  CHECK(html.find("mean-ablated") == std::string::npos);
  CHECK(verdict(html) == kSpecialized);

  // An edited document: a relation without its entry falls back on each head's
  // "patching_restored"; a fraction that is not a number reads as undefined, never throws.
  doc = analysis_to_json(result(kAgree));
  doc["patching"]["relations"].erase("SEM");
  doc["patching"]["relations"]["PREV"]["heads"][0][0] = "x";
  html = report(dir.path, doc);
  const std::string s = section(html, "patching");
  CHECK(s.find("; SEM not measured.") != std::string::npos);
  CHECK(s.find(">0.82</text>") != std::string::npos);
  CHECK(s.find("<title>L0 H0, PREV: undefined</title>") != std::string::npos);
  CHECK(verdict(html) == std::string(kSpecialized) +
                             " PREV: mass names L0H0 (restores n/a) but patching names L0H1 "
                             "(0.01).");
}

TEST_CASE("train: heatmap cell text keeps 4.5:1 contrast on every shade") {
  for (int i = 0; i <= 1000; ++i) {
    const double t = i / 1000.0;
    CAPTURE(t);
    CHECK(contrast(svg::sequential(t), svg::dark(t) ? "#ffffff" : "#000000") >= 4.5);
  }
  // The colour an undefined cell is drawn in, with its dark text.
  CHECK(contrast(svg::sequential(NAN), "#000000") >= 4.5);
  const std::vector<double> v = {0.2, NAN};
  svg::HeatmapOptions o;
  o.nan_text = "n/a";
  const std::string h = svg::heatmap(1, 2, v, o);
  CHECK(h.find("fill=\"#000000\">0.20</text>") != std::string::npos);
  CHECK(h.find("fill=\"#000000\">n/a</text>") != std::string::npos);
  CHECK(h.find("<title>n/a</title>") != std::string::npos);
}

TEST_CASE("train: run report lists each head's direct logit attribution when heads.json has it") {
  TempDir dir("headlab-report-dla");
  AnalysisResult r = result(kAgree);
  r.patching.direct = {{5.25, 0.0, 0.01}, {0.0, 3.3, -0.04}, {0.02, 1.37, 4.72}};  // [R][head]
  std::string html = report(dir.path, analysis_to_json(r));
  const std::string s = section(html, "patching");
  REQUIRE(s.find("Direct logit attribution") != std::string::npos);
  // Head L0 H2's row: PREV 0.01, HEAD -0.04, SEM 4.72.
  CHECK(s.find("<td class=\"l\">L0 H2</td><td>0.01</td><td>-0.04</td><td>4.72</td>") !=
        std::string::npos);
  // Without it (a post-norm model, an older run) the table is left out.
  r.patching.direct.clear();
  html = report(dir.path, analysis_to_json(r));
  CHECK(section(html, "patching").find("Direct logit attribution") == std::string::npos);
}
