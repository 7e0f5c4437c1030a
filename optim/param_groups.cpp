#include "optim/param_groups.h"

#include <cmath>

#include "core/error.h"

namespace headlab {

namespace {

// A few names, for the message of a pattern that matches none.
std::string some_names(const NamedParameters& params) {
  std::string out;
  for (size_t i = 0; i < params.size() && i < 4; ++i)
    out += (i ? ", " : "") + ("\"" + params[i].name + "\"");
  return params.size() > 4 ? out + ", ..." : out;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view name) {
  // Greedy matching with backtracking to the last star: linear in practice, no recursion.
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<ParameterGroup> parameter_groups(const NamedParameters& params,
                                             const std::vector<std::string>& no_decay,
                                             const std::vector<LrScale>& lr_scale) {
  std::vector<ParameterGroup> groups(params.size());
  for (const std::string& pattern : no_decay) {
    bool any = false;
    for (size_t i = 0; i < params.size(); ++i)
      if (glob_match(pattern, params[i].name)) {
        groups[i].weight_decay = false;
        any = true;
      }
    if (!any)
      fail("optim.no_decay: pattern \"{}\" matches no parameter (names look like {})", pattern,
           some_names(params));
  }
  std::vector<const LrScale*> scaled_by(params.size(), nullptr);
  for (const LrScale& s : lr_scale) {
    if (!std::isfinite(s.scale) || s.scale < 0.0)
      fail("optim.lr_scale: \"{}\" = {} but expected a finite number >= 0", s.pattern, s.scale);
    bool any = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (!glob_match(s.pattern, params[i].name)) continue;
      if (scaled_by[i])
        fail("optim.lr_scale: parameter \"{}\" matches both \"{}\" and \"{}\": expected one scale",
             params[i].name, scaled_by[i]->pattern, s.pattern);
      scaled_by[i] = &s;
      groups[i].lr_scale = s.scale;
      any = true;
    }
    if (!any)
      fail("optim.lr_scale: pattern \"{}\" matches no parameter (names look like {})", s.pattern,
           some_names(params));
  }
  return groups;
}

}  // namespace headlab
