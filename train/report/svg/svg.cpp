#include "train/report/svg/svg.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace headlab::svg {
namespace {

struct Rgb {
  double r, g, b;
};

// Anchors of the sequential scale (ColorBrewer Blues, 5 classes).
constexpr std::array<Rgb, 5> kBlues = {
    {{247, 251, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}}};

std::string hex(const Rgb& c) {
  auto clamp8 = [](double v) { return static_cast<int>(std::clamp(std::lround(v), 0L, 255L)); };
  return fmt::format("#{:02x}{:02x}{:02x}", clamp8(c.r), clamp8(c.g), clamp8(c.b));
}

}  // namespace

std::string tick_text(double v, double step) {
  if (v != 0.0 && (std::abs(v) >= 1e5 || std::abs(v) < 1e-3)) return fmt::format("{:.0e}", v);
  // As many decimals as the step needs (0.25 -> 2, 0.2 -> 1, 50 -> 0).
  int decimals = 0;
  for (double scaled = step; decimals < 6 && std::abs(scaled - std::round(scaled)) > 1e-6 * scaled;
       scaled *= 10)
    ++decimals;
  return fmt::format("{:.{}f}", v, decimals);
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double value, int digits) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:.{}f}", value, digits);
}

std::string palette(int i) {
  // Okabe-Ito (blue, vermillion, bluish green, reddish purple, orange, sky blue, yellow, black),
  // the lighter hues darkened to 4.5:1 on white so that text and thin lines in them stay legible.
  static const std::array<const char*, 8> kOkabeIto = {"#0072b2", "#b34e00", "#007a5a", "#a84f86",
                                                       "#9a6a00", "#2a6f97", "#7a6f00", "#1f2430"};
  return kOkabeIto[static_cast<size_t>(((i % 8) + 8) % 8)];
}

std::string sequential(double t) {
  if (std::isnan(t)) return "#eeeeee";
  t = std::clamp(t, 0.0, 1.0) * (kBlues.size() - 1);
  const size_t i = std::min(static_cast<size_t>(t), kBlues.size() - 2);
  const double f = t - static_cast<double>(i);
  const Rgb& a = kBlues[i];
  const Rgb& b = kBlues[i + 1];
  return hex({a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f});
}

bool dark(double t) {
  // Where black and white text on the scale both reach 4.5:1 (black 4.57 just below, white 4.57
  // just above): at 0.55, as before, white text had 2.8:1.
  return !std::isnan(t) && t > 0.715;
}

std::string svg_open(double w, double h, std::string_view label, bool interactive) {
  const std::string name = label.empty()
                               ? ""
                               : fmt::format(" role=\"{}\" aria-label=\"{}\"",
                                             interactive ? "group" : "img", escape(label));
  return fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" "
      "height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\"{2}>",
      w, h, name);
}

std::string marker(std::string_view shape, double x, double y, double r, std::string_view color,
                   double opacity) {
  const std::string paint = fmt::format("fill=\"{}\" fill-opacity=\"{}\"", color, opacity);
  if (shape == "square")
    return fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" {}/>",
                       x - r * 0.9, y - r * 0.9, r * 1.8, r * 1.8, paint);
  if (shape == "triangle")
    return fmt::format("<path d=\"M{:.1f} {:.1f}L{:.1f} {:.1f}L{:.1f} {:.1f}Z\" {}/>", x,
                       y - r * 1.2, x + r * 1.1, y + r * 0.8, x - r * 1.1, y + r * 0.8, paint);
  if (shape == "diamond")
    return fmt::format("<path d=\"M{:.1f} {:.1f}L{:.1f} {:.1f}L{:.1f} {:.1f}L{:.1f} {:.1f}Z\" {}/>",
                       x, y - r * 1.25, x + r * 1.25, y, x, y + r * 1.25, x - r * 1.25, y, paint);
  return fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" {}/>", x, y, r, paint);
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, count);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::ceil(lo / step - 1e-9);
  for (double k = first; k * step <= hi + step * 1e-9; k += 1)
    ticks.push_back(k == 0 ? 0.0 : k * step);
  return ticks;
}

std::string bar_chart(std::span<const Bar> bars, const BarChartOptions& o) {
  size_t max_label = 0, max_note = 0;
  for (const Bar& b : bars) {
    max_label = std::max(max_label, b.label.size());
    max_note = std::max(max_note, b.note.size());
  }
  double lo = o.vmin.value_or(0.0), hi = o.vmax.value_or(0.0);
  for (const Bar& b : bars) {
    if (!o.vmin && std::isfinite(b.value)) lo = std::min(lo, b.value);
    if (!o.vmax && std::isfinite(b.value)) hi = std::max(hi, b.value);
  }
  if (hi <= lo) hi = lo + 1.0;
  const double ml = 12 + max_label * 7.0;
  const double mt =
      (o.title.empty() ? 8 : 28) + (o.reference && !o.reference_label.empty() ? 14 : 0);
  const double mr = 52 + max_note * 7.0;
  const double pw = std::max(80.0, o.width - ml - mr);
  const double ph = static_cast<double>(bars.size()) * (o.bar_height + 6);
  const double h = mt + ph + 36;
  auto px = [&](double v) { return ml + (std::clamp(v, lo, hi) - lo) / (hi - lo) * pw; };

  std::string out = svg_open(o.width, h, o.title);
  if (!o.title.empty())
    out += fmt::format("<text x=\"4\" y=\"18\" class=\"ct\">{}</text>", escape(o.title));
  const std::vector<double> ticks = nice_ticks(lo, hi, 4);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
  for (double v : ticks) {
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{:.1f}\" class=\"grid\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
        px(v), px(v), mt, mt + ph, px(v), mt + ph + 14, tick_text(v, step));
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = mt + i * (o.bar_height + 6.0) + 3;
    const double x0 = px(std::max(lo, 0.0)), x1 = px(std::isfinite(b.value) ? b.value : 0.0);
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lab\" text-anchor=\"end\">{}</text>"
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" rx=\"2\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"val\">{}</text>",
        ml - 6, y + o.bar_height * 0.7, escape(b.label), std::min(x0, x1), y, std::abs(x1 - x0),
        o.bar_height, b.color.empty() ? palette(0) : b.color, std::max(x0, x1) + 4,
        y + o.bar_height * 0.7,
        escape(number(b.value, o.digits) + (b.note.empty() ? "" : "  " + b.note)));
  }
  if (o.reference) {
    const double x = px(*o.reference);
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{:.1f}\" class=\"ref\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick halo\" text-anchor=\"middle\">{}</text>",
        x, x, mt - 4, mt + ph, x, mt - 6, escape(o.reference_label));
  }
  out +=
      fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
                  ml + pw / 2, mt + ph + 30, escape(o.value_label));
  out += "</svg>";
  return out;
}

}  // namespace headlab::svg
