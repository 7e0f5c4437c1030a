// svg::strip_chart: every point of every category (a sweep's seeds per setting), with the
// category's mean and spread.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/svg/svg.h"

namespace headlab::svg {
namespace {

struct Frame {
  const StripChartOptions& o;
  double ml = 56, mr = 14, mt = 30, mb = 44, pw = 0, ph = 0, y0 = 0, y1 = 1, band = 1;
  double py(double v) const { return mt + (1.0 - (v - y0) / (y1 - y0)) * ph; }
  double cx(size_t g) const { return ml + (g + 0.5) * band; }
};

Frame make_frame(std::span<const StripGroup> groups, const StripChartOptions& o) {
  Frame f{o};
  f.mt = o.title.empty() ? 10 : 30;
  f.pw = o.width - f.ml - f.mr;
  f.ph = o.height - f.mt - f.mb;
  f.band = f.pw / std::max<size_t>(1, groups.size());
  double lo = INFINITY, hi = -INFINITY;
  for (const StripGroup& g : groups)
    for (const StripPoint& p : g.points)
      if (std::isfinite(p.value)) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  f.y0 = o.y_min.value_or(lo);
  f.y1 = o.y_max.value_or(hi);
  if (f.y1 <= f.y0) f.y1 = f.y0 + std::max(1e-3, std::abs(f.y0) * 0.1);
  return f;
}

std::string axes(const Frame& f, std::span<const StripGroup> groups) {
  const StripChartOptions& o = f.o;
  std::string out;
  if (!o.title.empty())
    out += fmt::format("<text x=\"{}\" y=\"18\" class=\"ct\">{}</text>", f.ml, escape(o.title));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"plot\"/>", f.ml,
                     f.mt, f.pw, f.ph);
  const std::vector<double> ticks = nice_ticks(f.y0, f.y1, 5);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
  for (double v : ticks)
    out += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/><text x=\"{}\" "
        "y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>",
        f.ml, f.ml + f.pw, f.py(v), f.py(v), f.ml - 5, f.py(v) + 4, tick_text(v, step));
  for (size_t g = 0; g < groups.size(); ++g)
    out +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                    f.cx(g), f.mt + f.ph + 15, escape(groups[g].label));
  if (o.reference_y)
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"ref\"/>",
                       f.ml, f.ml + f.pw, f.py(*o.reference_y), f.py(*o.reference_y));
  out += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
                     f.ml + f.pw / 2, f.mt + f.ph + 34, escape(o.x_label));
  out += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" class=\"axis\" "
      "text-anchor=\"middle\">{}</text>",
      f.mt + f.ph / 2, escape(o.y_label));
  return out;
}

// Category g: its dots side by side, then its mean tick and spread line over them.
std::string category(const Frame& f, const StripGroup& group, size_t g) {
  const std::string color = group.color.empty() ? palette(static_cast<int>(g)) : group.color;
  std::vector<double> values;
  for (const StripPoint& p : group.points)
    if (std::isfinite(p.value)) values.push_back(p.value);
  const double gap = std::min(11.0, f.band * 0.6 / std::max<size_t>(1, values.size()));
  std::string out;
  size_t j = 0;
  for (const StripPoint& p : group.points) {
    if (!std::isfinite(p.value)) continue;
    const double x = f.cx(g) + (j++ - (values.size() - 1) / 2.0) * gap;
    const double y = std::clamp(f.py(p.value), f.mt, f.mt + f.ph);
    const std::string dot = fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"{}\" fill-opacity=\"0.8\" "
        "stroke=\"#fff\" stroke-width=\"1\"><title>{}</title></circle>",
        x, y, color, escape(p.title));
    out += p.href.empty() ? dot
                          : "<a href=\"" + escape(p.href) + "\" aria-label=\"" + escape(p.title) +
                                "\">" + dot + "</a>";
  }
  if (values.empty()) return out;
  double mean = 0, ss = 0;
  for (double v : values) mean += v / values.size();
  for (double v : values) ss += (v - mean) * (v - mean);
  const double sd = values.size() > 1 ? std::sqrt(ss / (values.size() - 1)) : 0.0;
  const double half = std::max(12.0, gap * values.size() / 2 + 6);
  const auto y = [&](double v) { return std::clamp(f.py(v), f.mt, f.mt + f.ph); };
  out += fmt::format(
      "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#1f2430\" "
      "stroke-width=\"1.2\" pointer-events=\"none\"/><line x1=\"{3:.1f}\" x2=\"{4:.1f}\" "
      "y1=\"{5:.1f}\" y2=\"{5:.1f}\" stroke=\"#1f2430\" stroke-width=\"2.2\" "
      "pointer-events=\"none\"/><text x=\"{4:.1f}\" y=\"{6:.1f}\" class=\"val\" "
      "dx=\"3\">{7}</text>",
      f.cx(g), y(mean - sd), y(mean + sd), f.cx(g) - half, f.cx(g) + half, y(mean), y(mean) + 4,
      number(mean, f.o.digits));
  return out;
}

}  // namespace

std::string strip_chart(std::span<const StripGroup> groups, const StripChartOptions& o) {
  const Frame f = make_frame(groups, o);
  bool links = false;
  for (const StripGroup& g : groups)
    for (const StripPoint& p : g.points) links = links || !p.href.empty();
  std::string out = svg_open(o.width, o.height, o.title, links);
  out += axes(f, groups);
  for (size_t g = 0; g < groups.size(); ++g) out += category(f, groups[g], g);
  if (o.reference_y)  // over the dots, on a white halo, so that none hides it
    out +=
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick halo\" text-anchor=\"end\">{}</text>",
                    f.ml + f.pw - 3, f.py(*o.reference_y) - 3, tick_text(*o.reference_y, 0.01));
  return out + "</svg>";
}

}  // namespace headlab::svg
