// The run report's attention explorer: the saved example sentences' attention maps
// (attention.npy [examples, layers, heads, T, T], attention_tokens.json), embedded once as
// compact JSON for the script (attention_script.cpp) that switches the sentence and the head,
// and the first sentence's first head drawn statically for a page read without scripts.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {

// The most attention weights embedded (about 4 bytes each in the page).
constexpr int64_t kMaxEmbedded = 2'000'000;

struct Maps {
  int64_t examples = 0, layers = 0, heads = 0, T = 0;
  const float* data = nullptr;
  const float* at(int64_t e, int64_t k) const { return data + (e * layers * heads + k) * T * T; }
};

// What is wrong with the attention files, or "" when they can be drawn.
std::string check(const RunFiles& f, Maps& m) {
  const json& tok = f.tokens;
  if (f.attention.shape.size() != 5 || !tok.is_object() || !tok.contains("examples") ||
      !tok["examples"].is_array() || tok["examples"].empty())
    return "attention.npy or attention_tokens.json not found.";
  const std::vector<int64_t>& s = f.attention.shape;                  // [examples, L, H, T, T]
  if (s[0] < 1 || s[3] != s[4] || s[3] > 1024 || s[1] * s[2] > 1024)  // edited or foreign files
    return "attention.npy does not hold [examples, layers, heads, T, T] maps of at most 1024 "
           "tokens and 1024 heads.";
  m = {std::min<int64_t>(s[0], static_cast<int64_t>(tok["examples"].size())), s[1], s[2], s[3],
       f.attention.data.data()};
  if (m.layers * m.heads * m.T * m.T > kMaxEmbedded)
    return "the attention maps are too large to embed in the page; they are in attention.npy.";
  m.examples =
      std::max<int64_t>(1, std::min(m.examples, kMaxEmbedded / (m.layers * m.heads * m.T * m.T)));
  return "";
}

std::vector<std::string> tokens_of(const json& ex, int64_t T) {
  std::vector<std::string> t =
      ex.is_object() ? ex.value("tokens", std::vector<std::string>{}) : std::vector<std::string>{};
  if (static_cast<int64_t>(t.size()) != T) t.assign(static_cast<size_t>(T), "?");
  return t;
}

// partners[r][query] for each relation of heads.json (-1: none, or out of range).
std::vector<std::vector<int>> partners_of(const json& ex, const Heads& h, int64_t T) {
  const json p = ex.is_object() ? ex.value("partners", json::object()) : json::object();
  std::vector<std::vector<int>> out;
  for (const std::string& r : h.relations) {
    std::vector<int> v = p.is_object() ? p.value(r, std::vector<int>{}) : std::vector<int>{};
    v.resize(static_cast<size_t>(T), -1);
    for (int& x : v) x = x >= 0 && x < T ? x : -1;
    out.push_back(v);
  }
  return out;
}

// A cell's tooltip; the script writes the same text.
std::string cell_title(const std::vector<std::string>& tok, const std::vector<std::vector<int>>& p,
                       const Heads& h, int q, int k, double w) {
  std::string gold;
  for (size_t r = 0; r < p.size(); ++r)
    if (p[r][q] == k) gold += (gold.empty() ? "" : ", ") + h.relations[r];
  return fmt::format("query {} {} \u2192 key {} {}: {:.3f}{}", q, tok[q], k, tok[k], w,
                     gold.empty() ? "" : " (gold " + gold + ")");
}

// "2: NEG:2 INT_A:2 PREP:2 ... (16 of 16 labels right)", for the sentence menu.
std::string sentence_option(const json& ex, int64_t e, const std::vector<std::string>& tok) {
  std::string text;
  for (size_t i = 0; i < tok.size(); ++i) {
    if (i == 0 && tok[i] == "BOS") continue;
    if (text.size() > 60) {
      text += " \u2026";
      break;
    }
    text += (text.empty() ? "" : " ") + tok[i];
  }
  const std::vector<int> labels = ex.value("labels", std::vector<int>{});
  const std::vector<int> predicted = ex.value("predicted", std::vector<int>{});
  int scored = 0, right = 0;
  for (size_t i = 0; i < labels.size() && i < predicted.size(); ++i)
    if (labels[i] >= 0) ++scored, right += predicted[i] == labels[i] ? 1 : 0;
  if (scored > 0) text += fmt::format(" ({} of {} labels right)", right, scored);
  return fmt::format("<option value=\"{}\">{}: {}</option>", e, e + 1, svg::escape(text));
}

std::string controls(const RunFiles& f, const Heads& h, const Maps& m) {
  std::string sentences, heads;
  for (int64_t e = 0; e < m.examples; ++e) {
    const json& ex = f.tokens["examples"][e];
    sentences += sentence_option(ex, e, tokens_of(ex, m.T));
  }
  for (int64_t l = 0; l < m.layers; ++l) {
    heads += fmt::format("<optgroup label=\"layer {}\">", l);
    for (int64_t k = l * m.heads; k < (l + 1) * m.heads; ++k)
      heads += fmt::format("<option value=\"{}\">{}</option>", k,
                           svg::escape(k < static_cast<int64_t>(h.per_head.size())
                                           ? head_caption(h, static_cast<size_t>(k))
                                           : fmt::format("L{} H{}", l, k - l * m.heads)));
    heads += "</optgroup>";
  }
  return "<div class=\"controls\" id=\"att-controls\" hidden><label for=\"att-sentence\">Sentence"
         "</label><select id=\"att-sentence\">" +
         sentences + "</select><label for=\"att-head\">Head</label><select id=\"att-head\">" +
         heads + "</select></div>";
}

// The first sentence's first head, as the script would draw it.
std::string static_map(const RunFiles& f, const Heads& h, const Maps& m) {
  const json& ex = f.tokens["examples"][0];
  const std::vector<std::string> tok = tokens_of(ex, m.T);
  const std::vector<std::vector<int>> p = partners_of(ex, h, m.T);
  svg::HeatmapOptions o;
  o.title = h.per_head.empty() ? "L0 H0" : head_caption(h, 0);
  o.row_labels = o.col_labels = tok;
  o.rotate_col_labels = true;
  o.show_values = false;
  o.cell = static_cast<int>(std::clamp<int64_t>(560 / m.T, 6, 22));  // as the script draws it
  o.x_label = "key (attended to)";
  o.y_label = "query";
  std::vector<double> values;
  for (int q = 0; q < m.T; ++q)
    for (int k = 0; k < m.T; ++k) {
      values.push_back(m.at(0, 0)[q * m.T + k]);
      o.cell_titles.push_back(cell_title(tok, p, h, q, k, values.back()));
    }
  for (size_t r = 0; r < p.size(); ++r)
    for (int q = 0; q < m.T; ++q)
      if (p[r][q] >= 0)
        o.marks.push_back({q, p[r][q], h.colors[r], "", false, relation_dash(static_cast<int>(r))});
  return svg::heatmap(static_cast<int>(m.T), static_cast<int>(m.T), values, o);
}

// Everything the script draws from: weights in thousandths (a tooltip shows three decimals).
std::string data_json(const RunFiles& f, const Heads& h, const Maps& m) {
  json heads = json::array(), examples = json::array(), w = json::array(), dashes = json::array();
  for (size_t r = 0; r < h.relations.size(); ++r)
    dashes.push_back(relation_dash(static_cast<int>(r)));
  for (int64_t k = 0; k < m.layers * m.heads; ++k) {
    const bool known = k < static_cast<int64_t>(h.per_head.size());
    heads.push_back(
        {{"caption", known ? head_caption(h, k) : fmt::format("L{} H{}", k / m.heads, k % m.heads)},
         {"color", known ? head_color(h, k) : kUnclaimedGrey}});
  }
  for (int64_t e = 0; e < m.examples; ++e) {
    const json& ex = f.tokens["examples"][e];
    examples.push_back({{"tokens", tokens_of(ex, m.T)}, {"partners", partners_of(ex, h, m.T)}});
    std::vector<int> q;
    q.reserve(static_cast<size_t>(m.layers * m.heads * m.T * m.T));
    for (int64_t i = 0; i < m.layers * m.heads * m.T * m.T; ++i)
      q.push_back(static_cast<int>(std::lround(std::clamp(m.at(e, 0)[i], 0.0f, 1.0f) * 1000)));
    w.push_back(q);
  }
  const json doc = {{"L", m.layers},
                    {"H", m.heads},
                    {"T", m.T},
                    {"relations", h.relations},
                    {"colors", h.colors},
                    {"dashes", dashes},
                    {"heads", heads},
                    {"examples", examples},
                    {"w", w}};
  // '<' only occurs inside JSON strings, where \u003c means the same: no "</script>" can end
  // the data early.
  std::string text = doc.dump();
  std::string out;
  for (char c : text) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return "<script type=\"application/json\" id=\"att-data\">" + out + "</script>";
}

}  // namespace

bool attention_embedded(const RunFiles& f) {
  Maps m;
  return check(f, m).empty();
}

std::string attention_body(const RunView& v) {
  Maps m;
  const std::string problem = check(v.files, m);
  if (!problem.empty()) return missing(problem);
  const Heads& h = v.heads;
  return lede(fmt::format(
             "Rows are queries, columns the keys they attend to; darker is more weight, and a "
             "cell's tooltip gives the query, the key and the weight. Outlined cells are each "
             "token's gold partners, coloured and dashed by relation. With the keyboard: Tab to "
             "the map and move over its cells with the arrow keys, or Tab to a small map and press "
             "Enter. {} of the saved example sentences "
             "(attention.npy, tokens in attention_tokens.json); pick a sentence and a head, or "
             "click a head of the layer.",
             m.examples)) +
         relation_legend(h) + controls(v.files, h, m) +
         "<noscript><p class=\"note\">Scripts are off: the first sentence's first head is "
         "shown.</p></noscript>"
         "<div class=\"row\"><div id=\"att-map\">" +
         static_map(v.files, h, m) +
         "</div><div><p class=\"lab\" id=\"att-thumbs-title\"></p><div class=\"thumbs\" "
         "id=\"att-thumbs\"></div></div></div><p class=\"readout\" id=\"att-readout\" "
         "aria-live=\"polite\"></p>" +
         data_json(v.files, h, m);
}

}  // namespace headlab::report_parts
