// The "composition" section of the run report (sections.h): which lower head each head of layer
// >= 1 builds on, and the strongest two-step path drawn on an example sentence.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/parts.h"
#include "train/report/sections.h"

namespace headlab::report_parts {
namespace {

using nlohmann::json;

struct Entry {
  int head = -1, source = -1;  // Y and X as l * H + h
  int relation = -1;
  double path_mass = NAN, mass = NAN, ablated_mass = NAN;  // ablated: Y's mass without X
  double baseline = NAN;        // the path's mass with Y uniform; NaN in a heads.json without it
  double lower_baseline = NAN;  // Y's path mass with X uniform; NaN in an older heads.json
  int claimed = -1;  // 1 above chance by the margin, 0 not, -1 unknown (older heads.json)
};

int head_index(const Heads& h, const json& layer, const json& head) {
  if (!layer.is_number_integer() || !head.is_number_integer()) return -1;
  const int k = layer.get<int>() * h.heads + head.get<int>();
  return k >= 0 && k < static_cast<int>(h.per_head.size()) ? k : -1;
}

std::vector<Entry> read_entries(const json& doc, const Heads& h) {
  std::vector<Entry> out;
  for (const json& c : doc.value("composition", json::array())) {
    Entry e;
    e.head = head_index(h, c.value("layer", json()), c.value("head", json()));
    const json x = c.value("composes_with", json());
    if (x.is_array() && x.size() == 2) e.source = head_index(h, x[0], x[1]);
    const std::string rel = c.value("relation", std::string());
    for (size_t r = 0; r < h.relations.size(); ++r)
      if (h.relations[r] == rel) e.relation = static_cast<int>(r);
    if (e.head < 0 || e.source < 0 || e.relation < 0) continue;
    e.path_mass = num(c, "path_mass");
    e.mass = num(c, "mass");
    e.baseline = num(c, "path_mass_baseline");
    e.lower_baseline = num(c, "path_mass_lower_baseline");
    const json claimed = c.value("claimed", json());
    if (claimed.is_boolean()) e.claimed = claimed.get<bool>() ? 1 : 0;
    for (const json& s : c.value("sources", json::array()))
      if (head_index(h, s.value("layer", json()), s.value("head", json())) == e.source)
        e.ablated_mass = num(s, "ablated_mass");
    out.push_back(e);
  }
  return out;
}

// Whether any entry carries the chance baseline (heads.json written with the baselines).
bool has_baselines(const std::vector<Entry>& entries) {
  for (const Entry& e : entries)
    if (e.claimed >= 0) return true;
  return false;
}

std::string table(const Heads& h, const std::vector<Entry>& entries) {
  const bool chance = has_baselines(entries);
  std::string rows;
  for (const Entry& e : entries) {
    rows += fmt::format(
        "<tr><td class=\"l\">{}</td><td class=\"l\"><span class=\"tag\" style=\"background:{}\">"
        "{}</span></td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>",
        h.label[e.head], h.colors[e.relation], svg::escape(h.relations[e.relation]),
        h.label[e.source], svg::number(e.path_mass, 3), svg::number(e.mass, 3),
        svg::number(e.ablated_mass, 3));
    if (chance)
      rows += fmt::format("<td>{}</td><td>{}</td><td>{}</td>", svg::number(e.baseline, 3),
                          svg::number(e.lower_baseline, 3),
                          e.claimed > 0 ? "yes" : (e.claimed == 0 ? "no (chance)" : "-"));
    rows += "</tr>";
  }
  return "<table><tr><th class=\"l\">head Y</th><th class=\"l\">relation of its strongest "
         "path</th><th class=\"l\">composes with X</th><th>path mass Y\u2192X</th><th>Y's own "
         "mass</th><th>Y's mass, X gated off</th>" +
         std::string(chance ? "<th>chance: Y uniform</th><th>chance: X uniform</th><th>above "
                              "chance</th>"
                            : "") +
         "</tr>" + rows + "</table>";
}

// A[e, l, h, i, j] of attention.npy.
double weight(const NpyArray& a, int64_t e, int64_t l, int64_t h, int64_t i, int64_t j) {
  const std::vector<int64_t>& s = a.shape;
  return a.data[static_cast<size_t>((((e * s[1] + l) * s[2] + h) * s[3] + i) * s[4] + j)];
}

// One query's path on example sentence n: query i through Y to key j, from there through X to the gold
// partner p; the query and key with the largest A_Y[i, j] A_X[j, p].
struct Path {
  int i = -1, j = -1, p = -1;
  double wy = 0, wx = 0;
};

Path best_path(const RunFiles& f, const Heads& h, const Entry& e, int64_t n) {
  Path best;
  const json ex = f.tokens["examples"][n];
  const std::vector<int> partners =
      ex.value("partners", json::object()).value(h.relations[e.relation], std::vector<int>{});
  const int64_t T = f.attention.shape[3];
  const int ly = e.head / h.heads, hy = e.head % h.heads, lx = e.source / h.heads,
            hx = e.source % h.heads;
  for (int64_t i = 1; i < T && i < static_cast<int64_t>(partners.size()); ++i) {
    const int p = partners[i];
    if (p < 0 || p >= T) continue;
    for (int64_t j = 0; j < T; ++j) {
      const double wy = weight(f.attention, n, ly, hy, i, j),
                   wx = weight(f.attention, n, lx, hx, j, p);
      if (wy * wx > best.wy * best.wx) best = {static_cast<int>(i), static_cast<int>(j), p, wy, wx};
    }
  }
  return best;
}

// The sentence in a row with Y's step drawn above it (i -> j) and X's step below (j -> p).
std::string path_svg(const std::vector<std::string>& tokens, const Path& p,
                     const std::string& y_color, const std::string& y_name,
                     const std::string& x_name) {
  const int w = 64, top = 70, n = static_cast<int>(tokens.size());
  const auto cx = [&](int t) { return 20 + w * t + w / 2; };
  std::string s = svg::svg_open(
      40 + w * n, 170, fmt::format("Two-step path: {} reads what {} put there", y_name, x_name));
  for (int t = 0; t < n; ++t) {
    const bool on = t == p.i || t == p.j || t == p.p;
    s += fmt::format("<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"middle\"{}>{}</text>",
                     cx(t), top + 14, on ? " style=\"font-weight:700\"" : "",
                     svg::escape(tokens[t]));
  }
  const auto arc = [&](int a, int b, bool above, const std::string& color, double wgt,
                       const std::string& label) {
    const int y = above ? top : top + 24,
              lift = above ? -(18 + 5 * std::abs(b - a)) : 18 + 5 * std::abs(b - a);
    const int h = std::max(-60, std::min(60, lift));
    return fmt::format(
        "<path d=\"M{} {} Q{} {} {} {}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{:.1f}\"/>"
        "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>"
        "<text class=\"lab\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" style=\"fill:{}\">{}</text>",
        cx(a), y, (cx(a) + cx(b)) / 2, y + 2 * h, cx(b), y, color, 1.0 + 3.0 * wgt, cx(b), y, color,
        (cx(a) + cx(b)) / 2, y + h + (above ? -4 : 12), color,
        svg::escape(fmt::format("{} {:.2f}", label, wgt)));
  };
  s += arc(p.i, p.j, true, y_color, p.wy, y_name);
  s += arc(p.j, p.p, false, "#5b6170", p.wx, x_name);
  return s + "</svg>";
}

// The path on example sentence n (checked by examples()).
std::string example(const RunFiles& f, const Heads& h, const Entry& e, int64_t n) {
  const json& ex = f.tokens["examples"][n];
  if (!ex.is_object()) return "<p class=\"note\">No such example sentence.</p>";
  const std::vector<std::string> tokens = ex.value("tokens", std::vector<std::string>{});
  const Path p = best_path(f, h, e, n);
  if (p.i < 0 || static_cast<int64_t>(tokens.size()) != f.attention.shape[3])
    return "<p class=\"note\">No two-step path on the example sentence.</p>";
  const std::string rel = h.relations[e.relation];
  return figure(path_svg(tokens, p, h.colors[e.relation], h.label[e.head], h.label[e.source]),
                fmt::format("{} at {} looks at {} (weight {:.2f}, above); at {}, layer-{} head {} "
                            "had looked at {} (weight {:.2f}, below), {}'s {} partner: {} reads "
                            "from {} what {} put there.",
                            h.label[e.head], tokens[p.i], tokens[p.j], p.wy, tokens[p.j],
                            e.source / h.heads, h.label[e.source], tokens[p.p], p.wx, tokens[p.i],
                            rel, h.label[e.head], tokens[p.j], h.label[e.source]));
}

// One figure per example sentence, each in a div.comp-path with data-example; all but the first
// hidden, for kCompositionScript to show the one the attention explorer's menu picks.
std::string examples(const RunFiles& f, const Heads& h, const Entry& e) {
  const json& tok = f.tokens;
  if (f.attention.shape.size() != 5 || !tok.is_object() || !tok.contains("examples") ||
      !tok["examples"].is_array() || tok["examples"].empty() || f.attention.shape[1] != h.layers ||
      f.attention.shape[2] != h.heads)
    return "<p class=\"note\">attention.npy or attention_tokens.json not found.</p>";
  const int64_t n = std::min<int64_t>(f.attention.shape[0], tok["examples"].size());
  std::string out;
  for (int64_t i = 0; i < n; ++i)
    out += fmt::format("<div class=\"comp-path\" data-example=\"{}\"{}>", i, i ? " hidden" : "") +
           example(f, h, e, i) + "</div>";
  return out;
}

}  // namespace

std::string composition_body(const RunView& v) {
  const RunFiles& f = v.files;
  const Heads& h = v.heads;
  if (h.layers < 2) return "";
  const std::vector<Entry> entries = read_entries(f.heads, h);
  if (entries.empty()) return missing("heads.json has no composition.");
  // The path that adds most to what its head reaches in one step, among the claimed ones when
  // heads.json says which are (a path at chance is no composition to draw).
  const bool chance = has_baselines(entries);
  const Entry* shown = nullptr;
  for (const Entry& e : entries)
    if ((!chance || e.claimed > 0) &&
        (!shown || e.path_mass - e.mass > shown->path_mass - shown->mass))
      shown = &e;
  const json baselines =
      f.heads.is_object() ? f.heads.value("baselines", json::object()) : json::object();
  const double margin = num(baselines, "composition_margin", 0.1);
  const std::string chance_text =
      chance ? fmt::format(
                   " Chance is the same path with Y, or else X, replaced by a head attending "
                   "uniformly over the visible keys; a path is composition only when its mass "
                   "exceeds both by more than {}.",
                   svg::number(margin, 2))
             : "";
  const std::string shown_html =
      shown ? examples(f, h, *shown)
            : fmt::format(
                  "<p class=\"note\">No composition above chance: no head's strongest "
                  "path exceeds its uniform-Y and uniform-X baselines by more than {}.</p>",
                  svg::number(margin, 2));
  return lede(
             "Two-step paths: the mass P[Y, X, r] = mean_i sum_j A_Y[i, j] A_X[j, p_r(i)] that "
             "reaches "
             "relation r's gold partner going through head Y (layer l) and then head X (a layer "
             "below). Each head Y is listed with its strongest path, its own one-step mass on that "
             "relation and that mass with X gated off. A path mass far above Y's own mass is "
             "composition: neither head reaches the partner alone; a drop when X is gated off "
             "means Y "
             "needs X to find its key." +
             chance_text +
             (shown ? " The path below is drawn on the sentence picked in the attention "
                      "explorer's menu (the first one without scripts)."
                    : "")) +
         table(h, entries) + "<div class=\"row\">" + shown_html + "</div>";
}

}  // namespace headlab::report_parts
