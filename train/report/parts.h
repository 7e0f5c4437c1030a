#pragma once
// Internal building blocks of the HTML reports (run_report.cpp, sweep_report.cpp and their
// sections): small HTML helpers, heads.json flattened for drawing, and the list of sections a
// page is made of. Not part of the public API.

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/report/svg/svg.h"

namespace headlab::report_parts {

// j[key] as a number, or fallback when absent or not a number (or j not an object).
double num(const nlohmann::json& j, const char* key, double fallback = NAN);
// A headline number: <div class="card cls"> with a key and a value.
std::string card(const std::string& key, const std::string& value, const char* cls = "");
// <figure> around an SVG, with an optional caption as wide as the figure.
std::string figure(const std::string& svg_text, const std::string& caption = "");
// <section id=..> with an <h2> title and an optional lede paragraph (HTML allowed in lede).
std::string section(const char* id, const std::string& title, const std::string& lede,
                    const std::string& body);
// <p class="lede">..</p> (HTML allowed), and a <p class="note"> saying what is missing.
std::string lede(const std::string& html);
std::string missing(const std::string& text);

// One section of a page: rendered by `body` from the page's view of its documents (RunView,
// SweepView in sections.h). `body` returns the HTML below the title, or "" to leave the section
// out (e.g. a document the section needs is absent and it has nothing to say). `script` is the
// section's inline JavaScript or nullptr; it is added once, at the end of the page, when the
// section is on it, and must keep working when the page is opened straight from disk (no
// requests, no modules).
template <class View>
struct SectionSpec {
  const char* id;
  const char* title;
  std::string (*body)(const View&);
  const char* script = nullptr;
};

// The sections in order, with a contents line linking to each; `scripts` collects the scripts
// of the sections drawn.
template <class View>
std::string render_sections(std::span<const SectionSpec<View>> specs, const View& view,
                            std::string& scripts) {
  std::string nav, out;
  for (const SectionSpec<View>& s : specs) {
    const std::string body = s.body(view);
    if (body.empty()) continue;
    nav += std::string(nav.empty() ? "" : " \u00b7 ") + "<a href=\"#" + s.id + "\">" +
           svg::escape(s.title) + "</a>";
    out += section(s.id, s.title, "", body);
    if (s.script) scripts += s.script;
  }
  return "<nav class=\"contents\">" + nav + "</nav>\n" + out;
}

svg::LineChartOptions chart(std::string title, std::string x_label, std::string y_label);
svg::BarChartOptions bars(std::string title, std::string value_label);
svg::Series series(std::string name, std::string color, std::vector<double> x,
                   std::vector<double> y, bool dashed = false, bool markers = false);

// What heads.json says, flattened for drawing.
struct Heads {
  std::string task;  // "" in a heads.json of headlab 0.1
  std::vector<std::string> relations;
  std::vector<std::string> colors;  // relation_color of each relation
  int layers = 0, heads = 0;
  std::vector<nlohmann::json> per_head;  // layer-major
  std::vector<std::string> label;        // "L0 H1"
  std::vector<int> assigned;             // relation index assigned to each head, or -1
  // An assigned head claims its relation when its mass on it is above the threshold
  // (specialization.claim_threshold, 0.5 when absent); an unclaimed assignment is drawn grey
  // and dashed, never in the relation's colour.
  double threshold = 0.5;
  std::vector<double> assigned_mass;  // mass on the assigned relation, NaN when unassigned
  std::vector<char> claimed;          // assigned and assigned_mass > threshold
};
// Tolerant: a document without heads gives an empty Heads.
Heads parse_heads(const nlohmann::json& doc);
// The relation with the largest mass on head k, or -1 without relations.
int strongest(const Heads& h, size_t k);
// A one-line legend of the relations' colours.
std::string relation_legend(const Heads& h);
// Heatmap of per_head[k][key][relation] (mass, mass_distinct, argmax_accuracy), rows = heads;
// with `notes`, the assigned relation ("-> PREV") or, in grey, an unassigned head's clear
// favourite ("(unassigned: HEAD)") is written right of its row.
std::string matrix(const Heads& h, const char* key, const std::string& title, bool notes,
                   int cell = 48);
// A head's one-line caption: "L0 H0 \u2192 PREV 0.92" (claimed), "L0 H2 \u2192 SEM 0.11
// (unclaimed)", "L0 H1 \u00b7 HEAD 0.40" (unassigned: its strongest relation), "L0 H1".
std::string head_caption(const Heads& h, size_t k);
// The colour a head is drawn in: its relation's when claimed, grey otherwise.
std::string head_color(const Heads& h, size_t k);
// A relation tag: filled in the relation's colour, or outlined when `filled` is false.
std::string tag(const Heads& h, int relation, bool filled = true);
// A relative link target (a run directory's report.html): every byte outside
// [A-Za-z0-9-._~/] percent-encoded, so any directory name makes a working file:// link.
std::string href(const std::string& relative_path);
// "1 seed", "2 seeds".
std::string count(size_t n, const char* singular, const char* plural);

}  // namespace headlab::report_parts
