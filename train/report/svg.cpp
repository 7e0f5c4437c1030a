#include "train/report/svg.h"

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

std::string tick_text(double v, double step) {
  if (v != 0.0 && (std::abs(v) >= 1e5 || std::abs(v) < 1e-3)) return fmt::format("{:.0e}", v);
  // As many decimals as the step needs (0.25 -> 2, 0.2 -> 1, 50 -> 0).
  int decimals = 0;
  for (double scaled = step; decimals < 6 && std::abs(scaled - std::round(scaled)) > 1e-6 * scaled;
       scaled *= 10)
    ++decimals;
  return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace

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
  static const std::array<const char*, 10> kTableau = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                       "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                                                       "#9c755f", "#bab0ac"};
  return kTableau[static_cast<size_t>(((i % 10) + 10) % 10)];
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
  return !std::isnan(t) && t > 0.55;
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

std::string line_chart(std::span<const Series> series, const LineChartOptions& o) {
  const double ml = 56, mr = 14, mt = o.title.empty() ? 10 : 30, mb = 42;
  size_t longest = 1;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const int legend_cols = std::clamp(static_cast<int>((o.width - 70) / (longest * 6.2 + 30)), 1, 3);
  const int legend_rows = (static_cast<int>(series.size()) + legend_cols - 1) / legend_cols;
  const double legend_h = 18.0 * legend_rows + 4;
  const double pw = o.width - ml - mr, ph = o.height - mt - mb;
  auto ty = [&](double v) { return o.log_y ? std::log10(v) : v; };

  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (o.log_y && s.y[i] <= 0)) continue;
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i]));
      y1 = std::max(y1, ty(s.y[i]));
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (o.y_min) y0 = ty(*o.y_min);
  if (o.y_max) y1 = ty(*o.y_max);
  if (!o.x_ticks.empty()) {
    for (const auto& t : o.x_ticks) x0 = std::min(x0, t.first), x1 = std::max(x1, t.first);
    x0 -= 0.5;
    x1 += 0.5;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + (o.log_y ? 1 : std::max(1e-9, std::abs(y0) * 0.1 + 1e-3));
  if (o.log_y) y0 = std::floor(y0), y1 = std::ceil(y1);
  auto px = [&](double x) { return ml + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return mt + (1.0 - (ty(y) - y0) / (y1 - y0)) * ph; };

  std::string out = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\">",
      o.width, o.height + legend_h, o.width, o.height + legend_h);
  if (!o.title.empty()) {
    out += fmt::format("<text x=\"{}\" y=\"18\" class=\"ct\">{}</text>", ml, escape(o.title));
  }
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"plot\"/>", ml, mt,
                     pw, ph);
  // Grid and ticks.
  std::vector<double> yt;
  if (o.log_y) {
    for (double e = y0; e <= y1 + 1e-9; e += 1) yt.push_back(std::pow(10.0, e));
  } else {
    yt = nice_ticks(y0, y1, 5);
  }
  const double ystep = yt.size() > 1 ? std::abs(yt[1] - yt[0]) : 1.0;
  for (double v : yt) {
    const double y = py(v);
    out += fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>", ml,
                       ml + pw, y, y);
    out += fmt::format("<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>",
                       ml - 5, y + 4, o.log_y ? fmt::format("{:g}", v) : tick_text(v, ystep));
  }
  std::vector<std::pair<double, std::string>> xt = o.x_ticks;
  if (xt.empty()) {
    const std::vector<double> ticks = nice_ticks(x0, x1, 5);
    const double xstep = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
    for (double v : ticks) xt.emplace_back(v, tick_text(v, xstep));
  }
  for (const auto& [v, label] : xt) {
    const double x = px(v);
    out += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{}\" class=\"grid\"/>", x,
                       x, mt, mt + ph);
    out +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                    x, mt + ph + 15, escape(label));
  }
  if (o.reference_y) {
    const double y = py(*o.reference_y);
    out += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"ref\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>",
        ml, ml + pw, y, y, ml + pw - 3, y - 3, tick_text(*o.reference_y, 0.01));
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
                     ml + pw / 2, mt + ph + 32, escape(o.x_label));
  out += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" class=\"axis\" "
      "text-anchor=\"middle\">{}</text>",
      mt + ph / 2, escape(o.y_label));

  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const std::string color = s.color.empty() ? palette(static_cast<int>(k)) : s.color;
    std::string points;
    std::string dots;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || (o.log_y && s.y[i] <= 0)) continue;
      const double x = px(s.x[i]), y = std::clamp(py(s.y[i]), mt, mt + ph);
      points += fmt::format("{:.1f},{:.1f} ", x, y);
      if (s.markers || !s.line) {
        dots += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" fill-opacity=\"{}\"/>", x, y,
            s.line ? 2.6 : 3.6, color, s.opacity);
      }
    }
    if (!points.empty() && s.line) {
      out += fmt::format(
          "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" stroke-opacity=\"{}\" "
          "{}points=\"{}\"/>",
          color, s.opacity, s.dashed ? "stroke-dasharray=\"5 3\" " : "", points);
    }
    out += dots;
    const double lx = ml + (k % legend_cols) * (pw / legend_cols);
    const double ly = o.height + 4 + (k / legend_cols) * 18.0;
    if (s.line) {
      out += fmt::format(
          "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
          "stroke-width=\"2.5\"{}/>",
          lx, lx + 16, ly, ly, color, s.dashed ? " stroke-dasharray=\"5 3\"" : "");
    } else {
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.6\" fill=\"{}\"/>", lx + 8, ly,
                         color);
    }
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"legend\">{}</text>", lx + 20,
                       ly + 4, escape(s.name));
  }
  out += "</svg>";
  return out;
}

std::string heatmap(int rows, int cols, std::span<const double> values, const HeatmapOptions& o) {
  size_t max_row_label = 0, max_col_label = 0, max_note = 0;
  for (const auto& s : o.row_labels) max_row_label = std::max(max_row_label, s.size());
  for (const auto& s : o.col_labels) max_col_label = std::max(max_col_label, s.size());
  for (const auto& s : o.row_notes) max_note = std::max(max_note, s.size());
  const double char_w = o.cell < 24 ? 6.2 : 7.2;
  const double ml = 10 + max_row_label * char_w + (o.y_label.empty() ? 0 : 18);
  const double mt =
      (o.title.empty() ? 6 : 28) + (o.rotate_col_labels ? max_col_label * char_w * 0.75 + 8 : 20);
  const double mr = 10 + max_note * 7.5;
  const double mb = o.x_label.empty() ? 8 : 24;
  const double w = ml + cols * o.cell + mr, h = mt + rows * o.cell + mb;
  const double fs = o.cell < 24 ? 9 : 11;

  std::string out = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" "
      "height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\">",
      w, h, w, h);
  if (!o.title.empty()) {
    out += fmt::format("<text x=\"{:.1f}\" y=\"18\" class=\"ct\">{}</text>", 4.0, escape(o.title));
  }
  for (int c = 0; c < cols && c < static_cast<int>(o.col_labels.size()); ++c) {
    const double x = ml + (c + 0.5) * o.cell;
    const std::string color =
        c < static_cast<int>(o.col_label_colors.size()) && !o.col_label_colors[c].empty()
            ? fmt::format(" fill=\"{}\"", o.col_label_colors[c])
            : "";
    if (o.rotate_col_labels) {
      out += fmt::format(
          "<text transform=\"translate({:.1f} {:.1f}) rotate(-55)\" class=\"lab\" "
          "font-size=\"{}\"{}>{}</text>",
          x + 3, mt - 5, fs, color, escape(o.col_labels[c]));
    } else {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lab\" text-anchor=\"middle\" "
          "font-size=\"{}\"{}>{}</text>",
          x, mt - 6, fs, color, escape(o.col_labels[c]));
    }
  }
  for (int r = 0; r < rows; ++r) {
    const double y = mt + r * o.cell;
    if (r < static_cast<int>(o.row_labels.size())) {
      const std::string color =
          r < static_cast<int>(o.row_label_colors.size()) && !o.row_label_colors[r].empty()
              ? fmt::format(" fill=\"{}\"", o.row_label_colors[r])
              : "";
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lab\" text-anchor=\"end\" "
          "font-size=\"{}\"{}>{}</text>",
          ml - 5, y + o.cell / 2.0 + fs / 2.8, fs, color, escape(o.row_labels[r]));
    }
    for (int c = 0; c < cols; ++c) {
      const double v = values[static_cast<size_t>(r) * cols + c];
      const double t = (v - o.vmin) / (o.vmax - o.vmin);
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title>"
          "</rect>",
          ml + c * o.cell, y, o.cell, o.cell, sequential(t), number(v, 3));
      if (o.show_values) {
        out += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"cv\" text-anchor=\"middle\" "
            "font-size=\"{}\" fill=\"{}\">{}</text>",
            ml + (c + 0.5) * o.cell, y + o.cell / 2.0 + fs / 2.8, fs,
            dark(t) ? "#ffffff" : "#222222", number(v, o.digits));
      }
    }
    if (r < static_cast<int>(o.row_notes.size()) && !o.row_notes[r].empty()) {
      const std::string color =
          r < static_cast<int>(o.row_note_colors.size()) ? o.row_note_colors[r] : "#333";
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"note\" font-size=\"{}\" fill=\"{}\">{}</text>",
          ml + cols * o.cell + 8, y + o.cell / 2.0 + fs / 2.8, fs + 1, color,
          escape(o.row_notes[r]));
    }
  }
  out += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#999\" stroke-width=\"0.6\"/>",
      ml, mt, cols * o.cell, rows * o.cell);
  for (const CellMark& m : o.marks) {
    const double x = ml + m.col * o.cell, y = mt + m.row * o.cell;
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
        "stroke=\"{}\" stroke-width=\"{}\"/>",
        x + 1, y + 1, o.cell - 2.0, o.cell - 2.0, m.color, o.cell < 20 ? 1.3 : 1.8);
    if (!m.letter.empty()) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:.0f}\" font-weight=\"bold\" "
          "fill=\"{}\">{}</text>",
          x + 2.5, y + o.cell * 0.38, std::max(6.0, o.cell * 0.32), m.color, escape(m.letter));
    }
  }
  if (!o.x_label.empty()) {
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
        ml + cols * o.cell / 2.0, h - 6, escape(o.x_label));
  }
  if (!o.y_label.empty()) {
    out += fmt::format(
        "<text transform=\"translate(12 {:.1f}) rotate(-90)\" class=\"axis\" "
        "text-anchor=\"middle\">{}</text>",
        mt + rows * o.cell / 2.0, escape(o.y_label));
  }
  out += "</svg>";
  return out;
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

  std::string out = fmt::format(
      "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {} {:.0f}\" role=\"img\">",
      o.width, h, o.width, h);
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
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
        x, x, mt - 4, mt + ph, x, mt - 6, escape(o.reference_label));
  }
  out +=
      fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
                  ml + pw / 2, mt + ph + 30, escape(o.value_label));
  out += "</svg>";
  return out;
}

}  // namespace headlab::svg
