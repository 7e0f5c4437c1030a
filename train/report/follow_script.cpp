// Two small behaviours of the run report that other sections' markup asks for: the composition
// figure following the attention explorer's sentence menu, and the per-head timeline's toggles
// (with 16 to 32 heads the chart is only readable one head or a few at a time). Plain ES2015,
// no modules or requests.

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

std::string series_toggles(const std::string& label, const std::vector<std::string>& names,
                           const std::vector<std::string>& shorts,
                           const std::vector<std::string>& colors) {
  std::string out = "<div class=\"toggles\" role=\"group\" hidden aria-label=\"" +
                    svg::escape(label) + "\"><button type=\"button\" data-all=\"1\">all</button>";
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string name = svg::escape(names[k]);
    out += fmt::format(
        "<span class=\"toggle\" title=\"{1}\"><label><input type=\"checkbox\" checked "
        "data-series=\"{0}\" aria-label=\"Show {1}\"><i class=\"hv-swatch\" "
        "style=\"background:{2}\"></i>{3}</label><button type=\"button\" data-only=\"{0}\" "
        "aria-label=\"Show only {1}\">only</button></span>",
        k, name, k < colors.size() ? colors[k] : "currentColor",
        svg::escape(k < shorts.size() ? shorts[k] : names[k]));
  }
  return out + "</div>";
}

// Shows the div.comp-path whose data-example is the sentence picked in #att-sentence.
const char* const kCompositionScript = R"js(
(function () {
  'use strict';
  var sentence = document.getElementById('att-sentence');
  var paths = document.querySelectorAll('#composition .comp-path');
  if (!sentence || !paths.length) return;
  function show() {
    Array.prototype.forEach.call(paths, function (p) {
      p.hidden = p.getAttribute('data-example') !== sentence.value;
    });
  }
  sentence.addEventListener('change', show);
  show();
})();
)js";

// The toggles of series_toggles under #tl-heads: a checkbox hides its series' lines and dims
// its legend entry; "only" leaves one series; "all" brings every one back.
const char* const kTimelineScript = R"js(
(function () {
  'use strict';
  var box = document.getElementById('tl-heads');
  if (!box) return;
  var svg = box.querySelector('svg'), group = box.querySelector('.toggles');
  if (!svg || !group) return;
  var boxes = group.querySelectorAll('input[data-series]');
  function apply() {
    Array.prototype.forEach.call(boxes, function (b) {
      var k = b.getAttribute('data-series');
      var line = svg.querySelector('g.series[data-series="' + k + '"]');
      var entry = svg.querySelector('g.legend-entry[data-series="' + k + '"]');
      if (line) line.style.display = b.checked ? '' : 'none';
      if (entry) entry.style.opacity = b.checked ? '' : '0.3';
    });
  }
  group.addEventListener('change', apply);
  group.addEventListener('click', function (ev) {
    var t = ev.target;
    if (t.tagName !== 'BUTTON') return;
    var only = t.getAttribute('data-only');
    Array.prototype.forEach.call(boxes, function (b) {
      b.checked = only === null || b.getAttribute('data-series') === only;
    });
    apply();
  });
  group.hidden = false;
  apply();
})();
)js";

}  // namespace headlab::report_parts
