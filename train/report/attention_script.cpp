// The attention explorer's script (see attention_section.cpp for the page it works on). Plain
// ES2015 without modules or requests, so it runs from a file:// page. It reads the JSON in
// #att-data ({L, H, T, relations, colors, heads: [{caption, color}], examples: [{tokens,
// partners: [relation][query]}], w: [example][((layer * H + head) * T + query) * T + key] in
// thousandths}) and draws, for the chosen sentence and head, the head's map (#att-map: cells
// with a <title> "query Q TOKEN -> key K TOKEN: W (gold R)", gold partners outlined) and a small
// map of every head of its layer (#att-thumbs, click to choose). The colour scale is the one of
// svg::sequential (ColorBrewer Blues). Keyboard: the map takes the focus and the arrow keys (Home,
// End) move a cursor over its cells, whose text goes to the readout (aria-live) as on hover; a
// small map is a button (Tab to it, Enter or Space to show it). Gold outlines carry their
// relation's dash pattern (D.dashes) besides its colour.

#include "train/report/sections.h"

namespace headlab::report_parts {

const char* const kAttentionScript = R"js(
(function () {
  'use strict';
  var dataNode = document.getElementById('att-data');
  if (!dataNode) return;
  var D = JSON.parse(dataNode.textContent);
  var NS = 'http://www.w3.org/2000/svg';
  var sentence = document.getElementById('att-sentence');
  var headMenu = document.getElementById('att-head');
  var mapBox = document.getElementById('att-map');
  var thumbs = document.getElementById('att-thumbs');
  var thumbsTitle = document.getElementById('att-thumbs-title');
  var readout = document.getElementById('att-readout');
  var BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];

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

  function weight(e, k, q, key) { return D.w[e][(k * D.T + q) * D.T + key] / 1000; }

  function describe(e, k, q, key) {
    var ex = D.examples[e], gold = [];
    ex.partners.forEach(function (p, r) { if (p[q] === key) gold.push(D.relations[r]); });
    return 'query ' + q + ' ' + ex.tokens[q] + ' \u2192 key ' + key + ' ' + ex.tokens[key] +
        ': ' + weight(e, k, q, key).toFixed(3) + (gold.length ? ' (gold ' + gold.join(', ') + ')' : '');
  }

  function labels(svg, tokens, ml, mt, cell) {
    tokens.forEach(function (t, i) {
      var y = mt + i * cell + cell / 2 + 3.5, x = ml + i * cell + cell / 2;
      svg.appendChild(node('text', {x: ml - 5, y: y, class: 'lab', 'text-anchor': 'end', 'font-size': 10}, t));
      svg.appendChild(node('text', {transform: 'translate(' + (x + 3) + ' ' + (mt - 5) + ') rotate(-55)',
                                    class: 'lab', 'font-size': 10}, t));
    });
    var side = tokens.length * cell;
    svg.appendChild(node('text', {x: ml + side / 2, y: mt + side + 18, class: 'axis', 'text-anchor': 'middle'},
                         'key (attended to)'));
    svg.appendChild(node('text', {transform: 'translate(12 ' + (mt + side / 2) + ') rotate(-90)',
                                  class: 'axis', 'text-anchor': 'middle'}, 'query'));
  }

  function marks(svg, e, ml, mt, cell) {
    D.examples[e].partners.forEach(function (p, r) {
      p.forEach(function (key, q) {
        if (key < 0) return;
        var at = {x: ml + key * cell + 1, y: mt + q * cell + 1, width: cell - 2, height: cell - 2,
                  fill: 'none', 'pointer-events': 'none'};
        svg.appendChild(node('rect', Object.assign({stroke: '#fff', 'stroke-width': 3.2,
                                                    'stroke-opacity': 0.8}, at)));
        svg.appendChild(node('rect', Object.assign({stroke: D.colors[r], 'stroke-width': 1.8,
                                                    'stroke-dasharray': (D.dashes || [])[r] || 'none',
                                                    class: 'mark'}, at)));
      });
    });
  }

  // The keyboard cursor of the big map: cell (q, key), outlined, its text in the readout.
  function keyboard(svg, e, k, ml, mt, cell) {
    var T = D.T, at = {q: 0, key: 0};
    var box = node('rect', {width: cell, height: cell, fill: 'none', stroke: '#1f2430',
                            'stroke-width': 2.5, 'pointer-events': 'none', class: 'cursor'});
    box.style.display = 'none';
    svg.appendChild(box);
    function show() {
      box.setAttribute('x', ml + at.key * cell);
      box.setAttribute('y', mt + at.q * cell);
      box.style.display = '';
      readout.textContent = describe(e, k, at.q, at.key);
    }
    svg.addEventListener('focus', show);
    svg.addEventListener('blur', function () { box.style.display = 'none'; });
    svg.addEventListener('keydown', function (ev) {
      var moves = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]};
      if (moves[ev.key]) {
        at.q = Math.min(T - 1, Math.max(0, at.q + moves[ev.key][0]));
        at.key = Math.min(T - 1, Math.max(0, at.key + moves[ev.key][1]));
      } else if (ev.key === 'Home') {
        at.key = 0;
      } else if (ev.key === 'End') {
        at.key = T - 1;
      } else {
        return;
      }
      ev.preventDefault();
      show();
    });
  }

  // Head k's map on sentence e; `full`: labels, gold partners and a tooltip per cell.
  function draw(e, k, cell, full) {
    var tokens = D.examples[e].tokens, T = D.T, longest = 1;
    tokens.forEach(function (t) { longest = Math.max(longest, t.length); });
    var ml = full ? 28 + longest * 6 : 2, mt = full ? 36 + longest * 4.6 : 20;
    var w = Math.max(ml + T * cell + 6, full ? 0 : D.heads[k].caption.length * 6.2 + 4), h = mt + T * cell + (full ? 26 : 4);
    var svg = node('svg', {class: 'chart', width: w, height: h, viewBox: '0 0 ' + w + ' ' + h,
                           role: full ? 'img' : 'button', tabindex: 0, 'data-head': k});
    // The big map's name says how to read it; a small map's is its <title> (below), which holds
    // its visible caption.
    if (full)
      svg.setAttribute('aria-label', 'Attention map of ' + D.heads[k].caption + ' on sentence ' +
                       (e + 1) + ': arrow keys read its cells');
    svg.appendChild(node('text', {x: 2, y: full ? 18 : 13, class: full ? 'ct' : 'lab',
                                  style: 'fill:' + D.heads[k].color}, D.heads[k].caption));
    for (var q = 0; q < T; q++) {
      for (var key = 0; key < T; key++) {
        var r = node('rect', {x: ml + key * cell, y: mt + q * cell, width: cell, height: cell,
                              fill: blues(weight(e, k, q, key))});
        if (full) {
          r.setAttribute('class', 'cell');
          r.setAttribute('data-q', q);
          r.setAttribute('data-k', key);
          r.appendChild(node('title', {}, describe(e, k, q, key)));
        }
        svg.appendChild(r);
      }
    }
    svg.appendChild(node('rect', {x: ml, y: mt, width: T * cell, height: T * cell, fill: 'none',
                                  stroke: '#999', 'stroke-width': 0.6, 'pointer-events': 'none'}));
    if (full) {
      labels(svg, tokens, ml, mt, cell);
      marks(svg, e, ml, mt, cell);
      svg.addEventListener('mouseover', function (ev) {
        var c = ev.target;
        if (c.getAttribute('data-q') !== null)
          readout.textContent = describe(e, k, +c.getAttribute('data-q'), +c.getAttribute('data-k'));
      });
      svg.addEventListener('mouseleave', function () {
        if (document.activeElement !== svg) readout.textContent = '';
      });
      keyboard(svg, e, k, ml, mt, cell);
    } else {
      svg.insertBefore(node('title', {}, D.heads[k].caption + ' (click or Enter to show it)'),
                       svg.firstChild);
    }
    return svg;
  }

  function update() {
    var e = +sentence.value, k = +headMenu.value, layer = Math.floor(k / D.H);
    mapBox.textContent = '';
    mapBox.appendChild(draw(e, k, Math.max(6, Math.min(22, Math.floor(560 / D.T))), true));
    thumbs.textContent = '';
    thumbsTitle.textContent = 'Every head of layer ' + layer + ' on sentence ' + (e + 1) +
        ' (click one, or Tab to it and press Enter, to show it):';
    for (var h = 0; h < D.H; h++) {
      var t = draw(e, layer * D.H + h, Math.max(2, Math.min(6, Math.floor(120 / D.T))), false);
      if (layer * D.H + h === k) t.classList.add('on');
      t.setAttribute('aria-pressed', layer * D.H + h === k ? 'true' : 'false');
      t.addEventListener('click', function (ev) {
        headMenu.value = ev.currentTarget.getAttribute('data-head');
        update();
      });
      t.addEventListener('keydown', function (ev) {
        if (ev.key !== 'Enter' && ev.key !== ' ') return;
        ev.preventDefault();
        var chosen = ev.currentTarget.getAttribute('data-head');
        headMenu.value = chosen;
        update();
        // The small maps were drawn anew: the focus goes to the one just chosen.
        thumbs.querySelector('[data-head="' + chosen + '"]').focus();
      });
      thumbs.appendChild(t);
    }
    readout.textContent = '';
  }

  sentence.addEventListener('change', update);
  headMenu.addEventListener('change', update);
  document.getElementById('att-controls').hidden = false;
  update();
})();
)js";

}  // namespace headlab::report_parts
