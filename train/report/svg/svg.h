#pragma once
// Small inline-SVG charts for the HTML reports (the drawing primitives, apart from the report
// sections in train/report/ that use them): line charts, heatmaps with numbers and marks,
// horizontal bar charts and strip charts. Each function returns one self-contained <svg>
// element (no scripts, no external resources) sized in CSS pixels. Text is XML-escaped here;
// callers pass plain strings.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headlab::svg {

// XML/HTML escape of &, <, >, " and '.
std::string escape(std::string_view text);
// A number for display: fixed with `digits` decimals, "-" for NaN.
std::string number(double value, int digits = 2);
// Colour i of an 8-colour qualitative palette (Okabe-Ito, darkened to 4.5:1 on white), as
// "#rrggbb".
std::string palette(int i);
// Sequential colour for t in [0, 1] (white -> dark blue), clamped; and whether text on it
// should be white (else black): either way at least 4.5:1 contrast (WCAG AA) at every t.
std::string sequential(double t);
bool dark(double t);
// The opening <svg class="chart" ...> tag of a w x h chart named `label` for assistive
// technology (role="img" with aria-label; role="group" when `interactive`, so that the links
// inside stay reachable); without a label, a plain <svg>.
std::string svg_open(double w, double h, std::string_view label, bool interactive = false);
// A marker of `shape` ("circle", "square", "triangle", "diamond"; "" = circle) of radius r.
std::string marker(std::string_view shape, double x, double y, double r, std::string_view color,
                   double opacity = 1.0);

struct Series {
  std::string name;
  std::string color;  // "" picks palette(index)
  std::vector<double> x, y;
  bool dashed = false;
  bool markers = false;  // a dot at every point (for sparse series such as eval rows)
  bool line = true;      // false: dots only
  double opacity = 1.0;
  // A second cue beside the colour (a relation's, report.h): the dots' shape, also drawn at a
  // few points along a line without markers and in the legend; and a stroke-dasharray that
  // replaces `dashed`'s.
  std::string shape;
  std::string dash;
};

struct LineChartOptions {
  std::string title, x_label, y_label;
  int width = 410, height = 260;
  bool log_y = false;  // non-positive values are dropped on a log axis
  std::optional<double> y_min, y_max;
  std::optional<double> reference_y;  // a dotted horizontal line (e.g. 0.95)
  // Categorical x axis: these (position, label) ticks replace the numeric ones, and the x range
  // is padded by half a step on each side.
  std::vector<std::pair<double, std::string>> x_ticks;
};

// Lines over a shared x axis with "nice" ticks and a legend below the plot. Series with no
// points are listed in the legend only.
std::string line_chart(std::span<const Series> series, const LineChartOptions& options);

// A mark drawn on a heatmap cell: an outlined square in `color`, optionally with a small
// letter in its corner (e.g. the relation's initial).
struct CellMark {
  int row = 0, col = 0;
  std::string color;
  std::string letter;
  bool dashed = false;
  std::string dash;  // a stroke-dasharray that replaces `dashed`'s (a relation's second cue)
};

struct HeatmapOptions {
  std::string title;
  std::vector<std::string> row_labels, col_labels;
  std::string x_label, y_label;
  int cell = 30;
  bool show_values = true;
  int digits = 2;
  double vmin = 0.0, vmax = 1.0;
  bool rotate_col_labels = false;
  std::vector<CellMark> marks;
  // Optional text right of each row (the relation assigned to a head), and its colour.
  std::vector<std::string> row_notes;
  std::vector<std::string> row_note_colors;
  // Row labels' colours (empty = default).
  std::vector<std::string> row_label_colors;
  std::vector<std::string> col_label_colors;
  // Optional tooltip of each cell ([rows * cols], row-major); empty: the cell's value.
  std::vector<std::string> cell_titles;
  // What a NaN cell says (it is drawn light grey): "n/a" where a value is undefined rather than
  // unknown.
  std::string nan_text = "-";
  // Optional text written in each cell ([rows * cols], row-major) instead of its value ("8/10").
  std::vector<std::string> cell_texts;
  // Optional link of each cell ([rows * cols], "" = none): the cell is an <a href> whose
  // aria-label is its tooltip text (then no <title>; the chart becomes a group whose links a
  // screen reader lists).
  std::vector<std::string> cell_links;
};

// values is [rows * cols], row-major. Colour by (v - vmin) / (vmax - vmin).
std::string heatmap(int rows, int cols, std::span<const double> values,
                    const HeatmapOptions& options);

struct Bar {
  std::string label;
  double value = 0.0;
  std::string color;  // "" = palette(0)
  std::string note;   // text after the value (e.g. "PREV")
};

struct BarChartOptions {
  std::string title, value_label;
  int width = 410;
  int bar_height = 20;
  std::optional<double> vmin, vmax;  // default [min(0, min value), max(value)]
  int digits = 2;
  std::optional<double> reference;  // a dashed vertical line (e.g. the baseline accuracy)
  std::string reference_label;
};

// Horizontal bars, one per entry, labelled on the left with the value written at the end.
std::string bar_chart(std::span<const Bar> bars, const BarChartOptions& options);

// A point of a strip chart: its value, its tooltip and, optionally, the page it links to.
struct StripPoint {
  double value = 0.0;  // NaN: not drawn
  std::string title;
  std::string href;  // "" = no link
};

// One category of a strip chart (a sweep setting) and its points (its seeds).
struct StripGroup {
  std::string label;
  std::string color;  // "" = palette(index)
  std::vector<StripPoint> points;
};

struct StripChartOptions {
  std::string title, x_label, y_label;
  int width = 420, height = 280;
  std::optional<double> y_min, y_max;
  std::optional<double> reference_y;  // a dashed horizontal line (e.g. 0.95)
  int digits = 2;                     // of the means written beside their ticks
};

// Categories along x, each point a dot (inside <a href> when it has a link) set apart sideways
// so that equal values stay visible; each category's mean a black tick with its value, and the
// spread (mean +- one sample standard deviation) a line through it.
std::string strip_chart(std::span<const StripGroup> groups, const StripChartOptions& options);

// Tick positions for [lo, hi]: about `count` round numbers (1, 2, 5 x 10^k) inside it.
std::vector<double> nice_ticks(double lo, double hi, int count = 5);
// A tick label with as many decimals as the tick step needs (0.25 -> 2, 0.2 -> 1, 50 -> 0);
// exponent form for very large or small values.
std::string tick_text(double value, double step);

}  // namespace headlab::svg
