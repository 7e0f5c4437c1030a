// The model view and the head view (views_section.cpp draws their frames). Plain ES2015, no
// modules or requests. Reads #att-data (see attention_script.cpp: L, H, T, heads, examples,
// w[example][((layer * H + head) * T + query) * T + key] in thousandths) and #views-data
// ({colors: the palette, given to the ticked heads in head order}), and follows the explorer's #att-sentence menu.
//
// Model view (#mv-grid): one small map per head, cells rect.mv-cell with data-q, data-k and
// data-w (the weight in thousandths, as embedded); each map an svg.mv-map with data-head, a
// button to the keyboard (Enter or Space) and to the mouse (click): it sets #att-head and tells
// the explorer by a change event. Head view (#hv-box): line.hv-line per drawn head, query and
// key with data-head, data-q, data-k, data-w and stroke-opacity = the weight; hovering or
// focusing a token (text.hv-tok, data-side "q" or "k", data-i) hides the other lines (class
// "off") and writes the token's strongest weights into #hv-readout.

#include "train/report/sections.h"

namespace headlab::report_parts {

const char* const kViewsScript = R"js(
(function () {
  'use strict';
  var dataNode = document.getElementById('att-data'), colorNode = document.getElementById('views-data');
  if (!dataNode || !colorNode) return;
  var D = JSON.parse(dataNode.textContent), COLORS = JSON.parse(colorNode.textContent).colors;
  var NS = 'http://www.w3.org/2000/svg';
  var sentence = document.getElementById('att-sentence'), headMenu = document.getElementById('att-head');
  var grid = document.getElementById('mv-grid'), hvHeads = document.getElementById('hv-heads');
  var hvBox = document.getElementById('hv-box'), hvReadout = document.getElementById('hv-readout');
  var BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
  var MIN_LINE = 10;  // thousandths: lighter lines are not drawn

  function blues(t) {
    t = Math.min(1, Math.max(0, t)) * 4;
    var i = Math.min(Math.floor(t), 3), f = t - i, s = '#';
    for (var c = 0; c < 3; c++) {
      var v = Math.round(BLUES[i][c] + (BLUES[i + 1][c] - BLUES[i][c]) * f);
      s += (v < 16 ? '0' : '') + v.toString(16);
    }
    return s;
  }

  function node(name, attrs, text) {
    var n = document.createElementNS(NS, name);
    for (var a in attrs) n.setAttribute(a, attrs[a]);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function milli(e, k, q, key) { return D.w[e][(k * D.T + q) * D.T + key]; }
  function label(k) { return 'L' + Math.floor(k / D.H) + ' H' + (k % D.H); }

  function openHead(k) {
    headMenu.value = String(k);
    headMenu.dispatchEvent(new Event('change'));
    document.getElementById('att-map').scrollIntoView({block: 'nearest'});
    headMenu.focus();
  }

  // ---- model view ----
  function smallMap(e, k, cell) {
    var side = D.T * cell;
    var svg = node('svg', {class: 'chart mv-map', width: side + 2, height: side + 2,
                           viewBox: '0 0 ' + (side + 2) + ' ' + (side + 2), 'data-head': k,
                           tabindex: 0, role: 'button',
                           'aria-label': D.heads[k].caption + ': open this head in the explorer'});
    svg.appendChild(node('title', {}, D.heads[k].caption + ' (click or Enter: open in the explorer)'));
    for (var q = 0; q < D.T; q++)
      for (var key = 0; key < D.T; key++) {
        var w = milli(e, k, q, key);
        svg.appendChild(node('rect', {class: 'mv-cell', x: 1 + key * cell, y: 1 + q * cell, width: cell,
                                      height: cell, fill: blues(w / 1000), 'data-q': q, 'data-k': key,
                                      'data-w': w}));
      }
    svg.appendChild(node('rect', {x: 0.5, y: 0.5, width: side + 1, height: side + 1, class: 'mv-frame'}));
    svg.addEventListener('click', function () { openHead(k); });
    svg.addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); openHead(k); }
    });
    return svg;
  }

  function drawModel(e) {
    if (!grid) return;
    grid.textContent = '';
    grid.style.gridTemplateColumns = 'auto repeat(' + D.H + ', auto)';
    var cell = Math.max(2, Math.min(5, Math.floor(80 / D.T)));
    grid.appendChild(document.createElement('span'));
    for (var h = 0; h < D.H; h++) {
      var c = document.createElement('span');
      c.className = 'mv-col';
      c.textContent = 'head ' + h;
      grid.appendChild(c);
    }
    for (var l = 0; l < D.L; l++) {
      var r = document.createElement('span');
      r.className = 'mv-row';
      r.textContent = 'layer ' + l;
      grid.appendChild(r);
      for (h = 0; h < D.H; h++) grid.appendChild(smallMap(e, l * D.H + h, cell));
    }
    markChosen();
  }

  function markChosen() {
    if (!grid) return;
    Array.prototype.forEach.call(grid.querySelectorAll('svg.mv-map'), function (m) {
      m.classList.toggle('on', m.getAttribute('data-head') === headMenu.value);
    });
  }

  // ---- head view ----
  var shown = {};  // head -> drawn
  shown[+headMenu.value] = true;
  var swatches = [];
  // The ticked heads take the palette's colours in head order, so that up to its length of
  // overlaid heads never share one whatever the head count.
  function colorOf(k) {
    var rank = 0;
    for (var j = 0; j < k; j++) if (shown[j]) rank++;
    return COLORS[rank % COLORS.length];
  }

  function headBoxes() {
    for (var k = 0; k < D.L * D.H; k++) {
      var lab = document.createElement('label'), box = document.createElement('input');
      box.type = 'checkbox';
      box.checked = !!shown[k];
      box.setAttribute('data-head', k);
      box.setAttribute('aria-label', 'Draw ' + D.heads[k].caption + ' in the head view');
      box.addEventListener('change', function (ev) {
        shown[+ev.target.getAttribute('data-head')] = ev.target.checked;
        drawHeads(+sentence.value);
      });
      var sw = document.createElement('i');
      sw.className = 'hv-swatch';
      swatches.push(sw);
      lab.appendChild(box);
      lab.appendChild(sw);
      lab.appendChild(document.createTextNode(label(k)));
      lab.title = D.heads[k].caption;
      hvHeads.appendChild(lab);
    }
    [['all', true], ['none', false]].forEach(function (b) {
      var button = document.createElement('button');
      button.type = 'button';
      button.textContent = b[0];
      // The visible word starts the name (axe: label-content-name-mismatch).
      button.setAttribute('aria-label', b[0] + ' heads drawn in the head view');
      button.addEventListener('click', function () {
        Array.prototype.forEach.call(hvHeads.querySelectorAll('input'), function (box) {
          box.checked = b[1];
          shown[+box.getAttribute('data-head')] = b[1];
        });
        drawHeads(+sentence.value);
      });
      hvHeads.appendChild(button);
    });
  }

  function isolate(svg, side, i, e) {
    Array.prototype.forEach.call(svg.querySelectorAll('line.hv-line'), function (l) {
      l.classList.toggle('off', i >= 0 && +l.getAttribute(side === 'q' ? 'data-q' : 'data-k') !== i);
    });
    if (i < 0) { hvReadout.textContent = ''; return; }
    var tok = D.examples[e].tokens, parts = [];
    for (var k = 0; k < D.L * D.H; k++) {
      if (!shown[k]) continue;
      var best = -1, bw = -1;
      for (var j = 0; j < D.T; j++) {
        var w = side === 'q' ? milli(e, k, i, j) : milli(e, k, j, i);
        if (w > bw) bw = w, best = j;
      }
      parts.push(label(k) + ' ' + (side === 'q' ? '\u2192 key ' : '\u2190 query ') + best + ' ' + tok[best] +
                 ' ' + (bw / 1000).toFixed(3));
    }
    hvReadout.textContent = (side === 'q' ? 'query ' : 'key ') + i + ' ' + tok[i] +
        (parts.length ? ': strongest ' + parts.join('; ') : ': no head ticked');
  }

  function drawHeads(e) {
    swatches.forEach(function (sw, k) { sw.style.background = shown[k] ? colorOf(k) : 'transparent'; });
    var tok = D.examples[e].tokens, longest = 1;
    tok.forEach(function (t) { longest = Math.max(longest, t.length); });
    var ticked = [];
    for (var t = 0; t < D.L * D.H; t++) if (shown[t]) ticked.push(t);
    var pad = 12 + longest * 7, gap = 220, row = 18, top = 48, perRow = 2;
    var xq = pad, xk = pad + gap, w = xk + pad, legendY = top + D.T * row + 10;
    var h = legendY + Math.ceil(ticked.length / perRow) * 18 + 4;
    var title = 'Head view, sentence ' + (e + 1);
    var svg = node('svg', {class: 'chart hv-chart', width: w, height: h, viewBox: '0 0 ' + w + ' ' + h,
                           role: 'img', 'aria-label': title + ': ' + (ticked.map(label).join(', ') || 'no head')});
    svg.appendChild(node('text', {x: 2, y: 16, class: 'ct'}, title));
    svg.appendChild(node('text', {x: xq, y: 36, class: 'axis', 'text-anchor': 'end'}, 'query'));
    svg.appendChild(node('text', {x: xk, y: 36, class: 'axis'}, 'key'));
    // The legend: each drawn head's colour and caption, inside the chart (and its downloads).
    ticked.forEach(function (k, n) {
      var x = 2 + (n % perRow) * Math.floor(w / perRow), y = legendY + Math.floor(n / perRow) * 18;
      svg.appendChild(node('line', {x1: x, x2: x + 16, y1: y, y2: y, stroke: colorOf(k), 'stroke-width': 2.5}));
      svg.appendChild(node('text', {x: x + 20, y: y + 4, class: 'legend'}, D.heads[k].caption));
    });
    var lines = node('g', {});
    svg.appendChild(lines);
    for (var k = 0; k < D.L * D.H; k++) {
      if (!shown[k]) continue;
      var color = colorOf(k);
      for (var q = 0; q < D.T; q++)
        for (var key = 0; key < D.T; key++) {
          var m = milli(e, k, q, key);
          if (m < MIN_LINE) continue;
          lines.appendChild(node('line', {class: 'hv-line', x1: xq + 4, y1: top + q * row, x2: xk - 4,
                                          y2: top + key * row, stroke: color, 'stroke-width': 2,
                                          'stroke-opacity': m / 1000, 'data-head': k, 'data-q': q,
                                          'data-k': key, 'data-w': m}));
        }
    }
    ['q', 'k'].forEach(function (side) {
      tok.forEach(function (t, i) {
        var text = node('text', {x: side === 'q' ? xq : xk, y: top + i * row + 4, class: 'lab hv-tok',
                                 'text-anchor': side === 'q' ? 'end' : 'start', tabindex: 0,
                                 'data-side': side, 'data-i': i,
                                 'aria-label': (side === 'q' ? 'query ' : 'key ') + i + ' ' + t +
                                     ': show only its lines'}, t);
        var on = function () { isolate(svg, side, i, e); }, off = function () { isolate(svg, side, -1, e); };
        text.addEventListener('mouseenter', on);
        text.addEventListener('focus', on);
        text.addEventListener('mouseleave', off);
        text.addEventListener('blur', off);
        svg.appendChild(text);
      });
    });
    hvBox.textContent = '';
    hvBox.appendChild(svg);
    hvReadout.textContent = '';
  }

  function update() {
    var e = +sentence.value;
    drawModel(e);
    drawHeads(e);
  }

  headBoxes();
  sentence.addEventListener('change', update);
  headMenu.addEventListener('change', markChosen);
  // The explorer's small maps set the menu without a change event; their clicks bubble here.
  var explorerThumbs = document.getElementById('att-thumbs');
  if (explorerThumbs) explorerThumbs.addEventListener('click', markChosen);
  update();
})();
)js";

}  // namespace headlab::report_parts
