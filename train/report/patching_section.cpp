// The "patching" section of the run report (sections.h): heads.json's activation patching
// (train/analysis/activation_patching.h) as a head x relation map after the mass matrix, and
// the residual stream's points per relation. Where the mass matrix says which head looks at a
// relation's partner, this says which head's output the model reads it from; the two can
// disagree, and the verdict says so (run_summary.cpp).

#include <cmath>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {

const char* const kInk = "#1f2430";        // the page's text colour: 15:1 on white
const char* const kGrey = kUnclaimedGrey;  // unclaimed assignments, as in the mass matrix

// j as a number, NaN when it is null (undefined) or anything else.
double value(const json& j) {
  return j.is_number() ? j.get<double>() : NAN;
}

// A fraction or logit difference for a table cell: "n/a" where undefined.
std::string cell(double v, int digits = 3) {
  return std::isnan(v) ? "n/a" : svg::number(v, digits);
}

PatchingRelation read_relation(const json& e, const Heads& h, const std::string& name) {
  PatchingRelation out;
  out.heads.assign(h.per_head.size(), NAN);
  if (!e.is_object()) {
    // No entry of its own: each head's "patching_restored" still says what it restored.
    for (size_t k = 0; k < h.per_head.size(); ++k)
      if (h.per_head[k].is_object())
        out.heads[k] = num(h.per_head[k].value("patching_restored", json()), name.c_str());
    return out;
  }
  out.measured = true;
  out.tokens = num(e, "tokens");
  out.clean = num(e, "clean_logit_difference");
  out.corrupted = num(e, "corrupted_logit_difference");
  const json layers = e.value("heads", json());
  for (size_t l = 0; layers.is_array() && l < layers.size(); ++l) {
    if (!layers[l].is_array()) continue;
    for (size_t x = 0; x < layers[l].size() && x < static_cast<size_t>(h.heads); ++x) {
      const size_t k = l * static_cast<size_t>(h.heads) + x;
      if (k < out.heads.size()) out.heads[k] = value(layers[l][x]);
    }
  }
  for (const json& p : e.value("residual", json::array())) {
    if (!p.is_object()) continue;
    const json hook = p.value("hook", json());
    out.residual.push_back({hook.is_string() ? hook.get<std::string>() : "?",
                            value(p.value("source", json())),
                            value(p.value("destination", json()))});
  }
  return out;
}

// The heat map: rows heads, columns relations, the mass assignment outlined as in the mass
// matrix, and right of each row the relations the head restores the most of.
std::string patching_map(const Heads& h, const Patching& p) {
  const size_t R = h.relations.size(), K = h.per_head.size();
  std::vector<double> values;
  std::vector<std::string> titles, notes;
  std::vector<svg::CellMark> marks;
  for (size_t k = 0; k < K; ++k) {
    std::string best;
    for (size_t r = 0; r < R; ++r) {
      const double v = p.relations[r].heads[k];
      values.push_back(v);
      titles.push_back(std::isnan(v) ? fmt::format("{}, {}: undefined", h.label[k], h.relations[r])
                                     : fmt::format("{}, {}: {} of the logit difference restored",
                                                   h.label[k], h.relations[r], svg::number(v, 3)));
      if (patching_top(p, r) == static_cast<int>(k))
        best += (best.empty() ? "best for " : ", ") + h.relations[r];
    }
    notes.push_back(best);
    const int a = h.assigned[k];
    if (a >= 0)
      marks.push_back(
          {static_cast<int>(k), a, h.claimed[k] ? h.colors[a] : kGrey, "", !h.claimed[k]});
  }
  svg::HeatmapOptions o;
  o.title = "Logit difference restored";  // short: the SVG is as wide as its cells and notes
  o.row_labels = h.label;
  o.col_labels = h.relations;
  o.cell = 48;
  o.row_notes = notes;
  o.row_note_colors.assign(K, kInk);
  o.marks = marks;
  o.cell_titles = titles;
  o.nan_text = "n/a";
  return svg::heatmap(static_cast<int>(K), static_cast<int>(R), values, o);
}

// "PREV 256 tokens, logit difference 0.090 clean and -0.050 corrupted; HEAD ..."
std::string measured_list(const Heads& h, const Patching& p) {
  std::string out;
  for (size_t r = 0; r < h.relations.size(); ++r) {
    const PatchingRelation& e = p.relations[r];
    out += (out.empty() ? "" : "; ") + h.relations[r] +
           (e.measured ? fmt::format(" {} tokens, logit difference {} clean and {} corrupted",
                                     cell(e.tokens, 0), cell(e.clean), cell(e.corrupted))
                       : " not measured");
  }
  return out;
}

// Per relation: the head patching names against the head the mass assignment names.
std::string relation_table(const Heads& h, const Patching& p) {
  std::string rows;
  for (size_t r = 0; r < h.relations.size(); ++r) {
    const PatchingRelation& e = p.relations[r];
    const int top = patching_top(p, r);
    int mass = -1;
    for (size_t k = 0; k < h.assigned.size(); ++k)
      if (h.assigned[k] == static_cast<int>(r)) mass = static_cast<int>(k);
    const auto head = [&](int k) {
      return k < 0 ? std::string("-")
                   : fmt::format("{} ({})", h.label[k], cell(e.heads[static_cast<size_t>(k)]));
    };
    rows += fmt::format(
        "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td>"
        "<td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
        svg::escape(h.relations[r]), cell(e.tokens, 0), cell(e.clean), cell(e.corrupted), head(top),
        head(mass),
        top < 0 || mass < 0 ? "-"
        : top == mass || e.heads[static_cast<size_t>(mass)] == e.heads[static_cast<size_t>(top)]
            ? "agree"
            : "<strong>disagree</strong>");
  }
  return "<table><tr><th class=\"l\">relation</th><th>measured tokens</th><th>logit difference, "
         "clean</th><th>corrupted</th><th class=\"l\">most restored by</th><th class=\"l\">head "
         "by mass</th><th class=\"l\">mass and patching</th></tr>" +
         rows + "</table>";
}

// Each relation's residual-stream points: where the relation's information is, layer by layer.
std::string residual_tables(const Heads& h, const Patching& p) {
  std::string out;
  for (size_t r = 0; r < h.relations.size(); ++r) {
    const PatchingRelation& e = p.relations[r];
    if (e.residual.empty()) continue;
    std::string rows;
    for (const PatchingRelation::Point& x : e.residual)
      rows += fmt::format("<tr><td class=\"l\"><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                          svg::escape(x.hook), cell(x.source), cell(x.destination));
    out += "<div><h3>" + svg::escape(h.relations[r]) +
           "</h3><table><tr><th class=\"l\">hook</th><th>source</th><th>destination</th></tr>" +
           rows + "</table></div>";
  }
  if (out.empty()) return "";
  return "<h3>Residual stream</h3>" +
         lede(
             "The same fraction with the whole residual stream patched at one point: source at "
             "the positions whose input the corruption changed, destination at the measured "
             "tokens. Read down a table to see the relation's information move from the "
             "changed positions (source near 1 before the first block) to the measured tokens "
             "(destination near 1 after the last).") +
         "<div class=\"row\">" + out + "</div>";
}

// Each head's direct logit attribution per relation (heads.json "direct_logit_attribution"), in
// logits of the same difference; "" when no head carries it (post-norm models, older runs).
std::string attribution_table(const Heads& h, const Patching& p) {
  bool any = false;
  for (const json& head : h.per_head)
    any = any || (head.is_object() && head.value("direct_logit_attribution", json()).is_object());
  if (!any) return "";
  std::string header = "<tr><th class=\"l\">head</th>";
  for (const std::string& r : h.relations) header += "<th>" + svg::escape(r) + "</th>";
  std::string rows;
  for (size_t k = 0; k < h.per_head.size(); ++k) {
    const json dla = h.per_head[k].is_object()
                         ? h.per_head[k].value("direct_logit_attribution", json())
                         : json();
    rows += "<tr><td class=\"l\">" + svg::escape(h.label[k]) + "</td>";
    for (const std::string& r : h.relations) {
      const double v = dla.is_object() ? value(dla.value(r, json())) : NAN;
      rows += "<td>" + cell(std::abs(v) < 0.005 ? 0.0 : v, 2) + "</td>";  // no "-0.00"
    }
    rows += "</tr>";
  }
  std::string clean;
  for (size_t r = 0; r < h.relations.size() && r < p.relations.size(); ++r)
    clean += (r ? ", " : "") + svg::escape(h.relations[r]) + " " + cell(p.relations[r].clean, 2);
  return "<h3>Direct logit attribution</h3>" +
         lede(
             "Each head's own share of the clean logit difference, in logits: its output "
             "through W<sub>O</sub> straight to the classifier, the final norm's scale frozen "
             "(paths through later blocks are not counted). The clean differences it is a share "
             "of: " +
             clean + ".") +
         "<table>" + header + "</tr>" + rows + "</table>";
}

}  // namespace

Patching parse_patching(const json& doc, const Heads& h) {
  Patching p;
  if (!doc.is_object() || !doc.contains("patching")) return p;
  const json& patching = doc["patching"];
  if (!patching.is_object()) {
    p.state = Patching::State::unavailable;
    return p;
  }
  p.state = Patching::State::measured;
  const json seed = patching.value("seed", json());
  if (seed.is_number_integer()) p.seed = seed.dump();
  const json relations = patching.value("relations", json::object());
  for (const std::string& r : h.relations)
    p.relations.push_back(
        read_relation(relations.is_object() ? relations.value(r, json()) : json(), h, r));
  return p;
}

int patching_top(const Patching& p, size_t r) {
  if (r >= p.relations.size()) return -1;
  const std::vector<double>& v = p.relations[r].heads;
  int best = -1;
  for (size_t k = 0; k < v.size(); ++k)
    if (!std::isnan(v[k]) && (best < 0 || v[k] > v[static_cast<size_t>(best)]))
      best = static_cast<int>(k);
  return best;
}

std::string patching_body(const RunView& v) {
  const Heads& h = v.heads;
  if (h.per_head.empty() || h.relations.empty()) return "";
  const Patching p = parse_patching(v.files.heads, h);
  if (p.state == Patching::State::absent) return "";
  if (p.state == Patching::State::unavailable)
    return missing("Activation patching not available: the " +
                   (h.task.empty() ? std::string("run's") : h.task) +
                   " task makes no corrupted sentences, so there is nothing to patch.");
  const std::string caption =
      "Each cell: the fraction of the clean-minus-corrupted logit difference restored when that "
      "head's output is patched from the clean sentence into the corrupted one; 1 = the head "
      "alone carries the relation's information to the output, 0 = none (below 0 the patch "
      "hurts, above 1 it overshoots; n/a = undefined, the corruption hardly moves the logit "
      "difference). Outlined, as in the mass matrix, the head assigned to the relation by "
      "mass; on the right, the relations a head restores the most of. Measured: " +
      measured_list(h, p) + ".";
  return lede(fmt::format(
             "Activation patching (Heimersheim &amp; Nanda 2024): for each relation the task "
             "corrupts the evaluation sentences so that some tokens' partner in that relation, "
             "and with it their label, changes (seed {}). The logit difference is the logit of "
             "the clean label minus that of the corrupted label at those tokens. The mass "
             "matrix says which head looks at the partner; this says which head's output the "
             "model reads it from. In a model of two or more layers a head's patch includes its "
             "effect through the heads above it.",
             p.seed.empty() ? std::string("?") : p.seed)) +
         "<div class=\"row\">" + figure(patching_map(h, p), caption) + "<div>" +
         relation_table(h, p) + "</div></div>" + residual_tables(h, p) + attribution_table(h, p);
}

}  // namespace headlab::report_parts
