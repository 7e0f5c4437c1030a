// When each relation is first claimed over training, and the order of the claims (report.h): what
// a sweep compares across seeds.

#include <algorithm>

#include "train/report/report.h"

namespace headlab {

using nlohmann::json;

namespace {

// The mass that relation `r`'s assigned head puts on its partner in one timeline row, or -1 when
// the row has no assignment for it or is not as the trainer writes it.
double assigned_mass(const json& row, const std::string& r) {
  if (!row.is_object() || !row.contains("assignment") || !row.contains("mass")) return -1;
  const json& assignment = row["assignment"];
  const json& mass = row["mass"];
  if (!assignment.is_object() || !mass.is_array()) return -1;
  const auto ref = assignment.find(r);
  if (ref == assignment.end() || !ref->is_array() || ref->size() != 2 ||
      !(*ref)[0].is_number_integer() || !(*ref)[1].is_number_integer())
    return -1;
  const int64_t layer = (*ref)[0].get<int64_t>(), head = (*ref)[1].get<int64_t>();
  if (layer < 0 || head < 0 || layer >= static_cast<int64_t>(mass.size())) return -1;
  const json& heads = mass[static_cast<size_t>(layer)];
  if (!heads.is_array() || head >= static_cast<int64_t>(heads.size())) return -1;
  const json& cell = heads[static_cast<size_t>(head)];
  if (!cell.is_object() || !cell.contains(r) || !cell[r].is_number()) return -1;
  return cell[r].get<double>();
}

}  // namespace

std::vector<FirstClaim> first_claims(const std::vector<json>& timeline,
                                     const std::vector<std::string>& relations) {
  std::vector<FirstClaim> out;
  for (const std::string& r : relations) {
    FirstClaim c{r, std::nullopt};
    for (const json& row : timeline) {
      if (!row.is_object() || !row.contains("step") || !row["step"].is_number_integer()) continue;
      if (assigned_mass(row, r) > 0.5) {
        c.step = row["step"].get<int64_t>();
        break;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string claim_order(const std::vector<FirstClaim>& claims) {
  std::vector<const FirstClaim*> claimed;
  std::string never;
  for (const FirstClaim& c : claims) {
    if (c.step) {
      claimed.push_back(&c);
    } else {
      never += (never.empty() ? "" : ", ") + c.relation;
    }
  }
  std::stable_sort(claimed.begin(), claimed.end(),
                   [](const FirstClaim* a, const FirstClaim* b) { return *a->step < *b->step; });
  std::string out;
  for (size_t i = 0; i < claimed.size(); ++i) {
    if (i > 0) out += *claimed[i]->step == *claimed[i - 1]->step ? " = " : " \u2192 ";
    out += claimed[i]->relation;
  }
  if (!never.empty()) out += (out.empty() ? "" : "; ") + never + " never";
  return out;
}

}  // namespace headlab
