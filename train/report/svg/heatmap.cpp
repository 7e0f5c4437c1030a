// svg::heatmap: a rows x cols grid of coloured cells with labels, notes and outlined cells.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/svg/svg.h"

namespace headlab::svg {
namespace {

// Margins and sizes, from the longest labels.
struct Layout {
  const HeatmapOptions& o;
  int rows, cols;
  double ml = 0, mt = 0, mr = 0, mb = 0, w = 0, h = 0, fs = 0;
  double cell_y(int r) const { return mt + r * o.cell; }
  double text_y(int r) const { return cell_y(r) + o.cell / 2.0 + fs / 2.8; }
};

Layout make_layout(int rows, int cols, const HeatmapOptions& o) {
  size_t max_row_label = 0, max_col_label = 0, max_note = 0;
  for (const auto& s : o.row_labels) max_row_label = std::max(max_row_label, s.size());
  for (const auto& s : o.col_labels) max_col_label = std::max(max_col_label, s.size());
  for (const auto& s : o.row_notes) max_note = std::max(max_note, s.size());
  const double char_w = o.cell < 24 ? 6.2 : 7.2;
  Layout l{o, rows, cols};
  l.ml = 10 + max_row_label * char_w + (o.y_label.empty() ? 0 : 18);
  l.mt =
      (o.title.empty() ? 6 : 28) + (o.rotate_col_labels ? max_col_label * char_w * 0.75 + 8 : 20);
  l.mr = 10 + max_note * 7.5;
  l.mb = o.x_label.empty() ? 8 : 24;
  // At least as wide as the title (13 px bold, about 7.6 px a character), which is not cut.
  l.w = std::max(l.ml + cols * o.cell + l.mr, 8 + o.title.size() * 7.6);
  l.h = l.mt + rows * o.cell + l.mb;
  l.fs = o.cell < 24 ? 9 : 11;
  return l;
}

// ` style="fill:<colour>"` for entry i of colours, or nothing: a style, since a page's
// stylesheet (svg .lab) wins over a fill attribute.
std::string fill_attr(const std::vector<std::string>& colours, int i) {
  return i < static_cast<int>(colours.size()) && !colours[i].empty()
             ? fmt::format(" style=\"fill:{}\"", colours[i])
             : "";
}

std::string column_labels(const Layout& l) {
  const HeatmapOptions& o = l.o;
  std::string out;
  for (int c = 0; c < l.cols && c < static_cast<int>(o.col_labels.size()); ++c) {
    const double x = l.ml + (c + 0.5) * o.cell;
    const std::string color = fill_attr(o.col_label_colors, c);
    if (o.rotate_col_labels) {
      out += fmt::format(
          "<text transform=\"translate({:.1f} {:.1f}) rotate(-55)\" class=\"lab\" "
          "font-size=\"{}\"{}>{}</text>",
          x + 3, l.mt - 5, l.fs, color, escape(o.col_labels[c]));
    } else {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lab\" text-anchor=\"middle\" "
          "font-size=\"{}\"{}>{}</text>",
          x, l.mt - 6, l.fs, color, escape(o.col_labels[c]));
    }
  }
  return out;
}

std::string cell_title(const HeatmapOptions& o, const Layout& l, int r, int c, double v) {
  const size_t i = static_cast<size_t>(r) * l.cols + c;
  if (i < o.cell_titles.size()) return escape(o.cell_titles[i]);
  return std::isnan(v) ? escape(o.nan_text) : number(v, 3);
}

// Row r: its label, its cells (each with its value as a tooltip, and written when asked) and
// its note on the right.
std::string row_svg(const Layout& l, std::span<const double> values, int r) {
  const HeatmapOptions& o = l.o;
  const double y = l.cell_y(r);
  std::string out;
  if (r < static_cast<int>(o.row_labels.size())) {
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"lab\" text-anchor=\"end\" "
        "font-size=\"{}\"{}>{}</text>",
        l.ml - 5, l.text_y(r), l.fs, fill_attr(o.row_label_colors, r), escape(o.row_labels[r]));
  }
  for (int c = 0; c < l.cols; ++c) {
    const size_t i = static_cast<size_t>(r) * l.cols + c;
    const double v = values[i];
    const double t = (v - o.vmin) / (o.vmax - o.vmin);
    const std::string title = cell_title(o, l, r, c, v);
    const bool link = i < o.cell_links.size() && !o.cell_links[i].empty();
    if (link) out += "<a href=\"" + escape(o.cell_links[i]) + "\" aria-label=\"" + title + "\">";
    // A linked cell is named by its aria-label alone: a <title> inside it would count as its
    // text, which then no longer matches the name (axe's label-content-name-mismatch).
    out += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"{}\">{}</rect>",
        l.ml + c * o.cell, y, o.cell, o.cell, sequential(t),
        link ? std::string() : "<title>" + title + "</title>");
    if (o.show_values) {
      const std::string text = i < o.cell_texts.size() ? escape(o.cell_texts[i])
                               : std::isnan(v)         ? escape(o.nan_text)
                                                       : number(v, o.digits);
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"cv\" text-anchor=\"middle\" "
          "font-size=\"{}\" fill=\"{}\">{}</text>",
          l.ml + (c + 0.5) * o.cell, l.text_y(r), l.fs, dark(t) ? "#ffffff" : "#000000", text);
    }
    if (link) out += "</a>";
  }
  if (r < static_cast<int>(o.row_notes.size()) && !o.row_notes[r].empty()) {
    const std::string color =
        r < static_cast<int>(o.row_note_colors.size()) ? o.row_note_colors[r] : "#333";
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"note\" font-size=\"{}\" fill=\"{}\">{}</text>",
        l.ml + l.cols * o.cell + 8, l.text_y(r), l.fs + 1, color, escape(o.row_notes[r]));
  }
  return out;
}

// The outline of the grid, then the outlined cells with their letters.
std::string marks_svg(const Layout& l) {
  const HeatmapOptions& o = l.o;
  std::string out = fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#999\" stroke-width=\"0.6\"/>",
      l.ml, l.mt, l.cols * o.cell, l.rows * o.cell);
  for (const CellMark& m : o.marks) {
    const double x = l.ml + m.col * o.cell, y = l.mt + m.row * o.cell;
    const std::string dash = !m.dash.empty() ? m.dash : m.dashed ? "4 3" : "";
    // A white outline under the coloured one keeps it visible on the darkest cells.
    out += fmt::format(
        "<rect x=\"{0:.1f}\" y=\"{1:.1f}\" width=\"{2:.1f}\" height=\"{2:.1f}\" fill=\"none\" "
        "stroke=\"#fff\" stroke-width=\"{4:.1f}\" stroke-opacity=\"0.8\"/><rect x=\"{0:.1f}\" "
        "y=\"{1:.1f}\" width=\"{2:.1f}\" height=\"{2:.1f}\" fill=\"none\" stroke=\"{3}\" "
        "stroke-width=\"{5}\"{6}/>",
        x + 1, y + 1, o.cell - 2.0, m.color, o.cell < 20 ? 2.6 : 3.4, o.cell < 20 ? 1.3 : 1.8,
        dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"");
    if (!m.letter.empty()) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:.0f}\" font-weight=\"bold\" "
          "class=\"halo\" fill=\"{}\">{}</text>",
          x + 3, y + std::max(7.0, o.cell * 0.34), std::max(7.0, o.cell * 0.3), m.color,
          escape(m.letter));
    }
  }
  return out;
}

std::string axis_labels(const Layout& l) {
  const HeatmapOptions& o = l.o;
  std::string out;
  if (!o.x_label.empty()) {
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
        l.ml + l.cols * o.cell / 2.0, l.h - 6, escape(o.x_label));
  }
  if (!o.y_label.empty()) {
    out += fmt::format(
        "<text transform=\"translate(12 {:.1f}) rotate(-90)\" class=\"axis\" "
        "text-anchor=\"middle\">{}</text>",
        l.mt + l.rows * o.cell / 2.0, escape(o.y_label));
  }
  return out;
}

}  // namespace

std::string heatmap(int rows, int cols, std::span<const double> values, const HeatmapOptions& o) {
  const Layout l = make_layout(rows, cols, o);
  const bool links = std::any_of(o.cell_links.begin(), o.cell_links.end(),
                                 [](const std::string& s) { return !s.empty(); });
  std::string out = svg_open(l.w, l.h, o.title, links);
  if (!o.title.empty())
    out += fmt::format("<text x=\"{:.1f}\" y=\"18\" class=\"ct\">{}</text>", 4.0, escape(o.title));
  out += column_labels(l);
  for (int r = 0; r < rows; ++r) out += row_svg(l, values, r);
  out += marks_svg(l);
  out += axis_labels(l);
  out += "</svg>";
  return out;
}

}  // namespace headlab::svg
