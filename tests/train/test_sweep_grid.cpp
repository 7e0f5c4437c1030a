// The sweep over two keys: each run's "specialized" and first claims (sweep.json, sweep.csv), the
// report's heat maps per pair of keys, the "specialized k of N" column and the claim orders, all
// checked against values computed here from the runs' own files.

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/train/analysis_test_util.h"
#include "train/report/report.h"
#include "train/sweep/collect.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

const fs::path kTiny = fs::path(HEADLAB_SOURCE_DIR) / "configs" / "tiny.toml";
const std::vector<std::string> kRelations = {"PREV", "HEAD", "SEM"};

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// What the test made a run report: its numbers and the first-claim step of each relation (-1:
// never).
struct Made {
  double accuracy = 0, s_match = 0;
  int n_claimed = 0;
  bool ok = true;
  std::vector<int> claim_step;  // per kRelations
};

// A timeline in which relation r's assigned head (head r) crosses 0.5 at claim_step[r], with a
// decoy: before that, another head has mass 0.9 on r but is not the assigned one.
std::string timeline(const Made& m) {
  std::string out;
  for (int step = 50; step <= 300; step += 50) {
    json mass = json::array();
    json heads = json::array();
    for (int h = 0; h < 4; ++h) {
      json cell = json::object();
      for (size_t r = 0; r < kRelations.size(); ++r) {
        const bool claimed = m.claim_step[r] >= 0 && step >= m.claim_step[r];
        cell[kRelations[r]] =
            static_cast<int>(r) == h ? (claimed ? 0.8 : 0.3) : (h == 3 ? 0.9 : 0.1);
      }
      heads.push_back(cell);
    }
    mass.push_back(heads);
    json assignment = json::object();
    for (size_t r = 0; r < kRelations.size(); ++r) assignment[kRelations[r]] = {0, r};
    out += json({{"step", step}, {"mass", mass}, {"assignment", assignment}}).dump() + "\n";
  }
  return out;
}

void write_run(const fs::path& dir, const Made& m) {
  fs::create_directories(dir);
  write(dir / "summary.json", json({{"train_seconds", 1.0}}).dump());
  write(dir / "report.html", "<!DOCTYPE html><title>run</title>");
  if (!m.ok) return;  // no heads.json: a failed run
  write(dir / "heads.json",
        json({{"relations", kRelations},
              {"eval_accuracy", m.accuracy},
              {"specialization",
               {{"s_match", m.s_match}, {"s_max", m.s_match}, {"n_claimed", m.n_claimed}}}})
            .dump());
  write(dir / "timeline.jsonl", timeline(m));
}

std::string expected_order(const Made& m) {
  // Written out by hand for the steps this test uses: sort by step, ties by relation order.
  std::vector<std::pair<int, size_t>> steps;
  std::string never;
  for (size_t r = 0; r < kRelations.size(); ++r) {
    if (m.claim_step[r] < 0) {
      never += (never.empty() ? "" : ", ") + kRelations[r];
    } else {
      steps.push_back({m.claim_step[r], r});
    }
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (size_t k = 0; k < steps.size(); ++k)
    out += (k == 0                                 ? ""
            : steps[k].first == steps[k - 1].first ? " = "
                                                   : " \u2192 ") +
           kRelations[steps[k].second];
  return never.empty() ? out : out + (out.empty() ? "" : "; ") + never + " never";
}

}  // namespace

TEST_CASE("train: first_claims and claim_order read the assigned head only, ties and never") {
  Made m;
  m.claim_step = {200, 100, 100};
  std::vector<json> rows;
  std::istringstream in(timeline(m));
  for (std::string line; std::getline(in, line);) rows.push_back(json::parse(line));
  const std::vector<FirstClaim> c = first_claims(rows, kRelations);
  REQUIRE(c.size() == 3);
  CHECK(c[0].step == 200);  // head 3's 0.9 on every relation is no claim: it is not assigned
  CHECK(c[1].step == 100);
  CHECK(c[2].step == 100);
  CHECK(claim_order(c) == "HEAD = SEM \u2192 PREV");
  m.claim_step = {-1, 250, 50};
  rows.clear();
  std::istringstream in2(timeline(m));
  for (std::string line; std::getline(in2, line);) rows.push_back(json::parse(line));
  CHECK(claim_order(first_claims(rows, kRelations)) == "SEM \u2192 HEAD; PREV never");
  CHECK(claim_order(first_claims({}, kRelations)) == "PREV, HEAD, SEM never");
}

TEST_CASE("train: sweep over two keys: heat map cells and specialized k of N equal the runs'") {
  TempDir dir("headlab-sweep-grid");
  SweepSpec spec;
  spec.config = kTiny;
  spec.over = {parse_over("model.d_model=48,96"), parse_over("model.attn_dropout=0,0.1,0.3")};
  spec.seeds = 3;
  spec.out_dir = dir.path / "sw";
  const std::vector<SweepRun> runs = plan_sweep(spec);
  REQUIRE(runs.size() == 18);

  std::mt19937 gen(7);
  const double accuracies[] = {0.35, 0.949, 0.95, 0.99, 1.0};
  const int steps[] = {50, 100, 150, 200, 250, -1};
  std::vector<Made> made(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    Made& m = made[i];
    m.accuracy = accuracies[gen() % 5];
    m.s_match = 0.6 + 0.01 * (gen() % 40);  // 0.60 .. 0.99, 0.80 itself included
    m.n_claimed = 2 + static_cast<int>(gen() % 2);
    m.ok = i != 4;  // one run failed
    for (int r = 0; r < 3; ++r) m.claim_step.push_back(steps[gen() % 6]);
    write_run(runs[i].dir, m);
  }
  // Two seeds of one setting claim in the same order, the third differs: the table must say so.
  made[0].claim_step = {200, 100, 150};
  made[1].claim_step = {250, 50, 150};
  made[2].claim_step = {100, 100, 150};
  for (size_t i = 0; i < 3; ++i) write_run(runs[i].dir, made[i]);

  std::vector<SweepOutcome> outcomes;
  for (const SweepRun& r : runs) outcomes.push_back(collect_run(r));
  write_sweep(spec, outcomes);
  const json doc = json::parse(slurp(spec.out_dir / "sweep.json"));
  const std::string html = slurp(spec.out_dir / "report.html");
  CHECK(check_tags(html) == "");

  // Each run's specialized and claim order, by this test's own definition.
  const auto specialized = [](const Made& m) {
    return m.ok && m.accuracy >= 0.95 && m.n_claimed == 3 && m.s_match >= 0.8;
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    CAPTURE(i);
    const json& r = doc["runs"][i];
    if (!made[i].ok) {
      CHECK(r["specialized"].is_null());
      CHECK(r["claim_order"].is_null());
      continue;
    }
    CHECK(r["specialized"] == specialized(made[i]));
    CHECK(r["claim_order"] == expected_order(made[i]));
    for (size_t k = 0; k < 3; ++k) {
      const json step = r["first_claims"][kRelations[k]];
      CHECK((made[i].claim_step[k] < 0 ? step.is_null() : step == made[i].claim_step[k]));
    }
  }
  const std::string csv = slurp(spec.out_dir / "sweep.csv");
  CHECK(csv.find(",ok,specialized,claim_order,first_claims\n") != std::string::npos);
  CHECK(csv.find(fmt::format("PREV={};HEAD={};SEM={}", 200, 100, 150)) != std::string::npos);

  // The heat maps: one cell per (d_model, dropout), over its three seeds.
  const std::string grid = section(html, "grid");
  REQUIRE(!grid.empty());
  const std::vector<std::string> widths = {"48", "96"}, drops = {"0", "0.1", "0.3"};
  for (size_t a = 0; a < 2; ++a) {
    for (size_t b = 0; b < 3; ++b) {
      size_t n = 0, k = 0, ok = 0;
      double acc = 0, lowest = 2;
      std::vector<std::string> dirs;
      for (size_t i = 0; i < runs.size(); ++i) {
        if (runs[i].values[0].second != widths[a] || runs[i].values[1].second != drops[b]) continue;
        ++n;
        dirs.push_back(runs[i].dir.filename().string());
        if (!made[i].ok) continue;
        ++ok;
        k += specialized(made[i]) ? 1 : 0;
        acc += made[i].accuracy;
        lowest = std::min(lowest, made[i].s_match);
      }
      REQUIRE(n == 3);
      const std::string cell =
          fmt::format("model.d_model={}, model.attn_dropout={}: ", widths[a], drops[b]);
      CAPTURE(cell);
      const std::string id = fmt::format("grid-0-{}-{}", a, b);
      CHECK(grid.find(fmt::format("<a href=\"#{}\" aria-label=\"{}{}/{} seeds specialized", id,
                                  cell, k, n)) != std::string::npos);
      CHECK(grid.find(fmt::format("aria-label=\"{}mean eval accuracy {:.3f}", cell, acc / ok)) !=
            std::string::npos);
      CHECK(grid.find(fmt::format("aria-label=\"{}lowest s_match {:.2f}", cell, lowest)) !=
            std::string::npos);
      // The cell's link target lists exactly its runs, each linked to its report.
      const size_t row = grid.find("<tr id=\"" + id + "\">");
      REQUIRE(row != std::string::npos);
      const std::string tr = grid.substr(row, grid.find("</tr>", row) - row);
      CHECK(tr.find(fmt::format("<td>{} of {}</td>", k, n)) != std::string::npos);
      size_t links = 0;
      for (const std::string& d : dirs) links += tr.find(d + "/report.html") != std::string::npos;
      CHECK(links == 3);
      CHECK(std::count(tr.begin(), tr.end(), '<') == 1 + 2 * 6 + 2 * 3);  // no other run's link
    }
  }

  // The table's specialized k of N and claim order, and the claims section's verdict on order.
  const std::string table = section(html, "table");
  const std::string claims = section(html, "claims");
  const std::string first_label = "model.attn_dropout=0, model.d_model=48";
  size_t k0 = 0;
  for (size_t i = 0; i < 3; ++i) k0 += specialized(made[i]) ? 1 : 0;
  const size_t row = table.find("<td class=\"l\">" + first_label + "</td>");
  REQUIRE(row != std::string::npos);
  const std::string tr = table.substr(row, table.find("</tr>", row) - row);
  CHECK(tr.find(fmt::format("<td>{} of 3</td>", k0)) != std::string::npos);
  CHECK(tr.find("HEAD \u2192 SEM \u2192 PREV (2 of 3; 2 orders)") != std::string::npos);
  CHECK(claims.find(first_label + ": 2 orders over 3 seeds: HEAD \u2192 SEM \u2192 PREV (2); "
                                  "PREV = HEAD \u2192 SEM (1).") != std::string::npos);

  // The distributed sweep's record carries the same fields back.
  SweepRunData data;
  const SweepOutcome back = outcome_from_record(run_record(outcomes[0]), runs[0], data);
  CHECK(back.specialized == outcomes[0].specialized);
  CHECK(claim_order(back.first_claims) == claim_order(outcomes[0].first_claims));
}
