// The "views" section of the run report (sections.h): the model view (every layer x head as a
// small map of the picked sentence, as bertviz and CircuitsVis show them) and the head view (the
// sentence twice, lines from each query to its keys weighted by attention, several heads
// overlaid in their own colours). Both are drawn by views_script.cpp from the weights the
// attention explorer embeds (#att-data) and follow its sentence menu; this file gives them
// their frame, their help text and the heads' colours.

#include <algorithm>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {
namespace {

using nlohmann::json;

// The most map cells the model view draws as SVG rectangles (layers x heads x T x T); past it
// the page would hold hundreds of thousands of elements and the explorer is the better view.
constexpr int64_t kMaxModelViewCells = 120'000;

// The report's categorical palette for the head view's overlaid heads (the script gives its
// colours to the ticked heads in order: no two overlaid heads share one up to its length).
std::string colors_json(int64_t heads) {
  std::vector<std::string> colors;  // the palette once round, at most one per head
  for (int k = 0; k < heads && k < 64; ++k) {
    const std::string c = svg::palette(k);
    if (std::find(colors.begin(), colors.end(), c) != colors.end()) break;
    colors.push_back(c);
  }
  return "<script type=\"application/json\" id=\"views-data\">" + json{{"colors", colors}}.dump() +
         "</script>";
}

std::string model_view(int64_t cells) {
  if (cells > kMaxModelViewCells)
    return missing(fmt::format(
        "The model view is left out: {} cells (layers x heads x tokens x tokens) are more than "
        "{} to draw at once; the explorer above shows every head.",
        cells, kMaxModelViewCells));
  return "<h3 id=\"mv-title\">Model view</h3><p class=\"lede\">Every head of every layer on the "
         "sentence picked above (rows: layers, columns: heads; in each map rows are queries, "
         "columns keys, darker is more weight). Click a map, or focus it and press Enter, to "
         "open that head in the explorer.</p><div class=\"views-scroll\"><div class=\"mv-grid\" "
         "id=\"mv-grid\" role=\"group\" aria-labelledby=\"mv-title\"></div></div>";
}

std::string head_view() {
  return "<h3 id=\"hv-title\">Head view</h3><p class=\"lede\">The sentence twice: queries on "
         "the left, the keys they attend to on the right, a line from query to key as opaque "
         "as its weight (lines under 0.01 are left out). Tick heads to overlay them, each in "
         "its own colour; hover or focus a token to keep only its lines.</p>"
         "<div class=\"hv-heads\" id=\"hv-heads\" role=\"group\" aria-label=\"Heads drawn in "
         "the head view\"></div><div class=\"views-scroll\" id=\"hv-box\"></div>"
         "<p class=\"readout\" id=\"hv-readout\" aria-live=\"polite\"></p>";
}

}  // namespace

std::string views_body(const RunView& v) {
  if (!attention_embedded(v.files)) return "";
  const std::vector<int64_t>& s = v.files.attention.shape;  // [examples, L, H, T, T]
  return lede(
             "Two more views of the weights in the attention explorer above, for the same "
             "sentence (they follow its sentence menu).") +
         "<noscript><p class=\"note\">Scripts are off: these views are drawn by the page's "
         "script.</p></noscript>" +
         model_view(s[1] * s[2] * s[3] * s[4]) + head_view() + colors_json(s[1] * s[2]);
}

}  // namespace headlab::report_parts
