// The run report's link back to its sweep, and the markup the views' scripts rely on (the line
// chart's series groups that the timeline toggles hide). What the views draw is checked in a
// browser: tests/train/report_views_browser.py.

#include <doctest/doctest.h>

#include <fstream>
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

void marker(const fs::path& dir, const char* kind) {
  fs::create_directories(dir);
  std::ofstream(dir / ".headlab") << json{{"headlab", kind}, {"id", "0123456789abcdef"}}.dump();
}

}  // namespace

TEST_CASE("train: a sweep's run report links back to the sweep's report, relatively") {
  TempDir dir("headlab-report-views");
  marker(dir.path / "sw", "sweep");
  marker(dir.path / "sw" / "heads-2_seed-1", "run");
  CHECK(load_run_files(dir.path / "sw" / "heads-2_seed-1").sweep_report == "../report.html");
  CHECK(load_run_files(dir.path / "sw" / "heads-2_seed-1/").sweep_report == "../report.html");
  // An earlier checkpoint's analysis writes its page two levels further down.
  const fs::path analysis = dir.path / "sw" / "heads-2_seed-1" / "analysis" / "step-000050";
  fs::create_directories(analysis);
  CHECK(load_run_files(dir.path / "sw" / "heads-2_seed-1", analysis).sweep_report ==
        "../../../report.html");
  const std::string html = slurp(write_run_report(dir.path / "sw" / "heads-2_seed-1"));
  CHECK(check_tags(html) == "");
  CHECK(html.find("<a id=\"sweep-link\" href=\"../report.html\">") != std::string::npos);
}

TEST_CASE("train: a run report outside a sweep has no link to a sweep") {
  TempDir dir("headlab-report-views");
  marker(dir.path / "runs", "run");  // a run's marker above is no sweep
  marker(dir.path / "runs" / "r", "run");
  marker(dir.path / "plain" / "r", "run");  // no marker above at all
  marker(dir.path / "bad" / "r", "run");
  std::ofstream(dir.path / "bad" / ".headlab") << "not json";  // an unreadable one above
  for (const char* run : {"runs/r", "plain/r", "bad/r"}) {
    CAPTURE(run);
    CHECK(load_run_files(dir.path / run).sweep_report == "");
    CHECK(slurp(write_run_report(dir.path / run)).find("sweep-link") == std::string::npos);
  }
}

TEST_CASE("train: line chart groups each series and its legend entry by index") {
  std::vector<svg::Series> series(2);
  series[0].name = "L0 H0";
  series[0].x = series[1].x = {0, 1, 2};
  series[0].y = {0.1, 0.5, 0.9};
  series[1].name = "L0 H1";
  series[1].y = {0.3, 0.2, 0.1};
  svg::LineChartOptions o;
  o.title = "mass";
  const std::string s = svg::line_chart(series, o);
  for (const char* k : {"0", "1"}) {
    const size_t line = s.find(std::string("<g class=\"series\" data-series=\"") + k + "\">");
    const size_t entry =
        s.find(std::string("<g class=\"legend-entry\" data-series=\"") + k + "\">");
    REQUIRE(line != std::string::npos);
    REQUIRE(entry != std::string::npos);
    CHECK(s.find("<polyline", line) < entry);  // the line inside its group, before its entry
    CHECK(s.find(std::string("L0 H") + k, entry) < s.find("</g>", entry));
  }
}
