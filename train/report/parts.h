#pragma once
// Internal building blocks of the HTML reports (report_run.cpp, report_sweep.cpp): small HTML
// helpers and heads.json flattened for drawing. Not part of the public API.

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/report/svg.h"

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
};
// Tolerant: a document without heads gives an empty Heads.
Heads parse_heads(const nlohmann::json& doc);
// The relation with the largest mass on head k, or -1 without relations.
int strongest(const Heads& h, size_t k);
// A one-line legend of the relations' colours.
std::string relation_legend(const Heads& h);
// Heatmap of per_head[k][key][relation] (mass, mass_distinct, argmax_accuracy), rows = heads;
// with `notes`, the assigned relation ("-> PREV") or, in grey, an unassigned head's clear
// favourite ("(HEAD)") is written right of its row.
std::string matrix(const Heads& h, const char* key, const std::string& title, bool notes,
                   int cell = 48);

}  // namespace headlab::report_parts
