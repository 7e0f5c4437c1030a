// The run report's chance baselines (heads.json fields ending in _baseline, best_heads,
// eval_accuracy_spread, composition's path_mass_baseline and claimed), drawn from hand-written
// documents: beside the numbers they qualify when present, and a heads.json without them (an
// older run) rendering as before.

#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/train/analysis_test_util.h"
#include "train/report/report.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

const std::vector<std::string> kRelations = {"PREV", "HEAD", "SEM"};

json by_relation(double prev, double head, double sem) {
  return {{"PREV", prev}, {"HEAD", head}, {"SEM", sem}};
}

// heads.json of `layers` x 3 heads: head k (layer-major) puts mass[k] on its relations and is
// assigned relation k (the first three heads); with `baselines`, every field of the baselines.
json heads_doc(int layers, const std::vector<std::vector<double>>& mass, bool baselines) {
  json doc = {{"relations", kRelations}, {"layers", json::array()}, {"eval_accuracy", 0.9}};
  for (int l = 0; l < layers; ++l) {
    json hs = json::array();
    for (int h = 0; h < 3; ++h) {
      const auto& m = mass[static_cast<size_t>(l * 3 + h)];
      json head = {{"head", h},
                   {"mass", by_relation(m[0], m[1], m[2])},
                   {"argmax_accuracy", by_relation(m[0], m[1], m[2])},
                   {"ablation_accuracy", h == 0 ? 0.5 : 0.895}};
      if (baselines) {
        head["mass_uniform_baseline"] = by_relation(1.0 / 17, 1.0 / 17, 1.0 / 17);
        head["mass_distinct_uniform_baseline"] = by_relation(1.0 / 17, 1.0 / 17, 1.0 / 17);
        head["argmax_offset_baseline"] = by_relation(1.0, 0.4, 0.2);
        head["argmax_offset_baseline_offset"] = {{"PREV", -1}, {"HEAD", 1}, {"SEM", -2}};
        head["ablation_drop_baseline"] = 0.012;
      }
      hs.push_back(head);
    }
    doc["layers"].push_back({{"layer", l}, {"heads", hs}});
  }
  doc["specialization"] = {{"assignment", {{"PREV", {0, 0}}, {"HEAD", {0, 1}}, {"SEM", {0, 2}}}},
                           {"n_claimed", 3},
                           {"s_match", 0.8}};
  if (baselines) {
    doc["baselines"] = {{"mass_uniform_baseline", by_relation(1.0 / 17, 1.0 / 17, 1.0 / 17)},
                        {"argmax_offset_baseline", by_relation(1.0, 0.4, 0.2)},
                        {"ablation_drop_baseline", 0.012},
                        {"composition_margin", 0.1}};
    doc["eval_accuracy_spread"] = {{"sd", 0.017}, {"standard_error", 0.006}, {"batches", 8}};
    doc["best_heads"] = {{"PREV",
                          {{"head", {0, 0}},
                           {"argmax_accuracy", 0.95},
                           {"argmax_offset_baseline", 1.0},
                           {"argmax_offset_baseline_offset", -1},
                           {"margin", -0.05}}},
                         {"HEAD",
                          {{"head", {0, 1}},
                           {"argmax_accuracy", 0.8},
                           {"argmax_offset_baseline", 0.4},
                           {"argmax_offset_baseline_offset", 1},
                           {"margin", 0.4}}}};
  }
  return doc;
}

const std::vector<std::vector<double>> kMass = {
    {0.95, 0.02, 0.01}, {0.05, 0.8, 0.1}, {0.04, 0.2, 0.7}};

std::string report(const fs::path& dir, const json& doc) {
  std::ofstream(dir / "heads.json") << doc.dump();
  const std::string html = slurp(write_run_report(dir));
  CHECK(check_tags(html) == "");
  return html;
}

// A composition entry of head (1, h) through (0, x) on SEM.
json entry(int h, int x, double path_mass, double baseline, bool claimed) {
  return {{"layer", 1},
          {"head", h},
          {"relation", "SEM"},
          {"composes_with", {0, x}},
          {"path_mass", path_mass},
          {"path_mass_baseline", baseline},
          {"path_mass_lower_baseline", 0.05},
          {"claimed", claimed},
          {"mass", 0.02},
          {"sources", json::array()}};
}

}  // namespace

TEST_CASE("train: run report draws the chance baselines beside the head scores") {
  TempDir dir("headlab-report-baselines");
  const std::string html = report(dir.path, heads_doc(1, kMass, true));
  const std::string spec = section(html, "specialization");
  CHECK(spec.find("Chance: a head attending uniformly over the visible keys scores PREV 0.06, "
                  "HEAD 0.06, SEM 0.06.") != std::string::npos);
  CHECK(spec.find("Chance: the best fixed-offset head (always the key d away) scores PREV 1.00 "
                  "at d = -1, HEAD 0.40 at d = +1, SEM 0.20 at d = -2.") != std::string::npos);
  const std::string table = section(html, "heads");
  CHECK(table.find("0.950 <span class=\"chance\" title=\"uniform head\">(0.059)</span>") !=
        std::string::npos);
  CHECK(table.find("0.950 <span class=\"chance\" title=\"best offset head\">(1.000)</span>") !=
        std::string::npos);
  CHECK(table.find("below 0.012 (2 x the standard error of accuracy over 8 batches)") !=
        std::string::npos);
  // Head 0's drop (0.4) is far above the noise; head 1's (0.005) within it.
  const std::string ablation = section(html, "ablation");
  CHECK(ablation.find("is within evaluation noise") != std::string::npos);
  CHECK(ablation.find("HEAD ~") != std::string::npos);
  CHECK(ablation.find("PREV ~") == std::string::npos);
  CHECK(section(html, "summary").find("(a uniform head: 6%)") != std::string::npos);

  const std::string best = section(html, "best-heads");
  REQUIRE(!best.empty());
  CHECK(html.find("<a href=\"#best-heads\">") != std::string::npos);
  CHECK(best.find("<td class=\"l\">L0 H0</td><td>0.950</td><td>1.000</td><td>-1</td><td>-0.050"
                  "</td>") != std::string::npos);
  CHECK(best.find("<td>+1</td><td>+0.400</td>") != std::string::npos);
  CHECK(best.find("SEM") == std::string::npos);  // absent from best_heads: no row
}

TEST_CASE("train: run report of a heads.json without baselines renders as before") {
  TempDir dir("headlab-report-no-baselines");
  const std::string html = report(
      dir.path, heads_doc(2, {kMass[0], kMass[1], kMass[2], kMass[0], kMass[1], kMass[2]}, false));
  CHECK(section(html, "best-heads").empty());
  CHECK(html.find("#best-heads") == std::string::npos);
  CHECK(html.find("class=\"chance\"") == std::string::npos);
  CHECK(html.find("Chance") == std::string::npos);
  CHECK(html.find("evaluation noise") == std::string::npos);
  CHECK(html.find("uniform head") == std::string::npos);
  CHECK(html.find("<p class=\"verdict good\" id=\"verdict\">3 of 3 relations have their own "
                  "head: PREV L0H0 0.95, HEAD L0H1 0.80, SEM L0H2 0.70.</p>") != std::string::npos);
}

TEST_CASE("train: composition is claimed only above chance, in the section and the verdict") {
  TempDir dir("headlab-report-composition-chance");
  json doc = heads_doc(2, {kMass[0], kMass[1], kMass[2], kMass[0], kMass[1], kMass[2]}, true);
  // (1, 0) through (0, 1): 0.85 against a uniform-Y 0.30, claimed; (1, 1) at its baseline.
  doc["composition"] = {entry(0, 1, 0.85, 0.30, true), entry(1, 0, 0.227, 0.227, false),
                        entry(2, 2, 0.3, 0.25, false)};
  std::string html = report(dir.path, doc);
  std::string s = section(html, "composition");
  CHECK(s.find("<th>chance: Y uniform</th><th>chance: X uniform</th><th>above chance</th>") !=
        std::string::npos);
  CHECK(s.find("<td>0.850</td><td>0.020</td><td>-</td><td>0.300</td><td>0.050</td><td>yes</td>") !=
        std::string::npos);
  CHECK(s.find("<td>0.227</td><td>0.050</td><td>no (chance)</td>") != std::string::npos);
  CHECK(s.find("exceeds both by more than 0.10") != std::string::npos);
  CHECK(s.find("No composition above chance") == std::string::npos);
  CHECK(html.find(" Composition above chance: L1H0 via L0H1 (SEM 0.85, chance 0.30).</p>") !=
        std::string::npos);

  // Nothing above chance: the section and the verdict say so, and no path is drawn.
  doc["composition"] = {entry(0, 1, 0.3, 0.25, false), entry(1, 0, 0.227, 0.227, false)};
  html = report(dir.path, doc);
  s = section(html, "composition");
  CHECK(s.find("No composition above chance: no head's strongest path exceeds its uniform-Y and "
               "uniform-X baselines by more than 0.10.") != std::string::npos);
  CHECK(s.find("<path d=") == std::string::npos);
  CHECK(html.find(" No composition above chance.</p>") != std::string::npos);

  // An older heads.json: entries without baselines keep the old table and say nothing of chance.
  for (json& e : doc["composition"]) {
    e.erase("path_mass_baseline");
    e.erase("path_mass_lower_baseline");
    e.erase("claimed");
  }
  html = report(dir.path, doc);
  s = section(html, "composition");
  CHECK(s.find("chance") == std::string::npos);
  CHECK(s.find("attention.npy or attention_tokens.json not found.") != std::string::npos);
  CHECK(html.find("composition above chance") == std::string::npos);
  CHECK(html.find("Composition above chance") == std::string::npos);
}
