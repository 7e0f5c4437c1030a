// svg::line_chart: lines and dots over a frame with grid, ticks, axis labels and a legend below.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/svg/svg.h"

namespace headlab::svg {
namespace {

// Where the plot sits in the picture, and the data range it shows (y as plotted: log10 of the
// value on a log axis).
struct Frame {
  const LineChartOptions& o;
  double ml = 56, mr = 14, mt = 30, mb = 42;
  double pw = 0, ph = 0;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  int legend_cols = 1;
  double legend_h = 0;
  bool turn_ticks = false;

  double ty(double v) const { return o.log_y ? std::log10(v) : v; }
  double px(double x) const { return ml + (x - x0) / (x1 - x0) * pw; }
  double py(double y) const { return mt + (1.0 - (ty(y) - y0) / (y1 - y0)) * ph; }
  bool plotted(double y) const { return std::isfinite(y) && !(o.log_y && y <= 0); }
};

Frame make_frame(std::span<const Series> series, const LineChartOptions& o) {
  Frame f{o};
  f.mt = o.title.empty() ? 10 : 30;
  size_t longest = 1;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  f.legend_cols = std::clamp(static_cast<int>((o.width - 70) / (longest * 6.2 + 30)), 1, 3);
  const int legend_rows = (static_cast<int>(series.size()) + f.legend_cols - 1) / f.legend_cols;
  f.legend_h = 18.0 * legend_rows + 4;
  f.pw = o.width - f.ml - f.mr;
  // Categorical ticks closer than 44 px (a chart that keeps its width at many heads) are turned,
  // and the plot gives them room.
  f.turn_ticks = !o.x_ticks.empty() && f.pw / static_cast<double>(o.x_ticks.size()) < 44;
  if (f.turn_ticks) f.mb += 22;
  f.ph = o.height - f.mt - f.mb;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!f.plotted(s.y[i])) continue;
      f.x0 = std::min(f.x0, s.x[i]);
      f.x1 = std::max(f.x1, s.x[i]);
      f.y0 = std::min(f.y0, f.ty(s.y[i]));
      f.y1 = std::max(f.y1, f.ty(s.y[i]));
    }
  }
  if (!std::isfinite(f.x0)) f.x0 = 0, f.x1 = 1, f.y0 = 0, f.y1 = 1;
  if (o.y_min) f.y0 = f.ty(*o.y_min);
  if (o.y_max) f.y1 = f.ty(*o.y_max);
  if (!o.x_ticks.empty()) {  // categorical x: every tick in view, half a step of margin
    for (const auto& t : o.x_ticks) f.x0 = std::min(f.x0, t.first), f.x1 = std::max(f.x1, t.first);
    f.x0 -= 0.5;
    f.x1 += 0.5;
  }
  if (f.x1 <= f.x0) f.x1 = f.x0 + 1;
  if (f.y1 <= f.y0) f.y1 = f.y0 + (o.log_y ? 1 : std::max(1e-9, std::abs(f.y0) * 0.1 + 1e-3));
  if (o.log_y) f.y0 = std::floor(f.y0), f.y1 = std::ceil(f.y1);
  return f;
}

std::string y_grid(const Frame& f) {
  std::vector<double> ticks;
  if (f.o.log_y) {
    for (double e = f.y0; e <= f.y1 + 1e-9; e += 1) ticks.push_back(std::pow(10.0, e));
  } else {
    ticks = nice_ticks(f.y0, f.y1, 5);
  }
  const double step = ticks.size() > 1 ? std::abs(ticks[1] - ticks[0]) : 1.0;
  std::string out;
  for (double v : ticks) {
    const double y = f.py(v);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>",
                       f.ml, f.ml + f.pw, y, y);
    out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>",
                       f.ml - 5, y + 4, f.o.log_y ? fmt::format("{:g}", v) : tick_text(v, step));
  }
  return out;
}

std::string x_grid(const Frame& f) {
  std::vector<std::pair<double, std::string>> ticks = f.o.x_ticks;
  if (ticks.empty()) {
    const std::vector<double> at = nice_ticks(f.x0, f.x1, 5);
    const double step = at.size() > 1 ? at[1] - at[0] : 1.0;
    for (double v : at) ticks.emplace_back(v, tick_text(v, step));
  }
  std::string out;
  for (const auto& [v, label] : ticks) {
    const double x = f.px(v);
    out += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" class=\"grid\"/>", x,
                       x, f.mt, f.mt + f.ph);
    if (f.turn_ticks)
      out += fmt::format(
          "<text transform=\"translate({:.1f} {}) rotate(-45)\" class=\"tick\" "
          "text-anchor=\"end\">{}</text>",
          x + 3, f.mt + f.ph + 12, escape(label));
    else
      out +=
          fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                      x, f.mt + f.ph + 15, escape(label));
  }
  return out;
}

// The frame: title, plot area, grid, the reference line and the axis labels.
std::string axes(const Frame& f) {
  const LineChartOptions& o = f.o;
  std::string out;
  if (!o.title.empty())
    out += fmt::format("<text x=\"{}\" y=\"18\" class=\"ct\">{}</text>", f.ml, escape(o.title));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"plot\"/>", f.ml,
                     f.mt, f.pw, f.ph);
  out += y_grid(f) + x_grid(f);
  if (o.reference_y) {
    const double y = f.py(*o.reference_y);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"ref\"/>",
                       f.ml, f.ml + f.pw, y, y);
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
                     f.ml + f.pw / 2, f.mt + f.ph + (f.turn_ticks ? 52 : 32), escape(o.x_label));
  out += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" class=\"axis\" "
      "text-anchor=\"middle\">{}</text>",
      f.mt + f.ph / 2, escape(o.y_label));
  return out;
}

// One series: its polyline (when drawn as a line), its dots (markers, or the dots of a series
// without a line), and its legend entry (entry k of the legend grid), each in a group with
// data-series="k" (g.series and g.legend-entry) for a page's script to show or hide.
std::string series_svg(const Frame& f, const Series& s, const std::string& color, size_t k) {
  std::string points, dots;
  size_t n = 0;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) n += f.plotted(s.y[i]);
  // A line without markers but with a shape shows it at about 8 points along it (its
  // second cue); a single point is always drawn, or the line would not show at all.
  const size_t every = s.markers || !s.line ? 1 : s.shape.empty() ? 0 : std::max<size_t>(1, n / 8);
  size_t j = 0;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!f.plotted(s.y[i])) continue;
    const double x = f.px(s.x[i]), y = std::clamp(f.py(s.y[i]), f.mt, f.mt + f.ph);
    points += fmt::format("{:.1f},{:.1f} ", x, y);
    if (n == 1 || (every > 0 && j % every == 0))
      dots += marker(s.shape, x, y, s.line ? 2.8 : 3.6, color, s.opacity);
    ++j;
  }
  const std::string dash = !s.dash.empty() ? s.dash : s.dashed ? "5 3" : "";
  std::string out = fmt::format("<g class=\"series\" data-series=\"{}\">", k);
  if (!points.empty() && s.line) {
    out += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" stroke-opacity=\"{}\" "
        "{}points=\"{}\"/>",
        color, s.opacity, dash.empty() ? "" : "stroke-dasharray=\"" + dash + "\" ", points);
  }
  out += dots + fmt::format("</g><g class=\"legend-entry\" data-series=\"{}\">", k);
  const double lx = f.ml + (k % f.legend_cols) * (f.pw / f.legend_cols);
  const double ly = f.o.height + 4 + (k / f.legend_cols) * 18.0;
  if (s.line) {
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"2.5\"{}/>",
        lx, lx + 16, ly, ly, color, dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"");
    if (!s.shape.empty() || s.markers) out += marker(s.shape, lx + 8, ly, 2.8, color);
  } else {
    out += marker(s.shape, lx + 8, ly, 3.6, color);
  }
  out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text>", lx + 20, ly + 4,
                     escape(s.name));
  return out + "</g>";
}

}  // namespace

std::string line_chart(std::span<const Series> series, const LineChartOptions& o) {
  const Frame f = make_frame(series, o);
  std::string out = svg_open(o.width, o.height + f.legend_h, o.title);
  out += axes(f);
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    out += series_svg(f, s, s.color.empty() ? palette(static_cast<int>(k)) : s.color, k);
  }
  if (o.reference_y)  // over the lines and dots, on a white halo, so that none hides it
    out +=
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick halo\" text-anchor=\"end\">{}</text>",
                    f.ml + f.pw - 3, f.py(*o.reference_y) - 3, tick_text(*o.reference_y, 0.01));
  out += "</svg>";
  return out;
}

}  // namespace headlab::svg
