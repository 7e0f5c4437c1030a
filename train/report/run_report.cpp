// The run report: RUN_DIR/report.html from the run's documents (see report.h for the sections
// and how to add one).

#include <fmt/format.h>

#include "core/error.h"
#include "core/version.h"
#include "train/io/checksum.h"
#include "train/io/files.h"
#include "train/report/sections.h"

namespace headlab {
namespace {

using namespace report_parts;
using nlohmann::json;
namespace fs = std::filesystem;

// The page, top to bottom. One row per section: id, title, body, and its script if it has one.
const SectionSpec<RunView> kRunSections[] = {
    {"summary", "Summary", summary_body},
    {"curves", "Training curves", curves_body},
    {"timeline", "Specialization over training", timeline_body, kTimelineScript},
    {"specialization", "Head x relation matrix", specialization_body},
    {"patching", "Activation patching", patching_body},
    {"best-heads", "Best head per relation against position", best_heads_body},
    {"attention", "Attention maps on the example sentences", attention_body, kAttentionScript},
    {"views", "Model view and head view", views_body, kViewsScript},
    {"ablation", "Ablation and importance", ablation_body},
    {"pruning", "Pruning curve", pruning_body},
    {"composition", "Composition across layers", composition_body, kCompositionScript},
    {"heads", "Every head in numbers", table_body},
    {"config", "Config, versions and files", files_body},
};

// The files of a run directory that the page links when present (train.log and run.json come
// from newer trainers).
constexpr const char* kLinked[] = {
    "train.log",      "run.json",   "summary.json",  "config.resolved.toml", "metrics.jsonl",
    "timeline.jsonl", "heads.json", "attention.npy", "attention_tokens.json"};

// "../report.html" (or further up for an analysis directory's page) when run_dir is one of a
// sweep's runs, read from the parent's marker (train/run/run_dir.h) without taking its lock;
// "" otherwise. The sweep's report may not exist yet while the sweep runs: it is written last.
std::string sweep_report_of(const fs::path& run_dir, const fs::path& page_dir) {
  fs::path run = fs::absolute(run_dir).lexically_normal();
  if (run.filename().empty()) run = run.parent_path();
  const fs::path sweep = run.parent_path();
  json marker;
  try {  // the parent's marker is not the run's file: an unreadable one only means no link
    marker = read_json_file_if_present(sweep / ".headlab").value_or(nullptr);
  } catch (const std::exception&) {
    return "";
  }
  if (!marker.is_object() || marker.value("headlab", std::string()) != "sweep") return "";
  return (sweep / "report.html")
      .lexically_relative(fs::absolute(page_dir).lexically_normal())
      .generic_string();
}

// The run's own files, or null / "" where a file is absent (its section then says so).
json optional_json(const fs::path& path) {
  return read_json_file_if_present(path).value_or(nullptr);
}

std::string optional_text(const fs::path& path) {
  return fs::exists(fs::symlink_status(path)) ? read_file(path, kMaxJsonFileBytes) : "";
}

std::string header(const RunFiles& f, const Heads& h) {
  const std::string verdict = specialization_verdict(f.heads);
  size_t claimed = 0;
  for (char c : h.claimed) claimed += c ? 1 : 0;
  const bool all = !h.relations.empty() && claimed == h.relations.size();
  const std::string task = h.task.empty() ? "task" : svg::escape(h.task) + " task";
  return "<header class=\"top\"><h1>headlab run: " + svg::escape(f.name) + "</h1>" +
         "<p>Do the attention heads specialize? One relation per head, measured against the gold "
         "partners of the " +
         task + "'s relations.</p>" +
         (verdict.empty() ? ""
                          : fmt::format("<p class=\"verdict{}\" id=\"verdict\">{}</p>",
                                        all ? " good" : "", svg::escape(verdict))) +
         (f.sweep_report.empty()
              ? ""
              : "<p class=\"up\"><a id=\"sweep-link\" href=\"" + href(f.sweep_report) +
                    "\">\u2190 the sweep's report</a>: this run is one of its runs.</p>") +
         "</header>\n";
}

// "step 6, analysis 1a2b3c4d5e6f7a8b" from a document's "analysis" record; "" when absent.
std::string set_of(const json& doc) {
  if (!doc.is_object() || !doc.contains("analysis")) return "";
  const json& a = doc["analysis"];
  if (!a.is_object() || !a.contains("id") || !a["id"].is_string() || !a.contains("step") ||
      !a["step"].is_number_integer())
    return "(a malformed \"analysis\" record)";
  return fmt::format("step {}, analysis {}", a["step"].get<int64_t>(),
                     a["id"].get<std::string>().substr(0, 40));
}

// heads.json, attention_tokens.json and attention.npy in `dir` must be one analysis' files
// (train/analysis/analysis.h): heads.json records the other two. Throws naming the files and
// their steps and ids. A heads.json without the record (an older headlab's) is taken as it is,
// unless a file beside it carries one.
void check_analysis_set(const fs::path& dir, const RunFiles& f) {
  if (f.heads.is_null()) return;
  const std::string heads_set = set_of(f.heads), tokens_set = set_of(f.tokens);
  const std::string redo = "run `headlab analyze` to redo them as one set";
  if (heads_set.empty()) {
    if (!tokens_set.empty())
      fail(
          "report: the analysis files in '{}' are of two analyses: heads.json is of an older "
          "headlab (no analysis record), attention_tokens.json of {}; {}",
          dir.string(), tokens_set, redo);
    return;
  }
  const json& record = f.heads["analysis"];
  const auto recorded = [&](const char* name) -> std::string {
    if (!record.contains("files") || !record["files"].is_object() ||
        !record["files"].contains(name) || !record["files"][name].is_string())
      fail("report: '{}' ({}) records no digest of {}; {}", (dir / "heads.json").string(),
           heads_set, name, redo);
    return record["files"][name].get<std::string>();
  };
  if (f.tokens.is_null() || f.attention.shape.empty())
    fail("report: '{}' ({}) belongs with {}, which is missing; {}", (dir / "heads.json").string(),
         heads_set, f.tokens.is_null() ? "attention_tokens.json" : "attention.npy", redo);
  if (tokens_set != heads_set)
    fail(
        "report: the analysis files in '{}' are of two analyses: heads.json is of {}, "
        "attention_tokens.json of {}; {}",
        dir.string(), heads_set, tokens_set.empty() ? "no analysis (an older headlab)" : tokens_set,
        redo);
  const std::string tokens_digest =
      checksum_hex(read_file(dir / "attention_tokens.json", kMaxJsonFileBytes));
  if (tokens_digest != recorded("attention_tokens.json"))
    fail(
        "report: the analysis files in '{}' are of two analyses: attention_tokens.json is not "
        "the one heads.json ({}) was written with (xxh3_64 {} recorded, {} found); {}",
        dir.string(), heads_set, recorded("attention_tokens.json").substr(0, 40), tokens_digest,
        redo);
  const std::string attention_digest = npy_digest(f.attention);
  if (attention_digest != recorded("attention.npy"))
    fail(
        "report: the analysis files in '{}' are of two analyses: attention.npy is not the one "
        "heads.json and attention_tokens.json ({}) were written with (xxh3_64 {} recorded, {} "
        "found); {}",
        dir.string(), heads_set, recorded("attention.npy").substr(0, 40), attention_digest, redo);
}

}  // namespace

std::string mass_matrix_svg(const json& heads, const std::string& title, int cell) {
  const Heads h = parse_heads(heads);
  if (h.per_head.empty()) return "";
  return matrix(h, "mass", title, true, cell);
}

RunFiles load_run_files(const fs::path& run_dir, const fs::path& analysis_dir) {
  if (!fs::is_directory(run_dir)) fail("report: '{}' is not a run directory", run_dir.string());
  const fs::path& a = analysis_dir.empty() ? run_dir : analysis_dir;
  if (!fs::is_directory(a)) fail("report: '{}' is not an analysis directory", a.string());
  RunFiles f;
  f.name = fs::absolute(run_dir).lexically_normal().filename().string();
  if (f.name.empty())
    f.name = fs::absolute(run_dir).lexically_normal().parent_path().filename().string();
  if (!analysis_dir.empty()) f.name += " (" + analysis_dir.filename().string() + ")";
  f.heads = optional_json(a / "heads.json");
  f.tokens = optional_json(a / "attention_tokens.json");
  if (fs::exists(a / "attention.npy")) f.attention = read_npy((a / "attention.npy").string());
  f.metrics = read_jsonl(run_dir / "metrics.jsonl");
  f.timeline = read_jsonl(run_dir / "timeline.jsonl");
  f.summary = optional_json(run_dir / "summary.json");
  f.run = optional_json(run_dir / "run.json");
  f.config_toml = optional_text(run_dir / "config.resolved.toml");
  for (const char* name : kLinked)
    if (fs::is_regular_file(run_dir / name)) f.links.push_back(name);
  f.sweep_report = sweep_report_of(run_dir, a);
  check_analysis_set(a, f);
  return f;
}

// The analysis set the page shows, for the footer (and whoever compares the page with the files).
std::string analysis_note(const json& heads) {
  const std::string set = set_of(heads);
  return set.empty() ? "" : " Analysis files: " + svg::escape(set) + ".";
}

std::string render_run_report(const RunFiles& f) {
  const Heads h = parse_heads(f.heads);
  const RunView view{f, h, read_curves(f.metrics, h.relations)};
  std::string scripts;
  const std::string body = header(f, h) + render_sections<RunView>(kRunSections, view, scripts) +
                           "<footer>Written by headlab " HEADLAB_VERSION
                           ". One self-contained file: no requests, no server." +
                           analysis_note(f.heads) + "</footer>";
  return html_page("headlab run: " + f.name, body, scripts);
}

fs::path write_run_report(const fs::path& run_dir, const fs::path& analysis_dir) {
  std::string html;
  try {
    html = render_run_report(load_run_files(run_dir, analysis_dir));
  } catch (const json::exception& e) {  // a hand-edited heads.json or attention_tokens.json
    fail("report: the analysis files in '{}' are not as headlab writes them: {}", run_dir.string(),
         e.what());
  }
  const fs::path path = (analysis_dir.empty() ? run_dir : analysis_dir) / "report.html";
  write_file_atomic(path, html);
  return path;
}

}  // namespace headlab
