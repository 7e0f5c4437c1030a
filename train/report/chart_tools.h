#pragma once
// What every report page gets besides its sections (internal): the style of the views and
// controls added by views_section.cpp, follow_script.cpp and the download buttons, and the
// script that puts "SVG" and "PNG" download buttons under every chart (chart_download.cpp).

namespace headlab::report_parts {

// CSS for the model and head views, the series toggles and the download buttons (colours from
// the page's variables, so a palette change in the main style reaches them).
extern const char* const kViewsStyle;
// Under every figure.figure, #att-map and #hv-box: buttons that download the chart drawn there
// as a standalone SVG file (the page's style inlined, the chart's title, the section's relation
// legend and the figure's caption included) or as a PNG drawn from it on a canvas. The files
// are data: URLs, so the page still makes no request.
extern const char* const kChartDownloadScript;

}  // namespace headlab::report_parts
