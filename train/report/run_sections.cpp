// The run report's sections drawn from heads.json, metrics.jsonl and the config: curves, the
// head x relation matrices, ablation, the table of every head, and the run's files.

#include <cmath>

#include <fmt/format.h>

#include "core/version.h"
#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

std::string curves_body(const RunView& v) {
  const Heads& h = v.heads;
  const Curves& c = v.curves;
  if (c.step.empty() && c.eval_step.empty()) return missing("metrics.jsonl not found or empty.");
  std::vector<svg::Series> loss = {
      series("train loss", "#4e79a7", c.step, c.loss),
      series("eval loss", "#e15759", c.eval_step, c.eval_loss, false, true)};
  svg::LineChartOptions lo = chart("Loss", "step", "cross-entropy");
  lo.log_y = true;
  std::vector<svg::Series> acc = {
      series("train accuracy", "#0072b2", c.step, c.accuracy),
      series("eval accuracy", "#1f2430", c.eval_step, c.eval_accuracy, false, true)};
  for (size_t r = 0; r < h.relations.size() && r < c.eval_component.size(); ++r) {
    bool any = false;
    for (double x : c.eval_component[r]) any = any || !std::isnan(x);
    if (!any) continue;
    acc.push_back(series("eval " + h.relations[r] + " component", h.colors[r], c.eval_step,
                         c.eval_component[r], true));
    acc.back().shape = relation_shape(static_cast<int>(r));  // told apart without the colour
  }
  svg::LineChartOptions ao = chart("Accuracy", "step", "accuracy");
  ao.y_min = 0.0;
  ao.y_max = 1.0;
  ao.reference_y = kLearnedAccuracy;
  std::vector<svg::Series> lr = {series("learning rate", "#59a14f", c.step, c.lr)};
  svg::LineChartOptions ro = chart("Learning rate", "step", "lr");
  ro.y_min = 0.0;
  return lede(
             "From metrics.jsonl. Training rows are measured on the step's batch with dropout "
             "active; evaluation rows (dots) on the fixed evaluation sentences without. "
             "Component accuracy is how often the predicted label gets one relation's part "
             "right (for the dependency task, its colour digit): it shows which relation the "
             "model learned when.") +
         "<div class=\"row\">" + figure(svg::line_chart(loss, lo)) +
         figure(svg::line_chart(acc, ao)) + figure(svg::line_chart(lr, ro)) + "</div>";
}

std::string specialization_body(const RunView& v) {
  const Heads& h = v.heads;
  if (h.per_head.empty()) return missing("heads.json not found.");
  std::string body = "<div class=\"row\">";
  // The chance baselines, when heads.json has them (older runs do not).
  const std::string uniform = baseline_list(h, "mass_uniform_baseline");
  const std::string uniform_distinct = baseline_list(h, "mass_distinct_uniform_baseline");
  const std::string offset = baseline_list(h, "argmax_offset_baseline", true);
  body += figure(matrix(h, "mass", "Attention mass on the gold partner", true),
                 fmt::format("M[l,h,r] = mean over tokens of the weight on relation r's partner. "
                             "The arrow, the outline and the initial mark the relation assigned "
                             "to the head (best one-to-one assignment): solid and in the "
                             "relation's colour when its mass is above {0}, so the head claims "
                             "it; grey, dashed and \"(unclaimed)\" when not. \"(unassigned: R)\" "
                             "in grey: a head with no relation assigned whose largest mass, on "
                             "R, is above 0.3.{1}",
                             h.threshold,
                             uniform.empty() ? ""
                                             : " Chance: a head attending uniformly over the "
                                               "visible keys scores " +
                                                   uniform + "."));
  body +=
      figure(matrix(h, "mass_distinct", "Mass, distinct partners only", false),
             "The same on tokens whose partners are all real words and pairwise distinct: no "
             "floor from coinciding partners." +
                 (uniform_distinct.empty() ? std::string()
                                           : " Chance (uniform head): " + uniform_distinct + "."));
  body += figure(matrix(h, "argmax_accuracy", "Argmax accuracy", false),
                 "How often the head's strongest key is the gold partner (Clark et al. 2019)." +
                     (offset.empty() ? std::string()
                                     : " Chance: the best fixed-offset head (always the key d "
                                       "away) scores " +
                                           offset + "."));
  body += "</div>";
  return lede(
             "Each row is one attention head, each column one relation. A specialized head has "
             "one dark cell.") +
         body;
}

namespace {

// " An ablation drop below 0.012 (2 x the standard error of accuracy over 8 batches) is within
// evaluation noise.<more>", or "" when heads.json has no spread.
std::string noise_note(const json& doc, const std::string& more) {
  const double noise = drop_baseline(doc);
  if (std::isnan(noise)) return "";
  return fmt::format(
      " An ablation drop below {} (2 x the standard error of accuracy over {} batches) is within "
      "evaluation noise.{}",
      svg::number(noise, 3), spread_batches(doc), more);
}

// Head k's note on the ablation bars: its relation, "SEM unclaimed", or its clear favourite.
std::string bar_note(const Heads& h, size_t k) {
  const int a = h.assigned[k];
  if (a >= 0) return h.relations[a] + (h.claimed[k] ? "" : " unclaimed");
  const int top = strongest(h, k);
  const bool backup = top >= 0 && num(h.per_head[k].value("mass", json::object()),
                                      h.relations[top].c_str(), 0.0) > 0.3;
  return backup ? "(" + h.relations[top] + ")" : "";
}

std::string group_matrix(const RunFiles& f, const Heads& h) {
  const json drops = f.heads.value("group_ablation_drop", json::object());
  const json groups = f.heads.value("relation_groups", json::object());
  if (drops.empty()) return "";
  std::vector<double> values;
  std::vector<std::string> rows;
  for (const std::string& r : h.relations) {
    std::string members;
    for (const json& g : groups.value(r, json::array()))
      members +=
          fmt::format("{}L{}H{}", members.empty() ? "" : ",", g[0].get<int>(), g[1].get<int>());
    rows.push_back(r + " heads off (" + (members.empty() ? "none" : members) + ")");
    // A group without heads gates nothing off: its drop is undefined, not 0.
    for (const std::string& c : h.relations)
      values.push_back(members.empty() ? NAN : num(drops.value(r, json::object()), c.c_str()));
  }
  svg::HeatmapOptions o;
  o.title = "Relation-group ablation: drop in component accuracy";
  o.row_labels = rows;
  o.row_label_colors = h.colors;
  o.col_labels = h.relations;
  o.col_label_colors = h.colors;
  o.cell = 52;
  o.x_label = "label component";
  o.nan_text = "n/a";
  return "<div class=\"row\">" +
         figure(svg::heatmap(static_cast<int>(rows.size()), static_cast<int>(h.relations.size()),
                             values, o),
                "Row r: every head whose largest mass is on r (and above 0.3) gated off "
                "together; n/a: no head is in the group. A dark diagonal means each group "
                "carries its own relation's information.") +
         "</div>";
}

}  // namespace

std::string ablation_body(const RunView& v) {
  const Heads& h = v.heads;
  if (h.per_head.empty()) return missing("heads.json not found.");
  std::vector<svg::Bar> off, only, imp;
  const double all = num(v.files.heads, "eval_accuracy"), noise = drop_baseline(v.files.heads);
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const std::string color = head_color(h, k), note = bar_note(h, k);
    const double acc = num(h.per_head[k], "ablation_accuracy");
    // A drop (or a gain) within the spread of accuracy across batches is marked: it may be noise.
    const bool within = !std::isnan(noise) && !std::isnan(all) && std::abs(all - acc) < noise;
    off.push_back({h.label[k], acc, color, within ? note + (note.empty() ? "" : " ") + "~" : note});
    only.push_back({h.label[k], num(h.per_head[k], "keep_only_accuracy"), color, note});
    imp.push_back({h.label[k], num(h.per_head[k], "importance"), color, note});
  }
  svg::BarChartOptions bo = bars("Accuracy with this head gated off", "eval accuracy");
  bo.vmin = 0.0;
  bo.vmax = 1.0;
  bo.reference = all;
  bo.reference_label = "all heads";
  svg::BarChartOptions ko = bo;
  ko.title = "Accuracy keeping only this head in its layer";
  svg::BarChartOptions io = bars("Importance |dL/dg| (L2-normalised per layer)", "importance");
  io.vmin = 0.0;
  return lede(
             "Gate a head to 0 and measure accuracy; importance is the mean |dL/dgate| at gate "
             "1 (Michel et al. 2019). Bars are coloured by the relation the head claims, grey "
             "when it claims none." +
             noise_note(v.files.heads,
                        " A \"~\" after a gated-off bar marks a change smaller than that.")) +
         "<div class=\"row\">" + figure(svg::bar_chart(off, bo)) +
         figure(svg::bar_chart(only, ko)) + figure(svg::bar_chart(imp, io)) + "</div>" +
         group_matrix(v.files, h);
}

std::string table_body(const RunView& v) {
  const Heads& h = v.heads;
  if (h.per_head.empty()) return "";
  std::string head = "<tr><th class=\"l\">head</th><th>assigned</th>";
  for (const auto& r : h.relations) head += "<th>mass " + svg::escape(r) + "</th>";
  for (const auto& r : h.relations) head += "<th>argmax " + svg::escape(r) + "</th>";
  // Mean ablation (the head's output replaced by its mean instead of 0) came with activation
  // patching; a heads.json without it keeps the old columns.
  bool mean_ablation = false;
  for (const json& p : h.per_head)
    mean_ablation = mean_ablation || !std::isnan(num(p, "mean_ablation_accuracy"));
  std::vector<const char*> keys = {"entropy", "confidence", "ablation_accuracy"};
  head += "<th>entropy</th><th>confidence</th><th>acc. ablated</th>";
  if (mean_ablation) {
    head += "<th>acc. mean-ablated</th>";
    keys.push_back("mean_ablation_accuracy");
  }
  head += "<th>acc. keep-only</th><th>importance</th></tr>";
  keys.insert(keys.end(), {"keep_only_accuracy", "importance"});
  std::string rows;
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const json& p = h.per_head[k];
    const int a = h.assigned[k];
    rows += "<tr><td class=\"l\">" + h.label[k] + "</td><td>" +
            (a < 0 ? "" : tag(h, a, h.claimed[k]) + (h.claimed[k] ? "" : " unclaimed")) + "</td>";
    for (size_t r = 0; r < h.relations.size(); ++r)
      rows +=
          "<td>" + svg::number(num(p.value("mass", json::object()), h.relations[r].c_str()), 3) +
          chance_note(head_baseline(h, k, "mass_uniform_baseline", r), "uniform head") + "</td>";
    for (size_t r = 0; r < h.relations.size(); ++r)
      rows +=
          "<td>" +
          svg::number(num(p.value("argmax_accuracy", json::object()), h.relations[r].c_str()), 3) +
          chance_note(head_baseline(h, k, "argmax_offset_baseline", r), "best offset head") +
          "</td>";
    for (const char* key : keys) rows += "<td>" + svg::number(num(p, key), 3) + "</td>";
    rows += "</tr>";
  }
  const bool chance = !std::isnan(head_baseline(h, 0, "mass_uniform_baseline", 0));
  return lede("Entropy in nats; confidence is the mean largest weight (Voita et al. 2019)." +
              std::string(mean_ablation ? " Ablated: the head's output set to 0; mean-ablated: "
                                          "replaced by its mean over the evaluation tokens, so "
                                          "that only what depends on the sentence is removed."
                                        : "") +
              std::string(chance ? " In brackets, chance: beside a mass the uniform head's, "
                                   "beside an argmax accuracy the best fixed-offset head's."
                                 : "") +
              noise_note(v.files.heads, "")) +
         "<table>" + head + rows + "</table>";
}

std::string files_body(const RunView& v) {
  const RunFiles& f = v.files;
  std::string links;
  for (const std::string& name : f.links)
    links += std::string(links.empty() ? "" : " \u00b7 ") + "<a href=\"" + href(name) + "\">" +
             svg::escape(name) + "</a>";
  std::string body = "<p>The run's files: " + (links.empty() ? "none found" : links) + ".</p>";
  body += "<div class=\"row\"><div><h3>Resolved config</h3><pre>" +
          (f.config_toml.empty() ? std::string("(config.resolved.toml not found)")
                                 : svg::escape(f.config_toml)) +
          "</pre></div><div><h3>Versions</h3><table>";
  const json versions =
      f.summary.is_object() ? f.summary.value("versions", json::object()) : json::object();
  for (const auto& [k, x] : versions.items())
    body += "<tr><td class=\"l\">" + svg::escape(k) + "</td><td class=\"l\">" +
            svg::escape(x.is_string() ? x.get<std::string>() : x.dump()) + "</td></tr>";
  // The plugins the run loaded, as run.json records them: the file and its SHA-256.
  const json plugins = f.run.is_object() ? f.run.value("plugins", json::array()) : json::array();
  for (const json& p : plugins.is_array() ? plugins : json::array()) {
    if (!p.is_object()) continue;
    const std::string path = p.value("path", std::string("?"));
    body += "<tr><td class=\"l\">plugin</td><td class=\"l\">" + svg::escape(path) + " (sha256 " +
            svg::escape(p.value("sha256", std::string("?")).substr(0, 16)) + "\u2026)</td></tr>";
  }
  body += fmt::format("<tr><td class=\"l\">report</td><td class=\"l\">headlab {}</td></tr>",
                      HEADLAB_VERSION);
  // The task's data files and what it read from them (summary.json "data": sentences per file,
  // those longer than task.max_len, skipped or cut).
  const json files = f.run.is_object() ? f.run.value("data_files", json::array()) : json::array();
  for (const json& d : files.is_array() ? files : json::array())
    if (d.is_object())
      body += "<tr><td class=\"l\">" + svg::escape(d.value("key", std::string("data file"))) +
              "</td><td class=\"l\">" + svg::escape(d.value("path", std::string("?"))) +
              "</td></tr>";
  json data = f.summary.is_object() ? f.summary.value("data", json::object()) : json::object();
  if (!data.is_object()) data = json::object();
  for (const auto& [k, x] : data.items())
    body += "<tr><td class=\"l\">" + svg::escape(k) + "</td><td class=\"l\">" +
            svg::escape(x.dump()) + "</td></tr>";
  const json eval = f.heads.is_object() ? f.heads.value("eval", json::object()) : json::object();
  if (!eval.empty() && eval.value("set_sentences", int64_t{0}) > 0)
    body += fmt::format(
        "<tr><td class=\"l\">analysis sentences</td><td class=\"l\">the eval file's {}, in "
        "order</td></tr>",
        eval.value("set_sentences", int64_t{0}));
  else if (!eval.empty())
    body += fmt::format(
        "<tr><td class=\"l\">analysis batches</td><td class=\"l\">{} x {} (seed {})</td></tr>",
        eval.value("batches", 0), eval.value("batch_size", 0), eval.value("seed", 0));
  return body + "</table></div></div>";
}

}  // namespace headlab::report_parts
