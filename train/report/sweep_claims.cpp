// The sweep report's "claims" section: when each relation was first claimed in every run, in
// which order, and whether a setting's seeds agree on the order (sections.h).

#include <algorithm>

#include <fmt/format.h>

#include "train/report/sections.h"

namespace headlab::report_parts {

using nlohmann::json;

namespace {

// The relations in the task's order: the first heads.json that names them, else the keys of the
// first first_claims object.
std::vector<std::string> sweep_relations(const SweepView& v) {
  for (const SweepRunData& d : v.data)
    if (d.heads.is_object() && d.heads.contains("relations") && d.heads["relations"].is_array())
      return d.heads["relations"].get<std::vector<std::string>>();
  for (const json& r : v.runs)
    if (r.contains("first_claims") && r["first_claims"].is_object()) {
      std::vector<std::string> out;
      for (const auto& [k, step] : r["first_claims"].items()) out.push_back(k);
      return out;
    }
  return {};
}

std::string order_of(const json& run) {
  return run.contains("claim_order") && run["claim_order"].is_string()
             ? run["claim_order"].get<std::string>()
             : std::string();
}

std::string seed_cell(const SweepView& v, size_t i) {
  const std::string name = fmt::format("seed {}", v.runs[i].value("seed", 0));
  const std::string link = run_link(v, i);
  return link.empty() ? name : "<a href=\"" + svg::escape(link) + "\">" + name + "</a>";
}

// "the same order on all 10 seeds: HEAD → SEM → PREV", or the orders with their counts.
std::string agreement(const SweepView& v, const Group& g) {
  const auto orders = claim_orders(v, g);
  if (orders.empty()) return "no timeline";
  size_t n = 0;
  for (const auto& [order, k] : orders) n += k;
  if (orders.size() == 1)
    return fmt::format("the same order on {}: {}",
                       n == 1 ? std::string("its 1 seed") : fmt::format("all {} seeds", n),
                       svg::escape(orders[0].first));
  std::string out = fmt::format("{} orders over {} seeds: ", orders.size(), n);
  for (size_t k = 0; k < orders.size(); ++k)
    out += fmt::format("{}{} ({})", k ? "; " : "", svg::escape(orders[k].first), orders[k].second);
  return out;
}

}  // namespace

bool run_specialized(const SweepView& v, size_t i) {
  const json& r = v.runs[i];
  if (r.contains("specialized") && r["specialized"].is_boolean())
    return r["specialized"].get<bool>();
  if (!r.value("ok", false)) return false;
  const json& heads = i < v.data.size() ? v.data[i].heads : json();
  const size_t relations =
      heads.is_object() && heads.contains("relations") ? heads["relations"].size() : 0;
  return is_specialized(num(r, "eval_accuracy", 0), static_cast<int64_t>(num(r, "n_claimed", 0)),
                        relations, num(r, "s_match", 0));
}

std::vector<std::pair<std::string, size_t>> claim_orders(const SweepView& v, const Group& g) {
  std::vector<std::pair<std::string, size_t>> out;
  for (size_t i : g.runs) {
    const std::string order = order_of(v.runs[i]);
    if (order.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == order; });
    if (it == out.end()) {
      out.push_back({order, 1});
    } else {
      ++it->second;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string sweep_claims_body(const SweepView& v) {
  const std::vector<std::string> relations = sweep_relations(v);
  bool any = false;
  for (const json& r : v.runs) any = any || !order_of(r).empty();
  if (!any || relations.empty()) return "";
  std::string summary = "<ul>";
  for (const Group& g : v.groups)
    summary += "<li>" + svg::escape(g.label) + ": " + agreement(v, g) + ".</li>";
  summary += "</ul>";
  std::string table = "<table><tr><th class=\"l\">setting</th><th class=\"l\">seed</th>";
  for (const std::string& r : relations) table += "<th>" + svg::escape(r) + "</th>";
  table += "<th class=\"l\">order of the first claims</th></tr>";
  for (const Group& g : v.groups) {
    for (size_t i : g.runs) {
      const json& run = v.runs[i];
      const json claims = run.value("first_claims", json());
      table += "<tr><td class=\"l\">" + svg::escape(g.label) + "</td><td class=\"l\">" +
               seed_cell(v, i) + "</td>";
      for (const std::string& r : relations) {
        const json step = claims.is_object() ? claims.value(r, json()) : json();
        table += "<td>" +
                 (step.is_number()     ? fmt::format("{}", step.get<int64_t>())
                  : claims.is_object() ? std::string("never")
                                       : std::string("-")) +
                 "</td>";
      }
      const std::string order = order_of(run);
      table += "<td class=\"l\">" + (order.empty() ? std::string("-") : svg::escape(order)) +
               "</td></tr>";
    }
  }
  return lede(
             "A relation is first claimed at the first evaluation (timeline.jsonl) at which the "
             "head assigned to it puts more than half of its attention on the partner. "
             "\u2192: claimed later; =: at the same evaluation. Whether each setting's seeds "
             "claim in the same order:") +
         summary + table + "</table>";
}

}  // namespace headlab::report_parts
