// The run report: RUN_DIR/report.html from heads.json, the attention maps, metrics.jsonl,
// summary.json and the resolved config (see report.h for the sections).

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "train/io/files.h"
#include "train/report/parts.h"
#include "train/report/report.h"
#include "train/report/sections.h"
#include "train/report/svg.h"

namespace headlab {
namespace {

using namespace report_parts;
using nlohmann::json;
namespace fs = std::filesystem;

// The run's own files, or null / "" where a file is absent (its section then says so).
json optional_json(const fs::path& path) { return read_json_file_if_present(path).value_or(nullptr); }

std::string optional_text(const fs::path& path) {
  return fs::exists(fs::symlink_status(path)) ? read_file(path, kMaxJsonFileBytes) : "";
}

std::string summary_section(const RunFiles& f, const Heads& h, const Curves& c) {
  const json spec =
      f.heads.is_object() ? f.heads.value("specialization", json::object()) : json::object();
  const double acc = num(f.heads, "eval_accuracy", num(f.summary, "eval_accuracy"));
  const int R = static_cast<int>(h.relations.size());
  const double claimed = num(spec, "n_claimed");
  std::string cards = "<div class=\"cards\">";
  cards +=
      card("eval accuracy", svg::number(acc, 3), acc >= 0.95 ? "good" : (acc < 0.8 ? "bad" : ""));
  cards += card("s_match", svg::number(num(spec, "s_match"), 2));
  cards += card("s_max", svg::number(num(spec, "s_max"), 2));
  cards += card("relations claimed", std::isnan(claimed) ? "-" : fmt::format("{} / {}", claimed, R),
                !std::isnan(claimed) && claimed == R ? "good" : "");
  cards += card("heads x layers", fmt::format("{} x {}", h.heads, h.layers));
  const double s95 = steps_to(c);
  cards += card("steps to 95%", s95 < 0 ? "never" : fmt::format("{}", s95));
  const double steps = num(f.summary, "steps");
  if (!std::isnan(steps)) cards += card("steps", fmt::format("{}", steps));
  const double secs = num(f.summary, "train_seconds");
  if (!std::isnan(secs)) cards += card("train time", fmt::format("{:.1f} s", secs));
  cards += "</div>";

  std::string lines;
  for (int r = 0; r < R; ++r) {
    int found = -1;
    for (size_t k = 0; k < h.assigned.size(); ++k)
      if (h.assigned[k] == r) found = static_cast<int>(k);
    const double mass =
        found >= 0 ? num(h.per_head[found].value("mass", json::object()), h.relations[r].c_str())
                   : 0.0;
    lines += fmt::format(
        "<li><span class=\"tag\" style=\"background:{}\">{}</span> {}</li>", h.colors[r],
        svg::escape(h.relations[r]),
        found >= 0
            ? fmt::format("head {} carries {:.0f}% of its attention to this partner{}",
                          h.label[found], 100 * mass, mass > 0.5 ? "" : " (not claimed: below 0.5)")
            : std::string("no head left for this relation"));
  }
  const std::string lede =
      "Each relation's best one-to-one head (the assignment behind s_match): how much of that "
      "head's attention, averaged over non-BOS tokens, lands on the relation's gold partner.";
  return section(
      "summary", "Summary", "",
      cards + "<p class=\"lede\" style=\"margin-top:12px\">" + lede + "</p><ul>" + lines + "</ul>");
}

std::string curves_section(const Heads& h, const Curves& c) {
  if (c.step.empty() && c.eval_step.empty())
    return section("curves", "Training curves", "",
                   "<p class=\"note\">metrics.jsonl not found or empty.</p>");
  std::vector<svg::Series> loss = {
      series("train loss", "#4e79a7", c.step, c.loss),
      series("eval loss", "#e15759", c.eval_step, c.eval_loss, false, true)};
  svg::LineChartOptions lo = chart("Loss", "step", "cross-entropy");
  lo.log_y = true;
  std::vector<svg::Series> acc = {
      series("train accuracy", "#4e79a7", c.step, c.accuracy),
      series("eval accuracy", "#1f2430", c.eval_step, c.eval_accuracy, false, true)};
  for (size_t r = 0; r < h.relations.size() && r < c.eval_component.size(); ++r) {
    bool any = false;
    for (double v : c.eval_component[r]) any = any || !std::isnan(v);
    if (any)
      acc.push_back(series("eval " + h.relations[r] + " component", h.colors[r], c.eval_step,
                           c.eval_component[r], true));
  }
  svg::LineChartOptions ao = chart("Accuracy", "step", "accuracy");
  ao.y_min = 0.0;
  ao.y_max = 1.0;
  ao.reference_y = 0.95;
  std::vector<svg::Series> lr = {series("learning rate", "#59a14f", c.step, c.lr)};
  svg::LineChartOptions ro = chart("Learning rate", "step", "lr");
  ro.y_min = 0.0;
  return section("curves", "Training curves",
                 "From metrics.jsonl. Training rows are measured on the step's batch with dropout "
                 "active; evaluation rows (dots) on the fixed evaluation sentences without. "
                 "Component accuracy is how often the predicted label gets one relation's part "
                 "right (for the dependency task, its colour digit): it shows which relation the "
                 "model learned when.",
                 "<div class=\"row\">" + figure(svg::line_chart(loss, lo)) +
                     figure(svg::line_chart(acc, ao)) + figure(svg::line_chart(lr, ro)) + "</div>");
}

std::string specialization_section(const Heads& h) {
  if (h.per_head.empty())
    return section("specialization", "Head x relation", "",
                   "<p class=\"note\">heads.json not found.</p>");
  std::string body = "<div class=\"row\">";
  body += figure(matrix(h, "mass", "Attention mass on the gold partner", true),
                 "M[l,h,r] = mean over tokens of the weight on relation r's partner. The arrow "
                 "names the relation assigned to the head (best one-to-one assignment).");
  body += figure(matrix(h, "mass_distinct", "Mass, distinct partners only", false),
                 "The same on tokens whose partners are all real words and pairwise distinct: no "
                 "floor from coinciding partners.");
  body += figure(matrix(h, "argmax_accuracy", "Argmax accuracy", false),
                 "How often the head's strongest key is the gold partner (Clark et al. 2019).");
  body += "</div>";
  return section("specialization", "Head x relation matrix",
                 "Each row is one attention head, each column one relation. A specialized head has "
                 "one dark cell.",
                 body);
}

std::string attention_section(const RunFiles& f, const Heads& h) {
  const json& tok = f.tokens;
  if (f.attention.shape.size() != 5 || !tok.is_object() || !tok.contains("examples") ||
      !tok["examples"].is_array() || tok["examples"].empty() || !tok["examples"][0].is_object())
    return section("attention", "Attention maps", "",
                   "<p class=\"note\">attention.npy or attention_tokens.json not found.</p>");
  const std::vector<int64_t>& shape = f.attention.shape;  // [examples, L, H, T, T]
  const int64_t L = shape[1], H = shape[2], T = shape[3];
  if (shape[0] < 1 || T != shape[4] || T > 1024 || L * H > 1024)  // edited or foreign files
    return section("attention", "Attention maps", "",
                   "<p class=\"note\">attention.npy does not hold [examples, layers, heads, T, T] "
                   "maps of at most 1024 tokens and 1024 heads.</p>");
  const json ex = tok["examples"][0];
  std::vector<std::string> tokens = ex.value("tokens", std::vector<std::string>{});
  if (static_cast<int64_t>(tokens.size()) != T) tokens.clear();
  std::vector<svg::CellMark> marks;
  const json partners = ex.value("partners", json::object());
  for (size_t r = 0; r < h.relations.size(); ++r) {
    const std::vector<int> p = partners.value(h.relations[r], std::vector<int>{});
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] >= 0 && p[i] < T && static_cast<int64_t>(i) < T)
        marks.push_back({static_cast<int>(i), p[i], h.colors[r], ""});
  }
  std::string body = relation_legend(h) + "<div class=\"row\">";
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t hh = 0; hh < H; ++hh) {
      std::vector<double> values(static_cast<size_t>(T * T));
      const float* src = f.attention.data.data() + (l * H + hh) * T * T;
      for (int64_t k = 0; k < T * T; ++k) values[k] = src[k];
      svg::HeatmapOptions o;
      const size_t k = static_cast<size_t>(l * H + hh);
      const int a = k < h.assigned.size() ? h.assigned[k] : -1;
      const int top = k < h.per_head.size() ? strongest(h, k) : -1;
      const int shown = a >= 0 ? a : top;
      const double mass = shown >= 0 ? num(h.per_head[k].value("mass", json::object()),
                                           h.relations[shown].c_str(), 0.0)
                                     : NAN;
      o.title = shown < 0 ? fmt::format("L{} H{}", l, hh)
                          : fmt::format("L{} H{} {} {} {:.2f}", l, hh, a >= 0 ? "\u2192" : "\u00b7",
                                        h.relations[shown], mass);
      o.row_labels = tokens;
      o.col_labels = tokens;
      o.rotate_col_labels = true;
      o.show_values = false;
      o.cell = 13;
      o.marks = marks;
      o.x_label = "key (attended to)";
      o.y_label = "query";
      body += figure(svg::heatmap(static_cast<int>(T), static_cast<int>(T), values, o));
    }
  }
  body += "</div>";
  return section(
      "attention", "Attention maps on an example sentence",
      "Rows are queries, columns the keys they attend to; darker is more weight. Outlined "
      "cells are each token's gold partners, coloured by relation. "
      "All maps are in attention.npy with the tokens in attention_tokens.json.",
      body);
}

std::string ablation_section(const RunFiles& f, const Heads& h) {
  if (h.per_head.empty())
    return section("ablation", "Ablation and importance", "",
                   "<p class=\"note\">heads.json not found.</p>");
  const double base = num(f.heads, "eval_accuracy");
  std::vector<svg::Bar> off, only, imp;
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const int a = h.assigned[k];
    const std::string color = a >= 0 ? h.colors[a] : "#9aa3ad";
    const int top = strongest(h, k);
    const bool backup =
        a < 0 && top >= 0 &&
        num(h.per_head[k].value("mass", json::object()), h.relations[top].c_str(), 0.0) > 0.3;
    const std::string note = a >= 0 ? h.relations[a] : backup ? "(" + h.relations[top] + ")" : "";
    off.push_back({h.label[k], num(h.per_head[k], "ablation_accuracy"), color, note});
    only.push_back({h.label[k], num(h.per_head[k], "keep_only_accuracy"), color, note});
    imp.push_back({h.label[k], num(h.per_head[k], "importance"), color, note});
  }
  svg::BarChartOptions bo = bars("Accuracy with this head gated off", "eval accuracy");
  bo.vmin = 0.0;
  bo.vmax = 1.0;
  bo.reference = base;
  bo.reference_label = "all heads";
  svg::BarChartOptions ko = bo;
  ko.title = "Accuracy keeping only this head in its layer";
  svg::BarChartOptions io = bars("Importance |dL/dg| (L2-normalised per layer)", "importance");
  io.vmin = 0.0;
  std::string body = "<div class=\"row\">" + figure(svg::bar_chart(off, bo)) +
                     figure(svg::bar_chart(only, ko)) + figure(svg::bar_chart(imp, io)) + "</div>";

  const json drops = f.heads.value("group_ablation_drop", json::object());
  const json groups = f.heads.value("relation_groups", json::object());
  if (!drops.empty()) {
    std::vector<double> values;
    std::vector<std::string> rows;
    for (const std::string& r : h.relations) {
      std::string members;
      for (const json& g : groups.value(r, json::array()))
        members +=
            fmt::format("{}L{}H{}", members.empty() ? "" : ",", g[0].get<int>(), g[1].get<int>());
      rows.push_back(r + " heads off (" + (members.empty() ? "none" : members) + ")");
      for (const std::string& c : h.relations)
        values.push_back(num(drops.value(r, json::object()), c.c_str(), 0.0));
    }
    svg::HeatmapOptions o;
    o.title = "Relation-group ablation: drop in component accuracy";
    o.row_labels = rows;
    o.row_label_colors = h.colors;
    o.col_labels = h.relations;
    o.col_label_colors = h.colors;
    o.cell = 52;
    o.x_label = "label component";
    body += "<div class=\"row\">" +
            figure(svg::heatmap(static_cast<int>(rows.size()), static_cast<int>(h.relations.size()),
                                values, o),
                   "Row r: every head whose largest mass is on r (and above 0.3) gated off "
                   "together. A dark "
                   "diagonal means each group carries its own relation's information.") +
            "</div>";
  }
  return section(
      "ablation", "Ablation and importance",
      "Gate a head to 0 and measure accuracy; importance is the mean |dL/dgate| at gate 1 "
      "(Michel et al. 2019). Bars are coloured by the head's assigned relation.",
      body);
}

std::string table_section(const Heads& h) {
  if (h.per_head.empty()) return "";
  std::string head = "<tr><th class=\"l\">head</th><th>assigned</th>";
  for (const auto& r : h.relations) head += "<th>mass " + svg::escape(r) + "</th>";
  for (const auto& r : h.relations) head += "<th>argmax " + svg::escape(r) + "</th>";
  head +=
      "<th>entropy</th><th>confidence</th><th>acc. ablated</th><th>acc. "
      "keep-only</th><th>importance</th></tr>";
  std::string rows;
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const json& p = h.per_head[k];
    const int a = h.assigned[k];
    rows += "<tr><td class=\"l\">" + h.label[k] + "</td><td>" +
            (a >= 0 ? fmt::format("<span class=\"tag\" style=\"background:{}\">{}</span>",
                                  h.colors[a], svg::escape(h.relations[a]))
                    : "") +
            "</td>";
    for (const auto& r : h.relations)
      rows += "<td>" + svg::number(num(p.value("mass", json::object()), r.c_str()), 3) + "</td>";
    for (const auto& r : h.relations)
      rows += "<td>" + svg::number(num(p.value("argmax_accuracy", json::object()), r.c_str()), 3) +
              "</td>";
    for (const char* key :
         {"entropy", "confidence", "ablation_accuracy", "keep_only_accuracy", "importance"})
      rows += "<td>" + svg::number(num(p, key), 3) + "</td>";
    rows += "</tr>";
  }
  return section("heads", "Every head in numbers",
                 "Entropy in nats; confidence is the mean largest weight (Voita et al. 2019).",
                 "<table>" + head + rows + "</table>");
}

std::string config_section(const RunFiles& f) {
  std::string body = "<div class=\"row\"><div><h3>Resolved config</h3><pre>" +
                     (f.config_toml.empty() ? std::string("(config.resolved.toml not found)")
                                            : svg::escape(f.config_toml)) +
                     "</pre></div><div><h3>Versions</h3><table>";
  const json versions =
      f.summary.is_object() ? f.summary.value("versions", json::object()) : json::object();
  for (const auto& [k, v] : versions.items())
    body += "<tr><td class=\"l\">" + svg::escape(k) + "</td><td class=\"l\">" +
            svg::escape(v.is_string() ? v.get<std::string>() : v.dump()) + "</td></tr>";
  body += fmt::format("<tr><td class=\"l\">report</td><td class=\"l\">headlab {}</td></tr>",
                      HEADLAB_VERSION);
  const json eval = f.heads.is_object() ? f.heads.value("eval", json::object()) : json::object();
  if (!eval.empty())
    body += fmt::format(
        "<tr><td class=\"l\">analysis batches</td><td class=\"l\">{} x {} (seed {})</td></tr>",
        eval.value("batches", 0), eval.value("batch_size", 0), eval.value("seed", 0));
  body += "</table></div></div>";
  return section("config", "Config and versions", "", body);
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
  f.config_toml = optional_text(run_dir / "config.resolved.toml");
  return f;
}

std::string render_run_report(const RunFiles& f) {
  const Heads h = parse_heads(f.heads);
  const Curves c = read_curves(f.metrics, h.relations);
  std::string body = "<header class=\"top\"><h1>headlab run: " + svg::escape(f.name) + "</h1>" +
                     "<p>Do the attention heads specialize? One relation per head, measured "
                     "against the gold partners of the dependency task.</p></header>\n";
  body += summary_section(f, h, c);
  body += curves_section(h, c);
  body += specialization_section(h);
  body += attention_section(f, h);
  body += ablation_section(f, h);
  body += timeline_section(f);
  body += pruning_section(f);
  body += composition_section(f);
  body += table_section(h);
  body += config_section(f);
  body += "<footer>Written by headlab " HEADLAB_VERSION
          ". Self-contained: no scripts, no network.</footer>";
  return html_page("headlab run: " + f.name, body);
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
