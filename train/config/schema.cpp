#include "train/config/schema.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace headlab {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

std::string format_real(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string format_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string format_number(const KeySpec& spec, double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (spec.type == KeyType::integer) {
    if (v >= double(kMaxInt)) return fmt::format("{}", kMaxInt);
    return fmt::format("{}", static_cast<int64_t>(v));
  }
  return format_real(v);
}

std::string choices_text(const std::vector<std::string>& choices) {
  std::string out;
  for (const auto& c : choices) out += (out.empty() ? "" : ", ") + format_string(c);
  return out;
}

bool in_range(const KeySpec& s, double v) {
  if (!std::isfinite(v)) return false;
  if (s.lo_open ? !(v > s.lo) : !(v >= s.lo)) return false;
  if (s.hi_open ? !(v < s.hi) : !(v <= s.hi)) return false;
  return true;
}

std::string range_text(const KeySpec& s) {
  if (std::isinf(s.hi)) return fmt::format("{} {}", s.lo_open ? ">" : ">=", format_number(s, s.lo));
  return fmt::format("{}{}, {}{}", s.lo_open ? "(" : "[", format_number(s, s.lo),
                     format_number(s, s.hi), s.hi_open ? ")" : "]");
}

void check_string(const KeySpec& spec, const std::string& v, const std::string& where) {
  if (spec.choices.empty()) {
    if (v.empty()) fail("{}: {} is empty but expected a name", where, spec.key);
    return;
  }
  if (std::find(spec.choices.begin(), spec.choices.end(), v) != spec.choices.end()) return;
  const std::string hint = closest_match(v, spec.choices);
  fail("{}: {} = {} is not one of {}{}", where, spec.key, format_string(v),
       choices_text(spec.choices),
       hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint));
}

void check_number(const KeySpec& spec, double v, const std::string& where,
                  const std::string& shown) {
  if (std::isnan(v) || std::isinf(v))
    fail("{}: {} = {} is not a finite number: expected {}", where, spec.key, shown,
         expected_text(spec));
  if (!in_range(spec, v))
    fail("{}: {} = {} is out of range: expected {}", where, spec.key, shown, expected_text(spec));
}

}  // namespace

const KeySpec* find_key(std::string_view dotted) {
  for (const auto& k : config_keys())
    if (k.key == dotted) return &k;
  return nullptr;
}

const std::vector<std::string>& config_tables() {
  static const std::vector<std::string> tables = {"model",    "task",  "optim",
                                                  "schedule", "train", "runtime"};
  return tables;
}

const std::vector<OptionTableSpec>& option_tables() {
  static const std::vector<OptionTableSpec> tables = {
      {"model.attention_options", "model.attention_layer", &ModelConfig::attention_options},
      {"model.ffn_options", "model.ffn_layer", &ModelConfig::ffn_options},
      {"model.norm_options", "model.norm_layer", &ModelConfig::norm_options},
  };
  return tables;
}

const char* key_type_name(KeyType type) {
  switch (type) {
    case KeyType::integer:
      return "integer";
    case KeyType::real:
      return "number";
    case KeyType::boolean:
      return "boolean";
    case KeyType::string:
      return "string";
    case KeyType::real_array:
      return "array of numbers";
    case KeyType::string_array:
      return "array of strings";
  }
  return "?";
}

std::string expected_text(const KeySpec& s) {
  switch (s.type) {
    case KeyType::integer:
      return "an integer in " + range_text(s);
    case KeyType::real:
      return std::isinf(s.hi) ? "a finite number " + range_text(s) : "a number in " + range_text(s);
    case KeyType::boolean:
      return "true or false";
    case KeyType::string:
      return s.choices.empty() ? "a non-empty string" : "one of " + choices_text(s.choices);
    case KeyType::real_array:
      return fmt::format("an array of {} numbers, each in {}",
                         s.min_len == s.max_len ? fmt::format("{}", s.min_len)
                                                : fmt::format("{} to {}", s.min_len, s.max_len),
                         range_text(s));
    case KeyType::string_array:
      return fmt::format("an array of {} to {} distinct names from {}", s.min_len, s.max_len,
                         choices_text(s.choices));
  }
  return "?";
}

void check_value(const KeySpec& spec, const ConfigValue& value, const std::string& where) {
  switch (spec.type) {
    case KeyType::integer: {
      const int64_t v = std::get<int64_t>(value);
      check_number(spec, static_cast<double>(v), where, fmt::format("{}", v));
      return;
    }
    case KeyType::real: {
      const double v = std::get<double>(value);
      check_number(spec, v, where, format_real(v));
      return;
    }
    case KeyType::boolean:
      return;
    case KeyType::string:
      check_string(spec, std::get<std::string>(value), where);
      return;
    case KeyType::real_array: {
      const auto& v = std::get<std::vector<double>>(value);
      if (v.size() < spec.min_len || v.size() > spec.max_len)
        fail("{}: {} = {} has {} elements: expected {}", where, spec.key, format_value(value),
             v.size(), expected_text(spec));
      for (double x : v)
        if (!in_range(spec, x))
          fail("{}: {} = {} has an element {} out of range: expected {}", where, spec.key,
               format_value(value), format_real(x), expected_text(spec));
      return;
    }
    case KeyType::string_array: {
      const auto& v = std::get<std::vector<std::string>>(value);
      if (v.size() < spec.min_len || v.size() > spec.max_len)
        fail("{}: {} = {} has {} elements: expected {}", where, spec.key, format_value(value),
             v.size(), expected_text(spec));
      for (size_t i = 0; i < v.size(); ++i) {
        if (std::count(v.begin(), v.end(), v[i]) > 1)
          fail("{}: {} = {} names \"{}\" twice: expected {}", where, spec.key, format_value(value),
               v[i], expected_text(spec));
        check_string(spec, v[i], where);
      }
      return;
    }
  }
}

std::string format_value(const ConfigValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return format_real(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return format_string(v); }
    std::string operator()(const std::vector<double>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + format_real(v[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + format_string(v[i]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus adjacent transpositions ("haeds" -> "heads" is
  // one edit, the commonest typo).
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  // Accept up to a third of the word's length in edits (at least 1, at most 3): "modle" ->
  // "model", but not "x" -> "d_ff".
  const size_t limit = std::clamp<size_t>((word.size() + 1) / 3, 1, 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) best = c, best_distance = d;
  }
  return best;
}

std::string config_reference_markdown() {
  const Config defaults;
  std::string out = "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& k : config_keys()) {
    const std::string def =
        k.required ? "*required*" : fmt::format("`{}`", format_value(k.get(defaults)));
    std::string allowed = expected_text(k);
    if (k.shape) allowed += "; shape-relevant";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", k.key, key_type_name(k.type), def, allowed,
                       k.doc);
  }
  return out;
}

}  // namespace headlab
