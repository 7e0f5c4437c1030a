// The run report's sections of the analysis over training and across heads (timeline, pruning,
// composition), drawn from hand-written documents only: what they state must follow from the
// numbers they were given.

#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/train/analysis_test_util.h"
#include "train/io/npy.h"
#include "train/report/report.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

const std::vector<std::string> kRelations = {"PREV", "HEAD", "SEM"};

// heads.json of `layers` x `heads` heads; mass[k] is head k's (layer-major) mass per relation,
// assignment relation -> head index.
json heads_doc(int layers, int heads, const std::vector<std::vector<double>>& mass,
               const std::vector<int>& assignment) {
  json doc = {{"relations", kRelations}, {"layers", json::array()}};
  for (int l = 0; l < layers; ++l) {
    json hs = json::array();
    for (int h = 0; h < heads; ++h) {
      const auto& m = mass[static_cast<size_t>(l * heads + h)];
      hs.push_back({{"head", h}, {"mass", {{"PREV", m[0]}, {"HEAD", m[1]}, {"SEM", m[2]}}}});
    }
    doc["layers"].push_back({{"layer", l}, {"heads", hs}});
  }
  json a = json::object();
  for (size_t r = 0; r < kRelations.size(); ++r)
    a[kRelations[r]] = json::array({assignment[r] / heads, assignment[r] % heads});
  doc["specialization"] = {{"assignment", a}, {"n_claimed", 3}, {"s_match", 0.9}};
  return doc;
}

void write_json(const fs::path& p, const json& doc) {
  std::ofstream(p) << doc.dump();
}

json timeline_row(int step, double prev, double head, double sem) {
  // Head 0 grows onto PREV, head 1 onto HEAD, head 2 onto SEM; head 3 stays flat.
  return {{"step", step},
          {"accuracy", 0.5},
          {"s_match", (prev + head + sem) / 3},
          {"n_claimed", (prev > 0.5) + (head > 0.5) + (sem > 0.5)},
          {"assignment", {{"PREV", {0, 0}}, {"HEAD", {0, 1}}, {"SEM", {0, 2}}}},
          {"mass",
           {{{{"PREV", prev}, {"HEAD", 0.05}, {"SEM", 0.05}},
             {{"PREV", 0.05}, {"HEAD", head}, {"SEM", 0.1}},
             {{"PREV", 0.05}, {"HEAD", 0.1}, {"SEM", sem}},
             {{"PREV", 0.1}, {"HEAD", 0.2}, {"SEM", 0.1}}}}}};
}

std::string report(const fs::path& dir) {
  const std::string html = slurp(write_run_report(dir));
  CHECK(check_tags(html) == "");
  return html;
}

}  // namespace

TEST_CASE("train: run report timeline draws masses against steps and the order of claims") {
  TempDir dir("headlab-report-timeline");
  const std::vector<std::vector<double>> final_mass = {
      {0.9, 0.05, 0.05}, {0.05, 0.8, 0.1}, {0.05, 0.1, 0.7}, {0.1, 0.2, 0.1}};
  write_json(dir.path / "heads.json", heads_doc(1, 4, final_mass, {0, 1, 2}));
  std::ofstream t(dir.path / "timeline.jsonl");
  t << timeline_row(50, 0.1, 0.3, 0.2) << "\n"
    << timeline_row(100, 0.2, 0.6, 0.4) << "\n"  // HEAD claimed first
    << timeline_row(150, 0.7, 0.8, 0.6) << "\n"  // PREV and SEM together
    << "torn {\n";
  t.close();
  const std::string s = section(report(dir.path), "timeline");
  REQUIRE(!s.empty());
  CHECK(s.find("<polyline") != std::string::npos);
  CHECK(s.find("L0 H0 \u2192 PREV") != std::string::npos);
  CHECK(s.find("L0 H3 \u00b7 HEAD") != std::string::npos);  // unassigned: its largest mass
  CHECK(s.find("HEAD (100) \u2192 PREV (150) = SEM (150).") != std::string::npos);

  // Without timeline.jsonl the section says so.
  fs::remove(dir.path / "timeline.jsonl");
  CHECK(section(report(dir.path), "timeline").find("not found") != std::string::npos);
}

TEST_CASE("train: run report pruning curve says whether the specialized heads go last") {
  TempDir dir("headlab-report-pruning");
  const std::vector<std::vector<double>> mass = {
      {0.9, 0.05, 0.05}, {0.05, 0.8, 0.1}, {0.05, 0.1, 0.7}, {0.1, 0.4, 0.1}};
  json doc = heads_doc(1, 4, mass, {0, 1, 2});
  const auto step = [](int k, json pruned, double acc) {
    return json{{"heads_pruned", k},
                {"pruned", pruned},
                {"accuracy", acc},
                {"component_accuracy", {{"PREV", acc}, {"HEAD", 1.0}, {"SEM", 1.0}}}};
  };
  doc["pruning"] = {step(0, nullptr, 1.0), step(1, {0, 3}, 0.99), step(2, {0, 2}, 0.61),
                    step(3, {0, 1}, 0.31)};
  write_json(dir.path / "heads.json", doc);
  std::string s = section(report(dir.path), "pruning");
  CHECK(s.find("<polyline") != std::string::npos);
  CHECK(s.find("pruned a SEM head") != std::string::npos);
  CHECK(s.find("(backup)") != std::string::npos);  // head 3 backs up HEAD with 0.4
  CHECK(s.find("The 3 specialized heads (L0 H2 SEM, L0 H1 HEAD, L0 H0 PREV) are the last to go") !=
        std::string::npos);
  CHECK(s.find("0.990") != std::string::npos);  // accuracy with only them left
  CHECK(s.find("Each relation's last head is a specialized one") != std::string::npos);
  CHECK(s.find("PREV L0 H0 (0.90), HEAD L0 H1 (0.80), SEM L0 H2 (0.70)") != std::string::npos);

  doc["pruning"] = {step(0, nullptr, 1.0), step(1, {0, 2}, 0.6), step(2, {0, 3}, 0.6),
                    step(3, {0, 1}, 0.3)};
  write_json(dir.path / "heads.json", doc);
  s = section(report(dir.path), "pruning");
  CHECK(s.find("are not the last to go: L0 H2 is the 1st of the 3 heads pruned") !=
        std::string::npos);

  // The HEAD head goes first: the backup (0.4) is HEAD's last head.
  doc["pruning"] = {step(0, nullptr, 1.0), step(1, {0, 1}, 0.9), step(2, {0, 2}, 0.6),
                    step(3, {0, 3}, 0.3)};
  write_json(dir.path / "heads.json", doc);
  s = section(report(dir.path), "pruning");
  CHECK(s.find("Not every relation's last head is a specialized one") != std::string::npos);
  CHECK(s.find("HEAD L0 H3 (0.40)") != std::string::npos);

  doc.erase("pruning");
  write_json(dir.path / "heads.json", doc);
  CHECK(section(report(dir.path), "pruning").find("no pruning curve") != std::string::npos);
}

TEST_CASE("train: run report composition draws the two-step path on the example sentence") {
  TempDir dir("headlab-report-composition");
  // Two layers of two heads, T = 4: (1, 0) looks from every word at the next one (the last at
  // itself), (0, 1) at the previous one, so the path (1, 0) then (0, 1) returns to the query.
  // Only query 2 has itself as its (made-up) SEM partner: the path drawn is 2 -> 3 -> 2.
  const std::vector<std::vector<double>> mass = {
      {0.9, 0.0, 0.0}, {0.8, 0.0, 0.0}, {0.0, 0.9, 0.0}, {0.0, 0.0, 0.1}};
  json doc = heads_doc(2, 2, mass, {0, 2, 3});
  doc["composition"] = {
      {{"layer", 1},
       {"head", 0},
       {"relation", "SEM"},
       {"composes_with", {0, 1}},
       {"path_mass", 0.85},
       {"mass", 0.02},
       {"sources",
        {{{"layer", 0}, {"head", 0}, {"path_mass", 0.1}, {"ablated_mass", 0.02}},
         {{"layer", 0}, {"head", 1}, {"path_mass", 0.85}, {"ablated_mass", 0.01}}}}},
      {{"layer", 1},
       {"head", 1},
       {"relation", "SEM"},
       {"composes_with", {0, 0}},
       {"path_mass", 0.3},
       {"mass", 0.1},
       {"sources", json::array()}}};
  write_json(dir.path / "heads.json", doc);
  constexpr int64_t T = 4;
  NpyArray a{{1, 2, 2, T, T}, std::vector<float>(2 * 2 * T * T, 0.0f)};
  const auto at = [&](int64_t l, int64_t h, int64_t i, int64_t j) -> float& {
    return a.data[static_cast<size_t>(((l * 2 + h) * T + i) * T + j)];
  };
  for (int64_t i = 0; i < T; ++i) {
    at(0, 0, i, i) = 1.0f;
    at(0, 1, i, i == 0 ? 0 : i - 1) = 1.0f;
    at(1, 0, i, i + 1 < T ? i + 1 : i) = 1.0f;
    at(1, 1, i, 0) = 1.0f;
  }
  write_npy((dir.path / "attention.npy").string(), a);
  write_json(dir.path / "attention_tokens.json",
             {{"examples",
               {{{"tokens", {"BOS", "VERB:1", "SUBJ:2", "OBJ:0"}},
                 {"partners",
                  {{"PREV", {-1, 0, 1, 2}}, {"HEAD", {-1, 0, 1, 1}}, {"SEM", {-1, 3, 2, 1}}}}}}}});
  const std::string s = section(report(dir.path), "composition");
  REQUIRE(!s.empty());
  CHECK(s.find("0.850") != std::string::npos);
  // Shown: the entry whose path mass most exceeds its head's own mass, (1, 0) via (0, 1).
  CHECK(s.find("L1 H0 at SUBJ:2 looks at OBJ:0 (weight 1.00, above); at OBJ:0, layer-0 head "
               "L0 H1 had looked at SUBJ:2") != std::string::npos);
  CHECK(s.find("<path d=") != std::string::npos);

  // One layer: no section at all.
  write_json(dir.path / "heads.json",
             heads_doc(1, 4, {mass[0], mass[1], mass[2], mass[3]}, {0, 1, 2}));
  CHECK(section(report(dir.path), "composition").empty());
}
