// The run report's verdict line and its summary section: the headline numbers and, per
// relation, the head that carries it.

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab {

using namespace report_parts;
using nlohmann::json;

namespace {

// The head assigned to relation r, or -1.
int assigned_head(const Heads& h, int r) {
  for (size_t k = 0; k < h.assigned.size(); ++k)
    if (h.assigned[k] == r) return static_cast<int>(k);
  return -1;
}

// "L0 H3" -> "L0H3", the compact form of the verdict.
std::string compact(std::string label) {
  label.erase(std::remove(label.begin(), label.end(), ' '), label.end());
  return label;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// " Composition above chance: L1H0 via L0H1 (SEM 0.85, chance 0.30)." or " No composition
// above chance.", from heads.json's composition entries that say whether they are claimed; ""
// when none does (one layer, or a heads.json written before the baselines).
std::string composition_verdict(const json& doc, const Heads& h) {
  const json entries = doc.is_object() ? doc.value("composition", json()) : json();
  if (!entries.is_array()) return "";
  bool known = false;
  std::vector<std::string> claimed;
  for (const json& c : entries) {
    if (!c.is_object() || !c.contains("claimed") || !c["claimed"].is_boolean()) continue;
    known = true;
    const json x = c.value("composes_with", json());
    if (!c["claimed"].get<bool>() || !x.is_array() || x.size() != 2 || !x[0].is_number_integer() ||
        !x[1].is_number_integer())
      continue;
    // Edited or foreign documents: fields of the wrong type read as unknown, never throw.
    const json rel = c.value("relation", json());
    claimed.push_back(fmt::format("L{}H{} via L{}H{} ({} {:.2f}, chance {:.2f})",
                                  static_cast<int>(num(c, "layer", -1)),
                                  static_cast<int>(num(c, "head", -1)), x[0].get<int>(),
                                  x[1].get<int>(), rel.is_string() ? rel.get<std::string>() : "?",
                                  num(c, "path_mass", 0.0), num(c, "path_mass_baseline", 0.0)));
  }
  if (!known || h.layers < 2) return "";
  return claimed.empty() ? " No composition above chance."
                         : " Composition above chance: " + join(claimed) + ".";
}

// " PREV: mass names L0H2 (restores 0.05) but patching names L0H0 (0.94)." for each relation
// whose head by mass is not the head that restores the most of its logit difference (heads.json
// "patching"), " Patching agrees." when every relation compared agrees (a tie is agreement); ""
// without patching (an older heads.json, or a task that cannot corrupt) or without a relation to
// compare.
std::string patching_verdict(const json& doc, const Heads& h) {
  const Patching p = parse_patching(doc, h);
  if (p.state != Patching::State::measured) return "";
  bool compared = false;
  std::string differ;
  for (int r = 0; r < static_cast<int>(h.relations.size()); ++r) {
    const int k = assigned_head(h, r), top = patching_top(p, static_cast<size_t>(r));
    if (k < 0 || top < 0) continue;
    compared = true;
    const std::vector<double>& v = p.relations[static_cast<size_t>(r)].heads;
    const double mine = v[static_cast<size_t>(k)], best = v[static_cast<size_t>(top)];
    if (mine == best) continue;
    // The assigned head's own fraction too, so that a near tie reads as one.
    differ +=
        fmt::format("{}{}: mass names {} (restores {}) but patching names {} ({:.2f})",
                    differ.empty() ? " " : "; ", h.relations[r], compact(h.label[k]),
                    std::isnan(mine) ? "n/a" : svg::number(mine, 2), compact(h.label[top]), best);
  }
  if (!compared) return "";
  return differ.empty() ? " Patching agrees." : differ + ".";
}

}  // namespace

std::string specialization_verdict(const json& doc) {
  const Heads h = parse_heads(doc);
  if (h.per_head.empty() || h.relations.empty()) return "";
  std::vector<std::string> claimed, unclaimed, headless;
  for (int r = 0; r < static_cast<int>(h.relations.size()); ++r) {
    const int k = assigned_head(h, r);
    if (k < 0) {
      headless.push_back(h.relations[r]);
      continue;
    }
    const std::string entry =
        fmt::format("{} {} {:.2f}", h.relations[r], compact(h.label[k]), h.assigned_mass[k]);
    (h.claimed[k] ? claimed : unclaimed).push_back(entry);
  }
  const size_t R = h.relations.size();
  std::string out =
      fmt::format("{} of {} {} {} own head", claimed.size(), R, R == 1 ? "relation" : "relations",
                  claimed.size() == 1 ? "has its" : "have their");
  if (!claimed.empty()) out += ": " + join(claimed);
  if (!unclaimed.empty())
    out += fmt::format("; unclaimed (mass <= {}): {}", h.threshold, join(unclaimed));
  if (!headless.empty()) out += "; no head: " + join(headless);
  return out + "." + patching_verdict(doc, h) + composition_verdict(doc, h);
}

namespace report_parts {

std::string summary_body(const RunView& v) {
  const RunFiles& f = v.files;
  const Heads& h = v.heads;
  const json spec =
      f.heads.is_object() ? f.heads.value("specialization", json::object()) : json::object();
  const double acc = num(f.heads, "eval_accuracy", num(f.summary, "eval_accuracy"));
  const int R = static_cast<int>(h.relations.size());
  const double claimed = num(spec, "n_claimed");
  std::string cards = "<div class=\"cards\">";
  cards += card("eval accuracy", svg::number(acc, 3),
                acc >= kLearnedAccuracy ? "good" : (acc < 0.8 ? "bad" : ""));
  cards += card("s_match", svg::number(num(spec, "s_match"), 2));
  cards += card("s_max", svg::number(num(spec, "s_max"), 2));
  cards += card("relations claimed", std::isnan(claimed) ? "-" : fmt::format("{} / {}", claimed, R),
                !std::isnan(claimed) && claimed == R ? "good" : "");
  cards += card("heads x layers", fmt::format("{} x {}", h.heads, h.layers));
  const double s95 = steps_to(v.curves);
  cards += card("steps to 95%", s95 < 0 ? "never" : fmt::format("{}", s95));
  const double steps = num(f.summary, "steps");
  if (!std::isnan(steps)) cards += card("steps", fmt::format("{}", steps));
  const double secs = num(f.summary, "train_seconds");
  if (!std::isnan(secs)) cards += card("train time", fmt::format("{:.1f} s", secs));
  cards += "</div>";

  std::string lines;
  for (int r = 0; r < R; ++r) {
    const int k = assigned_head(h, r);
    std::string text = "no head left for this relation";
    if (k >= 0) {
      const double chance =
          head_baseline(h, static_cast<size_t>(k), "mass_uniform_baseline", static_cast<size_t>(r));
      text = fmt::format(
          "head {} carries {:.0f}% of its attention to this partner{}{}", h.label[k],
          100 * h.assigned_mass[k],
          std::isnan(chance) ? "" : fmt::format(" (a uniform head: {:.0f}%)", 100 * chance),
          h.claimed[k] ? "" : fmt::format(" (unclaimed: not above {})", h.threshold));
    }
    lines += "<li>" + tag(h, r, k >= 0 && h.claimed[k]) + " " + text + "</li>";
  }
  return cards +
         lede(
             "Each relation's best one-to-one head (the assignment behind s_match): how much of "
             "that head's attention, averaged over non-BOS tokens, lands on the relation's gold "
             "partner. A dashed tag marks an assignment that is not a claim.") +
         "<ul>" + lines + "</ul>";
}

}  // namespace report_parts
}  // namespace headlab
