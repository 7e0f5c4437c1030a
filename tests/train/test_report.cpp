// The .npy writer (checked with numpy), heads.json's shape, the SVG helpers, the run report
// built from a hand-made run directory (well-formed, self-contained, deterministic, with every
// section and the numbers it was given), the verdict, and the sweep report's text and links.
// The pages' scripts are tested in a browser by tests/train/report_browser.py.

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/train/analysis_test_util.h"
#include "train/analysis/analysis.h"
#include "train/io/npy.h"
#include "train/report/report.h"
#include "train/report/svg/svg.h"

using namespace headlab;
using namespace headlab::analysis_test;
using nlohmann::json;

namespace {

// One layer, three heads: head 0 on PREV (0.97), head 1 on HEAD (0.81), head 2 on SEM (0.66)
// with HEAD as its runner-up. Two example sentences of T = 5.
AnalysisResult hand_result() {
  AnalysisResult r;
  r.relations = {"PREV", "HEAD", "SEM"};
  r.layers = 1;
  r.heads = 3;
  const double mass[3][3] = {{0.97, 0.02, 0.01}, {0.05, 0.81, 0.10}, {0.04, 0.29, 0.66}};
  r.metrics = HeadMetrics{};
  r.metrics.layers = 1;
  r.metrics.heads = 3;
  r.metrics.relations = 3;
  r.metrics.mass = HeadRelationMatrix(1, 3, 3);
  for (int h = 0; h < 3; ++h) {
    HeadAnalysis a;
    a.layer = 0;
    a.head = h;
    for (int k = 0; k < 3; ++k) {
      a.mass.push_back(mass[h][k]);
      a.mass_distinct.push_back(mass[h][k] * 0.9);
      a.argmax_accuracy.push_back(mass[h][k]);
      r.metrics.mass.at(0, h, k) = mass[h][k];
    }
    a.entropy = 0.1 * (h + 1);
    a.confidence = 0.9 - 0.1 * h;
    a.ablation_accuracy = 0.25 + 0.3 * h;
    a.keep_only_accuracy = 0.2;
    a.ablation_component = {0.5, 0.9, 0.9};
    a.keep_only_component = {0.3, 0.3, 0.3};
    a.mean_ablation_accuracy = 0.3 + 0.3 * h;
    a.mean_ablation_component = {0.6, 0.9, 0.9};
    a.importance = h == 0 ? 0.9 : 0.3;
    a.importance_raw = a.importance / 10;
    r.per_head.push_back(a);
  }
  r.specialization = specialization(r.metrics.mass);
  r.eval = LabelAccuracy{0.987, {0.99, 0.995, 0.992}, 1000};
  r.eval_loss = 0.05;
  r.groups = relation_groups(r.metrics.mass);
  for (int g = 0; g < 3; ++g) r.group_ablated.push_back(LabelAccuracy{0.5, {0.9, 0.9, 0.9}, 1000});
  r.group_drops = group_ablation_drops(r.eval, r.group_ablated);
  r.batches = 2;
  r.batch_size = 16;
  r.seed = 7;

  AttentionExamples& ex = r.examples;
  ex.examples = 2;
  ex.layers = 1;
  ex.heads = 3;
  ex.seq_len = 5;
  for (int64_t e = 0; e < 2; ++e) {
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 5; ++j)
          ex.weights.push_back(j == (i + h) % 5 ? 0.6f : 0.1f);  // rows sum to 1
    ex.tokens.push_back({"BOS", "VERB:1", "SUBJ:2", "OBJ:0", "ADV:3"});
    ex.partners.push_back({{-1, 0, 1, 2, 3}, {-1, 0, 1, 1, 1}, {-1, 4, 3, 2, 1}});
    ex.labels.push_back({-100, 1, 2, 3, 4});
    ex.predicted.push_back({0, 1, 2, 3, 5});
  }
  return r;
}

// A run directory as `headlab train` + analysis leave it, with trainer-format metrics rows.
void write_run(const fs::path& dir, const AnalysisResult& r) {
  write_analysis(dir, r);
  std::ofstream m(dir / "metrics.jsonl");
  for (int step = 10; step <= 100; step += 10) {
    m << json{{"step", step},
              {"loss", 4.0 / step},
              {"accuracy", step / 100.0},
              {"lr", 1e-3},
              {"grad_norm", 0.5},
              {"tokens_per_second", 1e5},
              {"elapsed_seconds", step * 0.01}}
             .dump()
      << "\n";
    if (step % 50 == 0) {
      m << json{{"step", step},
                {"eval", true},
                {"loss", 2.0 / step},
                {"accuracy", step == 100 ? 0.987 : 0.6},
                {"component_accuracy", {{"PREV", 0.7}, {"HEAD", 0.8}, {"SEM", 0.9}}},
                {"tokens", 1000}}
               .dump()
        << "\n";
    }
  }
  m << "not json\n";  // skipped, not fatal
  std::ofstream(dir / "summary.json")
      << json{{"eval_accuracy", 0.987},
              {"steps", 100},
              {"train_seconds", 12.5},
              {"versions", {{"headlab", "0.1.0"}, {"onednn", "2.6.3"}}}}
             .dump();
  std::ofstream(dir / "config.resolved.toml")
      << "[model]\nheads = 3\n\n[task]\nname = \"dependency\"\n";
}

// "" when the page fetches nothing and needs no server: scripts inline, no src/href to another
// host, no link elements, no request APIs; else what was found.
std::string self_contained(const std::string& html) {
  for (const char* bad : {"src=", "<link", "fetch(", "XMLHttpRequest", "import(", "WebSocket",
                          "EventSource", "sendBeacon", "@import", "url("})
    if (html.find(bad) != std::string::npos) return bad;
  const std::string code = "<script>", data = "<script type=\"application/json\" id=";
  for (size_t p = 0; (p = html.find("<script", p)) != std::string::npos; ++p)
    if (html.compare(p, code.size(), code) != 0 && html.compare(p, data.size(), data) != 0)
      return html.substr(p, 40);
  std::string without_ns = html;  // the SVG namespace URI is a name, not a fetch
  for (size_t p; (p = without_ns.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    without_ns.erase(p, 26);
  return without_ns.find("http") == std::string::npos ? "" : "http";
}

// The JSON in <script type="application/json" id="id">.
json embedded_json(const std::string& html, const std::string& id) {
  const std::string open = "<script type=\"application/json\" id=\"" + id + "\">";
  const size_t a = html.find(open);
  REQUIRE(a != std::string::npos);
  const size_t b = html.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return json::parse(html.substr(a + open.size(), b - a - open.size()));
}

}  // namespace

TEST_CASE("train: npy files are standard .npy v1.0 float32 (byte layout and round trip)") {
  TempDir dir("headlab-npy");
  NpyArray a{{2, 3, 4}, {}};
  for (int i = 0; i < 24; ++i) a.data.push_back(0.5f * i - 3.0f);
  const fs::path file = dir.path / "a.npy";
  write_npy(file.string(), a);
  const std::string bytes = slurp(file);
  REQUIRE(bytes.size() > 10);
  CHECK(bytes.compare(0, 6, "\x93NUMPY") == 0);
  CHECK(bytes[6] == 1);
  CHECK(bytes[7] == 0);
  const size_t header_len =
      static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
  CHECK((10 + header_len) % 64 == 0);
  const std::string header = bytes.substr(10, header_len);
  CHECK(header.find("'descr': '<f4'") != std::string::npos);
  CHECK(header.find("'shape': (2, 3, 4)") != std::string::npos);
  CHECK(header.back() == '\n');
  CHECK(bytes.size() == 10 + header_len + 24 * 4);

  const NpyArray b = read_npy(file.string());
  CHECK(b.shape == a.shape);
  CHECK(b.data == a.data);

  NpyArray one{{3}, {1, 2, 3}};
  write_npy((dir.path / "one.npy").string(), one);
  CHECK(slurp(dir.path / "one.npy").find("'shape': (3,)") != std::string::npos);
  CHECK_THROWS_AS(write_npy((dir.path / "bad.npy").string(), NpyArray{{2, 2}, {1, 2, 3}}), Error);
  std::ofstream(dir.path / "junk.npy") << "hello";
  CHECK_THROWS_WITH_AS(read_npy((dir.path / "junk.npy").string()), doctest::Contains("not a .npy"),
                       Error);
}

TEST_CASE("train: read_npy refuses damaged files with one error naming the file") {
  TempDir dir("headlab-npy");
  // A v1.0 file: magic, version, header length, the header text, then `data_bytes` bytes.
  const auto npy = [&](const std::string& name, const std::string& header, size_t data_bytes,
                       int header_len_delta = 0) {
    std::string bytes = "\x93NUMPY";
    bytes += '\x01';
    bytes += '\x00';
    const size_t len = header.size() + static_cast<size_t>(header_len_delta);
    bytes += static_cast<char>(len & 0xff);
    bytes += static_cast<char>(len >> 8);
    bytes += header + std::string(data_bytes, '\0');
    const fs::path path = dir.path / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  };
  const auto header = [](const std::string& shape) {
    return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
  };
  CHECK(read_npy(npy("ok.npy", header("(2, 3)"), 24)).shape == std::vector<int64_t>{2, 3});
  CHECK(read_npy(npy("empty.npy", header("(0, 3)"), 0)).shape == std::vector<int64_t>{0, 3});
  const std::pair<std::string, std::string> cases[] = {
      {npy("short.npy", header("(2, 3)"), 20), "holds 20 bytes of data but its shape needs 6 x 4"},
      {npy("long.npy", header("(2, 3)"), 28), "holds 28 bytes of data but its shape needs 6 x 4"},
      {npy("huge_dim.npy", header("(99999999999999999999999, 1)"), 24), "out of range"},
      {npy("overflow.npy", header("(4294967296, 4294967296, 4294967296)"), 24),
       "needs more than 2^63 values"},
      {npy("product.npy", header("(5, 5)"), 24), "needs 25 x 4 bytes"},
      {npy("negative.npy", header("(-2, 3)"), 24), "malformed shape"},
      {npy("float.npy", header("(2.5, 3)"), 24), "malformed shape"},
      {npy("no_shape.npy", "{'descr': '<f4', 'fortran_order': False, }\n", 24), "no shape"},
      {npy("header_beyond.npy", header("(2, 3)"), 0, 1000), "ends inside its header"},
      {npy("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }\n", 24),
       "does not hold little-endian float32"},
      {npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", 24),
       "not in C order"},
  };
  for (const auto& [path, fragment] : cases) {
    CAPTURE(path);
    CHECK_THROWS_WITH_AS(read_npy(path), doctest::Contains(fragment.c_str()), Error);
  }
  CHECK_THROWS_WITH_AS(read_npy((dir.path / "missing.npy").string()),
                       doctest::Contains("missing.npy"), Error);
}

TEST_CASE("train: numpy loads attention.npy with the shape and values analysis wrote") {
  if (!python_numpy_available()) {
    MESSAGE("skipped: /usr/bin/python3 with numpy is not available");
    return;
  }
  TempDir dir("headlab-npy-numpy");
  const AnalysisResult r = hand_result();
  write_analysis(dir.path, r);
  const std::string script =
      "import numpy as np, json; a = np.load('" + (dir.path / "attention.npy").string() +
      "'); print(a.dtype.str, a.shape, '%.3f' % a.sum(), '%.6f' % a[1, 0, 2, 3, 0], "
      "'%.6f' % np.abs(a.sum(-1) - 1).max())";
  const CommandResult out = run_command("/usr/bin/python3 -c \"" + script + "\"");
  REQUIRE(out.code == 0);
  double sum = 0;
  for (float v : r.examples.weights) sum += v;
  const float at = r.examples.weights[((1 * 1 + 0) * 3 + 2) * 25 + 3 * 5 + 0];
  CHECK(out.output == fmt::format("<f4 (2, 1, 3, 5, 5) {:.3f} {:.6f} 0.000000\n", sum, at));

  const json tokens = json::parse(slurp(dir.path / "attention_tokens.json"));
  CHECK(tokens["shape"] == json::array({2, 1, 3, 5, 5}));
  CHECK(tokens["examples"][0]["tokens"][1] == "VERB:1");
  CHECK(tokens["examples"][1]["partners"]["SEM"] == json::array({-1, 4, 3, 2, 1}));
}

TEST_CASE("train: heads.json has the issue's shape") {
  const AnalysisResult r = hand_result();
  const json j = analysis_to_json(r);
  CHECK(j["relations"] == json::array({"PREV", "HEAD", "SEM"}));
  REQUIRE(j["layers"].size() == 1);
  CHECK(j["layers"][0]["layer"] == 0);
  REQUIRE(j["layers"][0]["heads"].size() == 3);
  const json& h2 = j["layers"][0]["heads"][2];
  CHECK(h2["head"] == 2);
  CHECK(h2["mass"]["SEM"].get<double>() == doctest::Approx(0.66));
  CHECK(h2["argmax_accuracy"]["HEAD"].get<double>() == doctest::Approx(0.29));
  for (const char* key :
       {"entropy", "confidence", "ablation_accuracy", "keep_only_accuracy", "importance"})
    CHECK(h2[key].is_number());
  const json& s = j["specialization"];
  CHECK(s["n_claimed"] == 3);
  CHECK(s["s_match"].get<double>() == doctest::Approx((0.97 + 0.81 + 0.66) / 3));
  CHECK(s["s_max"].get<double>() == doctest::Approx((0.97 + 0.81 + 0.66) / 3));
  CHECK(s["assignment"]["PREV"] == json::array({0, 0}));
  CHECK(s["assignment"]["HEAD"] == json::array({0, 1}));
  CHECK(s["assignment"]["SEM"] == json::array({0, 2}));
  CHECK(j["eval_accuracy"].get<double>() == doctest::Approx(0.987));
  CHECK(j["group_ablation_drop"]["PREV"]["PREV"].get<double>() == doctest::Approx(0.99 - 0.9));
}

TEST_CASE("train: svg helpers escape text and pick round ticks") {
  CHECK(svg::escape("a<b & \"c\"") == "a&lt;b &amp; &quot;c&quot;");
  const std::vector<double> unit = svg::nice_ticks(0, 1, 5);
  REQUIRE(unit.size() == 6);
  for (int i = 0; i < 6; ++i) CHECK(unit[i] == doctest::Approx(0.2 * i));
  const std::vector<double> t = svg::nice_ticks(3, 997, 5);
  REQUIRE(!t.empty());
  CHECK(t.front() >= 3);
  CHECK(t.back() <= 997);
  CHECK(t[1] - t[0] == doctest::Approx(200));
  CHECK(svg::sequential(0) != svg::sequential(1));
  const std::vector<double> v = {0.1, 0.9, 0.5, 0.3};
  svg::HeatmapOptions o;
  o.row_labels = {"r<0>", "r1"};
  o.col_labels = {"a", "b"};
  const std::string h = svg::heatmap(2, 2, v, o);
  CHECK(check_tags(h) == "");
  CHECK(h.find("r&lt;0&gt;") != std::string::npos);
  CHECK(h.find(">0.90<") != std::string::npos);
}

TEST_CASE("train: read_curves splits training and evaluation rows of metrics.jsonl") {
  TempDir dir("headlab-curves");
  write_run(dir.path, hand_result());
  const Curves c = read_curves(read_jsonl(dir.path / "metrics.jsonl"), {"PREV", "HEAD", "SEM"});
  CHECK(c.step.size() == 10);
  CHECK(c.eval_step == std::vector<double>{50, 100});
  CHECK(c.eval_accuracy[1] == doctest::Approx(0.987));
  CHECK(c.eval_component[2][0] == doctest::Approx(0.9));
  CHECK(c.loss[0] == doctest::Approx(0.4));
  CHECK(steps_to(c, 0.95) == 100);
  CHECK(steps_to(c, 0.99) == -1);
}

TEST_CASE("train: the run report is one well-formed, self-contained page with every section") {
  TempDir dir("headlab-report");
  write_run(dir.path, hand_result());
  const fs::path path = write_run_report(dir.path);
  CHECK(path == dir.path / "report.html");
  const std::string html = slurp(path);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(check_tags(html) == "");
  CHECK(self_contained(html) == "");
  // Rendering the same documents again gives the same bytes.
  CHECK(render_run_report(load_run_files(dir.path)) == html);
  CHECK(html.find("<p class=\"verdict good\" id=\"verdict\">3 of 3 relations have their own "
                  "head: PREV L0H0 0.97, HEAD L0H1 0.81, SEM L0H2 0.66.</p>") != std::string::npos);
  for (const char* id : {"summary", "curves", "specialization", "attention", "ablation", "heads"})
    CHECK(html.find(fmt::format("<a href=\"#{}\">", id)) != std::string::npos);

  const std::string summary = section(html, "summary");
  CHECK(summary.find("0.987") != std::string::npos);  // eval accuracy
  CHECK(summary.find(fmt::format("{:.2f}", (0.97 + 0.81 + 0.66) / 3)) != std::string::npos);
  CHECK(summary.find("3 / 3") != std::string::npos);
  CHECK(summary.find("12.5 s") != std::string::npos);

  const std::string curves = section(html, "curves");
  CHECK(curves.find("<polyline") != std::string::npos);
  CHECK(curves.find("eval SEM component") != std::string::npos);

  // The head x relation matrix: numbers, and the assigned relation named on each head.
  const std::string spec = section(html, "specialization");
  CHECK(spec.find(">0.97<") != std::string::npos);
  CHECK(spec.find(">0.66<") != std::string::npos);
  for (const char* name : {"\u2192 PREV", "\u2192 HEAD", "\u2192 SEM"})
    CHECK(spec.find(name) != std::string::npos);

  // The attention explorer: the first sentence's first head drawn, a menu of every sentence and
  // head, and the maps of both sentences embedded once for the script.
  const std::string att = section(html, "attention");
  CHECK(att.find("L0 H0 \u2192 PREV 0.97") != std::string::npos);
  CHECK(att.find("SUBJ:2") != std::string::npos);
  CHECK(att.find("fill=\"none\" stroke=\"#a84f86\"") != std::string::npos);  // a SEM partner mark
  // Head 0 puts 0.6 on key (i + 0) % 5: query 2 SUBJ:2 on itself, the gold PREV partner of 3.
  CHECK(att.find("<title>query 2 SUBJ:2 \u2192 key 2 SUBJ:2: 0.600</title>") != std::string::npos);
  CHECK(att.find("<title>query 3 OBJ:0 \u2192 key 2 SUBJ:2: 0.100 (gold PREV, SEM)</title>") !=
        std::string::npos);
  CHECK(
      att.find("<option value=\"1\">2: VERB:1 SUBJ:2 OBJ:0 ADV:3 (3 of 4 labels right)</option>") !=
      std::string::npos);
  for (const char* head : {"L0 H0 \u2192 PREV", "L0 H1 \u2192 HEAD", "L0 H2 \u2192 SEM"})
    CHECK(att.find(fmt::format("\">{} ", head)) != std::string::npos);  // an <option>
  const json data = embedded_json(att, "att-data");
  CHECK(data["T"] == 5);
  CHECK(data["H"] == 3);
  REQUIRE(data["w"].size() == 2);
  const AnalysisResult r = hand_result();
  for (size_t i = 0; i < r.examples.weights.size(); ++i) {
    CAPTURE(i);
    CHECK(data["w"][i / 75][i % 75].get<int>() == std::lround(r.examples.weights[i] * 1000));
  }
  CHECK(data["examples"][1]["partners"][2] == json::array({-1, 4, 3, 2, 1}));
  CHECK(data["heads"][2]["caption"] == "L0 H2 \u2192 SEM 0.66");

  const std::string abl = section(html, "ablation");
  CHECK(abl.find("0.85") != std::string::npos);  // head 2's ablation accuracy 0.25 + 0.6
  CHECK(abl.find("Importance") != std::string::npos);
  CHECK(abl.find("Relation-group ablation") != std::string::npos);

  CHECK(section(html, "heads").find("<table>") != std::string::npos);
  const std::string config = section(html, "config");
  CHECK(config.find("name = &quot;dependency&quot;") != std::string::npos);
  CHECK(config.find("2.6.3") != std::string::npos);
  CHECK(config.find("<a href=\"heads.json\">heads.json</a>") != std::string::npos);
  CHECK(config.find("train.log") == std::string::npos);  // not in this run directory
}

TEST_CASE("train: the run report notes missing files instead of failing") {
  TempDir dir("headlab-report-empty");
  const std::string html = slurp(write_run_report(dir.path));
  CHECK(check_tags(html) == "");
  CHECK(section(html, "curves").find("not found") != std::string::npos);
  CHECK(section(html, "attention").find("not found") != std::string::npos);
  CHECK_THROWS_AS(write_run_report(dir.path / "nope"), Error);
}

TEST_CASE("train: the attention explorer draws edited attention files without heads.json") {
  TempDir dir("headlab-report-edited");
  write_analysis(dir.path, hand_result());
  fs::remove(dir.path / "heads.json");
  json tokens = json::parse(slurp(dir.path / "attention_tokens.json"));
  tokens["examples"][0]["tokens"] = json::array({"BOS", "only two"});  // not T = 5 tokens
  tokens["examples"][1]["partners"] = {{"PREV", {99, -5, 2}}};         // out of range, too short
  std::ofstream(dir.path / "attention_tokens.json") << tokens.dump();
  const std::string html = slurp(write_run_report(dir.path));
  CHECK(check_tags(html) == "");
  const std::string att = section(html, "attention");
  CHECK(att.find("<title>query 0 ? \u2192 key 0 ?: 0.600</title>") != std::string::npos);
  const json data = embedded_json(att, "att-data");
  CHECK(data["examples"].size() == 2);
  CHECK(data["relations"].empty());  // the relations come from heads.json
  CHECK(data["heads"][1]["caption"] == "L0 H1");
  CHECK(html.find("id=\"verdict\"") == std::string::npos);
}

namespace {

// A heads.json with one layer of len(mass) heads over PREV, HEAD, SEM, written by hand: each
// head's mass row and the assignment relation -> head.
json hand_heads(const std::vector<std::array<double, 3>>& mass, const std::vector<int>& assigned) {
  const std::vector<std::string> rel = {"PREV", "HEAD", "SEM"};
  json heads = json::array(), assignment = json::object();
  for (size_t k = 0; k < mass.size(); ++k) {
    json m = json::object();
    for (int r = 0; r < 3; ++r) m[rel[r]] = mass[k][r];
    heads.push_back({{"head", k}, {"mass", m}, {"ablation_accuracy", 0.5}, {"importance", 0.2}});
  }
  for (int r = 0; r < 3; ++r)
    assignment[rel[r]] = assigned[r] < 0 ? json(nullptr) : json::array({0, assigned[r]});
  return {
      {"relations", rel},
      {"layers", json::array({{{"layer", 0}, {"heads", heads}}})},
      {"eval_accuracy", 0.9},
      {"specialization",
       {{"assignment", assignment}, {"claim_threshold", 0.5}, {"s_match", 0.6}, {"n_claimed", 2}}}};
}

}  // namespace

TEST_CASE("train: the verdict names each relation's head and tells claimed from unclaimed") {
  const json three =
      hand_heads({{0.92, 0.02, 0.01}, {0.05, 0.81, 0.10}, {0.04, 0.29, 0.66}}, {0, 1, 2});
  CHECK(specialization_verdict(three) ==
        "3 of 3 relations have their own head: PREV L0H0 0.92, HEAD L0H1 0.81, SEM L0H2 0.66.");
  // SEM's head puts 0.11 on its partner: assigned (nothing better is left) but not claimed.
  const json two =
      hand_heads({{0.92, 0.02, 0.01}, {0.05, 0.81, 0.10}, {0.40, 0.29, 0.11}}, {0, 1, 2});
  CHECK(specialization_verdict(two) ==
        "2 of 3 relations have their own head: PREV L0H0 0.92, HEAD L0H1 0.81; unclaimed "
        "(mass <= 0.5): SEM L0H2 0.11.");
  // The threshold is the document's; exactly at it is not a claim (n_claimed counts "> t").
  json strict = two;
  strict["specialization"]["claim_threshold"] = 0.81;
  CHECK(specialization_verdict(strict) ==
        "1 of 3 relations has its own head: PREV L0H0 0.92; unclaimed (mass <= 0.81): HEAD L0H1 "
        "0.81, SEM L0H2 0.11.");
  const json one = hand_heads({{0.30, 0.72, 0.20}}, {-1, 0, -1});
  CHECK(specialization_verdict(one) ==
        "1 of 3 relations has its own head: HEAD L0H0 0.72; no head: PREV, SEM.");
  CHECK(specialization_verdict(json(nullptr)) == "");
}

TEST_CASE("train: the run report draws an unclaimed assignment grey and dashed, never as a claim") {
  TempDir dir("headlab-report-unclaimed");
  std::ofstream(dir.path / "heads.json")
      << hand_heads({{0.92, 0.02, 0.01}, {0.05, 0.81, 0.10}, {0.40, 0.29, 0.11}}, {0, 1, 2}).dump();
  const std::string html = slurp(write_run_report(dir.path));
  CHECK(check_tags(html) == "");
  CHECK(html.find("<p class=\"verdict\" id=\"verdict\">2 of 3 relations") != std::string::npos);
  const std::string spec = section(html, "specialization");
  CHECK(spec.find("\u2192 SEM (unclaimed)</text>") != std::string::npos);
  CHECK(spec.find("fill=\"#6b7280\">\u2192 SEM") != std::string::npos);  // grey, not SEM purple
  CHECK(spec.find("fill=\"#0072b2\">\u2192 HEAD</text>") != std::string::npos);
  CHECK(spec.find("stroke=\"#6b7280\" stroke-width=\"1.8\" stroke-dasharray") != std::string::npos);
  CHECK(spec.find("stroke=\"#b34e00\" stroke-width=\"1.8\"/>") != std::string::npos);  // PREV solid
  // The summary's SEM tag is outlined; the ablation bar of L0 H2 is grey.
  const std::string summary = section(html, "summary");
  CHECK(summary.find("tag open\" style=\"border-color:#a84f86;color:#a84f86\">SEM") !=
        std::string::npos);
  CHECK(summary.find("unclaimed: not above 0.5") != std::string::npos);
  CHECK(section(html, "ablation").find("fill=\"#a84f86\"") == std::string::npos);
  CHECK(section(html, "ablation").find("SEM unclaimed") != std::string::npos);
}

namespace {

// A sweep.json as `headlab sweep` writes it, over `key` with `values` x `seeds` seeds.
json hand_sweep(const std::string& key, const std::vector<json>& values, int seeds,
                const std::vector<int>& d_k) {
  json runs = json::array();
  for (size_t v = 0; v < values.size(); ++v)
    for (int s = 0; s < seeds; ++s)
      runs.push_back({{"values", {{key, values[v]}}},
                      {"seed", 1 + s},
                      {"dir", fmt::format("run {}#{}", v, s)},
                      {"ok", true},
                      {"eval_accuracy", 0.5 + 0.1 * v + 0.01 * s},
                      {"s_match", 0.4 + 0.1 * v},
                      {"s_max", 0.5},
                      {"n_claimed", static_cast<int>(v + 1)},
                      {"steps_to_95", nullptr},
                      {"train_seconds", 1.5},
                      {"d_k", d_k[v]}});
  return {{"config", "tiny.toml"}, {"over", {key}}, {"seeds", seeds}, {"runs", runs}};
}

}  // namespace

TEST_CASE("train: the sweep report says what its grid is, singular and plural right") {
  CHECK(sweep_description(hand_sweep("model.heads", {1, 2}, 1, {64, 32})) ==
        "2 runs of tiny.toml: 2 settings of model.heads (1, 2) \u00d7 1 seed each (train.seed 1). "
        "Same d_model in every run, so more heads means narrower heads (d_k 64 down to 32).");
  // Not over heads: nothing about narrower heads; strings bare.
  const json act = hand_sweep("model.activation", {"relu", "gelu"}, 2, {16, 16});
  CHECK(sweep_description(act) ==
        "4 runs of tiny.toml: 2 settings of model.activation (relu, gelu) \u00d7 2 seeds each "
        "(train.seed 1, 2). Every run has d_k = 16.");
  // Over heads with a fixed head width: d_k does not change, so no "narrower".
  CHECK(sweep_description(hand_sweep("model.heads", {2, 4}, 3, {16, 16})).find("narrower") ==
        std::string::npos);
  json one = hand_sweep("train.lr", {0.001}, 1, {16});
  one["runs"][0]["ok"] = false;
  CHECK(sweep_description(one) ==
        "1 run of tiny.toml: 1 setting of train.lr (0.001) \u00d7 1 seed each (train.seed 1). 1 "
        "run failed (sweep.json says why). Every run has d_k = 16.");
  json two_keys = hand_sweep("model.heads", {1, 2}, 1, {64, 32});
  two_keys["over"] = {"model.heads", "train.lr"};
  two_keys["runs"][0]["values"]["train.lr"] = 0.01;
  two_keys["runs"][1]["values"]["train.lr"] = 0.01;
  CHECK(sweep_description(two_keys).find("2 settings: model.heads (1, 2) \u00d7 train.lr (0.01) "
                                         "\u00d7 1 seed each") != std::string::npos);
}

TEST_CASE("train: the sweep report draws every seed and links each to its run's report") {
  const json sweep = hand_sweep("model.heads", {1, 2}, 2, {64, 32});
  std::vector<SweepRunData> data(4);
  for (int i = 0; i < 3; ++i) data[i].has_report = true;  // the last run left no report
  const std::string html = render_sweep_report(sweep, data);
  CHECK(check_tags(html) == "");
  CHECK(self_contained(html) == "");
  CHECK(render_sweep_report(sweep, data) == html);
  CHECK(html.find("2 seeds each (train.seed 1, 2)") != std::string::npos);
  const std::string seeds = section(html, "seeds");
  // Three dots link (the directory name percent-encoded), the fourth is drawn without a link.
  for (const char* link :
       {"run%200%230/report.html", "run%200%231/report.html", "run%201%230/report.html"})
    CHECK(seeds.find(fmt::format("<a href=\"{}\" aria-label=\"", link)) != std::string::npos);
  CHECK(seeds.find("run%201%231") == std::string::npos);
  CHECK(seeds.find("model.heads=2, seed 2: eval_accuracy 0.610") != std::string::npos);
  size_t dots = 0;
  for (size_t p = 0; (p = seeds.find("<circle", p)) != std::string::npos; ++p) ++dots;
  CHECK(dots == 3 * 4);  // accuracy, s_match and n_claimed of every run
  CHECK(seeds.find(">0.95</text>") != std::string::npos);   // the threshold, labelled
  CHECK(seeds.find(">0.505</text>") != std::string::npos);  // setting 1's mean accuracy
  const std::string table = section(html, "table");
  CHECK(table.find("<a href=\"run%200%231/report.html\">seed 2</a>") != std::string::npos);
}
