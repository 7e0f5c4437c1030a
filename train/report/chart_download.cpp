// Charts for papers (chart_tools.h): the download buttons under every chart, and the style of
// the views and controls this branch of the report adds. Plain ES2015, no modules or requests.

#include "train/report/chart_tools.h"

namespace headlab::report_parts {

const char* const kViewsStyle = R"css(
.views-scroll { overflow-x: auto; max-width: 100%; }
section h3 { margin: 14px 0 4px; font-size: 15px; }
.mv-grid { display: grid; gap: 4px 6px; align-items: center; justify-content: start; }
.mv-grid .mv-col, .mv-grid .mv-row { font-size: 11px; color: var(--muted); white-space: nowrap; }
svg.mv-map { cursor: pointer; border: 2px solid transparent; border-radius: 3px; }
svg.mv-map.on { border-color: var(--accent); }
svg.mv-map:focus-visible, svg .hv-tok:focus-visible { outline: 2px solid var(--accent); outline-offset: 1px; }
svg .mv-frame { fill: none; stroke: var(--line); }
.hv-heads, .toggles { display: flex; flex-wrap: wrap; gap: 4px 12px; margin: 4px 0 8px; font-size: 12px;
  align-items: center; max-width: 980px; }
.toggle { white-space: nowrap; }
.tl-heads { max-width: 480px; }
.hv-swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin: 0 4px 0 2px;
  vertical-align: -1px; }
.hv-heads .hv-swatch { border: 1px solid var(--muted); }
svg .hv-line.off { visibility: hidden; }
svg .hv-tok:hover, svg .hv-tok:focus { font-weight: 700; }
.toggles button, .hv-heads button, .chart-dl button { font: inherit; font-size: 11px; padding: 0 6px;
  margin-left: 3px; }
.chart-dl { display: flex; gap: 6px; margin: 4px 0 0; font-size: 11px; color: var(--muted); }
@media print { .chart-dl, .toggles button, .hv-heads button { display: none; } }
)css";

const char* const kChartDownloadScript = R"js(
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';

  function node(name, attrs, text) {
    var n = document.createElementNS(NS, name);
    for (var a in attrs) n.setAttribute(a, attrs[a]);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function pageStyle() {
    return Array.prototype.map.call(document.querySelectorAll('style'), function (s) {
      return s.textContent;
    }).join('\n');
  }

  // The chart's title: its own title text, else its section's heading.
  function titleOf(box, svg) {
    var ct = svg.querySelector('text.ct');
    if (ct && ct.textContent.trim()) return {text: ct.textContent.trim(), drawn: true};
    var section = box.closest('section'), h = section && section.querySelector('h2');
    return {text: h ? h.textContent.trim() : document.title, drawn: false};
  }

  // The relation colours of the chart's section (p.legend-inline), as [name, colour] pairs.
  function legendOf(box) {
    var section = box.closest('section'), out = [];
    var p = section && section.querySelector('.legend-inline');
    if (!p) return out;
    Array.prototype.forEach.call(p.querySelectorAll('span'), function (s) {
      var i = s.querySelector('i');
      out.push([s.textContent.trim(), i ? getComputedStyle(i).borderTopColor : 'currentColor']);
    });
    return out;
  }

  function wrap(text, width) {
    var lines = [], line = '';
    text.split(/\s+/).forEach(function (word) {
      if (line && (line + ' ' + word).length > width) { lines.push(line); line = word; }
      else line = line ? line + ' ' + word : word;
    });
    if (line) lines.push(line);
    return lines;
  }

  // The chart in `box` as a standalone SVG document: {text, width, height, name}.
  function standalone(box) {
    var svg = box.querySelector('svg');
    var r = svg.getBoundingClientRect();
    var w0 = +svg.getAttribute('width') || r.width, h0 = +svg.getAttribute('height') || r.height;
    // The page shows what overflows the chart's box (rotated labels, notes right of a map); a
    // file would clip it, so its view box takes in everything drawn.
    var vb = (svg.getAttribute('viewBox') || '0 0 ' + w0 + ' ' + h0).split(/[\s,]+/).map(Number);
    var bb = svg.getBBox(), x0 = Math.min(vb[0], bb.x - 2), y0 = Math.min(vb[1], bb.y - 2);
    var x1 = Math.max(vb[0] + vb[2], bb.x + bb.width + 2), y1 = Math.max(vb[1] + vb[3], bb.y + bb.height + 2);
    var w = Math.ceil(x1 - x0), h = Math.ceil(y1 - y0);
    var title = titleOf(box, svg), legend = legendOf(box);
    var caption = box.querySelector('figcaption');
    var lines = caption ? wrap(caption.textContent.trim(), Math.max(40, Math.floor(w / 6.2))) : [];
    var top = title.drawn ? 0 : 24, W = Math.max(w, 300) + 8;
    var legendY = top + h + 14, captionY = legendY + (legend.length ? 20 : 0);
    var H = captionY + lines.length * 14 + 6;
    var root = node('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, class: 'chart'});
    root.appendChild(node('title', {}, title.text));
    root.appendChild(node('style', {}, pageStyle()));
    root.appendChild(node('rect', {x: 0, y: 0, width: W, height: H, fill: '#fff'}));
    if (!title.drawn) root.appendChild(node('text', {x: 4, y: 16, class: 'ct'}, title.text));
    var copy = svg.cloneNode(true);
    copy.setAttribute('x', 4);
    copy.setAttribute('y', top);
    copy.setAttribute('width', w);
    copy.setAttribute('height', h);
    copy.setAttribute('viewBox', x0 + ' ' + y0 + ' ' + w + ' ' + h);
    root.appendChild(copy);
    var x = 4;
    legend.forEach(function (item) {
      root.appendChild(node('rect', {x: x, y: legendY - 9, width: 10, height: 10, fill: 'none',
                                     stroke: item[1], 'stroke-width': 2}));
      root.appendChild(node('text', {x: x + 14, y: legendY, class: 'legend'}, item[0]));
      x += 24 + item[0].length * 7;
    });
    lines.forEach(function (line, i) {
      root.appendChild(node('text', {x: 4, y: captionY + i * 14, class: 'legend'}, line));
    });
    var name = title.text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'chart';
    return {text: new XMLSerializer().serializeToString(root), width: W, height: H, name: name};
  }

  function save(url, file) {
    var a = document.createElement('a');
    a.href = url;
    a.download = file;
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  function asDataUri(doc) { return 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(doc.text); }

  function png(doc) {
    var img = new Image(), scale = 2;
    img.onload = function () {
      var canvas = document.createElement('canvas');
      canvas.width = doc.width * scale;
      canvas.height = doc.height * scale;
      var ctx = canvas.getContext('2d');
      ctx.scale(scale, scale);
      ctx.drawImage(img, 0, 0);
      save(canvas.toDataURL('image/png'), doc.name + '.png');
    };
    img.src = asDataUri(doc);
  }

  function button(text, label, act) {
    var b = document.createElement('button');
    b.type = 'button';
    b.textContent = text;
    b.setAttribute('aria-label', label);
    b.addEventListener('click', act);
    return b;
  }

  // A wrapper around the chart's box with the buttons below it (the box itself may be redrawn).
  function tools(box) {
    var wrapper = document.createElement('div');
    wrapper.className = 'chart-box';
    box.parentNode.insertBefore(wrapper, box);
    wrapper.appendChild(box);
    var bar = document.createElement('div');
    bar.className = 'chart-dl';
    bar.appendChild(document.createTextNode('Download:'));
    var named = function () {
      var svg = box.querySelector('svg');
      return svg ? titleOf(box, svg).text : 'chart';
    };
    bar.appendChild(button('SVG', 'Download ' + named() + ' as SVG', function () {
      if (box.querySelector('svg')) save(asDataUri(standalone(box)), standalone(box).name + '.svg');
    }));
    bar.appendChild(button('PNG', 'Download ' + named() + ' as PNG', function () {
      if (box.querySelector('svg')) png(standalone(box));
    }));
    bar.addEventListener('focusin', function () {
      Array.prototype.forEach.call(bar.querySelectorAll('button'), function (b) {
        b.setAttribute('aria-label', 'Download ' + named() + ' as ' + b.textContent);
      });
    });
    wrapper.appendChild(bar);
  }

  var boxes = Array.prototype.slice.call(document.querySelectorAll('figure.figure'));
  ['att-map', 'hv-box'].forEach(function (id) {
    var b = document.getElementById(id);
    if (b) boxes.push(b);
  });
  boxes.forEach(function (box) { if (box.querySelector('svg')) tools(box); });
  window.headlabChartSvg = function (box) { return standalone(box).text; };
})();
)js";

}  // namespace headlab::report_parts
