#include "layers/option_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace headlab {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int64_t>::max();

std::string prefix(const std::string& where) {
  return where.empty() ? "" : where + ": ";
}

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

std::string format_number(const OptionSpec& spec, double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (spec.type == OptionType::integer) {
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

bool in_range(const OptionSpec& s, double v) {
  if (!std::isfinite(v)) return false;
  if (s.lo_open ? !(v > s.lo) : !(v >= s.lo)) return false;
  if (s.hi_open ? !(v < s.hi) : !(v <= s.hi)) return false;
  return true;
}

std::string range_text(const OptionSpec& s) {
  if (std::isinf(s.hi)) return fmt::format("{} {}", s.lo_open ? ">" : ">=", format_number(s, s.lo));
  return fmt::format("{}{}, {}{}", s.lo_open ? "(" : "[", format_number(s, s.lo),
                     format_number(s, s.hi), s.hi_open ? ")" : "]");
}

[[noreturn]] void type_error(std::string_view key, const OptionSpec& spec, const OptionValue& v,
                             const std::string& where, std::string_view detail = {}) {
  fail("{}{} has type {}{} but expected {}", prefix(where), key, v.type_name(), detail,
       expected_text(spec));
}

template <class T>
std::vector<T> convert_array(std::string_view key, const OptionSpec& spec, const OptionArray& a,
                             const std::string& where) {
  std::vector<T> out;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string detail = fmt::format(" at element {}", i);
    if constexpr (std::is_same_v<T, std::string>) {
      const std::string* s = a[i].get_if<std::string>();
      if (!s) type_error(key, spec, a[i], where, detail);
      out.push_back(*s);
    } else if (const double* f = a[i].get_if<double>()) {
      out.push_back(*f);
    } else if (const int64_t* n = a[i].get_if<int64_t>()) {
      out.push_back(static_cast<double>(*n));
    } else {
      type_error(key, spec, a[i], where, detail);
    }
  }
  return out;
}

void check_string(std::string_view key, const OptionSpec& spec, const std::string& v,
                  const std::string& where) {
  if (spec.choices.empty()) {
    if (v.empty()) fail("{}{} is empty but expected a name", prefix(where), key);
    return;
  }
  if (std::find(spec.choices.begin(), spec.choices.end(), v) != spec.choices.end()) return;
  const std::string hint = closest_match(v, spec.choices);
  fail("{}{} = {} is not one of {}{}", prefix(where), key, format_string(v),
       choices_text(spec.choices),
       hint.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", hint));
}

void check_number(std::string_view key, const OptionSpec& spec, double v, const std::string& where,
                  const std::string& shown) {
  if (std::isnan(v) || std::isinf(v))
    fail("{}{} = {} is not a finite number: expected {}", prefix(where), key, shown,
         expected_text(spec));
  if (!in_range(spec, v))
    fail("{}{} = {} is out of range: expected {}", prefix(where), key, shown, expected_text(spec));
}

template <class T>
void check_length(std::string_view key, const OptionSpec& spec, const std::vector<T>& v,
                  const std::string& where) {
  if (v.size() < spec.min_len || v.size() > spec.max_len)
    fail("{}{} = {} has {} elements: expected {}", prefix(where), key, format_value(v), v.size(),
         expected_text(spec));
}

}  // namespace

OptionSpec OptionSpec::integer(double lo, double hi) {
  OptionSpec s;
  s.type = OptionType::integer;
  s.lo = lo;
  s.hi = hi;
  return s;
}

OptionSpec OptionSpec::real(double lo, double hi, bool lo_open, bool hi_open) {
  OptionSpec s;
  s.type = OptionType::real;
  s.lo = lo;
  s.hi = hi;
  s.lo_open = lo_open;
  s.hi_open = hi_open;
  return s;
}

OptionSpec OptionSpec::boolean() {
  OptionSpec s;
  s.type = OptionType::boolean;
  return s;
}

OptionSpec OptionSpec::one_of(std::vector<std::string> choices) {
  OptionSpec s;
  s.type = OptionType::string;
  s.choices = std::move(choices);
  return s;
}

OptionSpec OptionSpec::names(size_t min_len, size_t max_len, std::vector<std::string> choices) {
  OptionSpec s;
  s.type = OptionType::string_array;
  s.min_len = min_len;
  s.max_len = max_len;
  s.choices = std::move(choices);
  return s;
}

OptionSpec OptionSpec::shaped() const {
  OptionSpec s = *this;
  s.shape = true;
  return s;
}

OptionSpec OptionSpec::documented(std::string text) const {
  OptionSpec s = *this;
  s.doc = std::move(text);
  return s;
}

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::integer:
      return "integer";
    case OptionType::real:
      return "number";
    case OptionType::boolean:
      return "boolean";
    case OptionType::string:
      return "string";
    case OptionType::real_array:
      return "array of numbers";
    case OptionType::string_array:
      return "array of strings";
  }
  return "?";
}

std::string expected_text(const OptionSpec& s) {
  switch (s.type) {
    case OptionType::integer:
      return "an integer in " + range_text(s);
    case OptionType::real:
      return std::isinf(s.hi) ? "a finite number " + range_text(s) : "a number in " + range_text(s);
    case OptionType::boolean:
      return "true or false";
    case OptionType::string:
      return s.choices.empty() ? "a non-empty string" : "one of " + choices_text(s.choices);
    case OptionType::real_array:
      return fmt::format("an array of {} numbers, each in {}",
                         s.min_len == s.max_len ? fmt::format("{}", s.min_len)
                                                : fmt::format("{} to {}", s.min_len, s.max_len),
                         range_text(s));
    case OptionType::string_array:
      if (s.choices.empty())
        return fmt::format("an array of {} to {} distinct non-empty strings", s.min_len, s.max_len);
      return fmt::format("an array of {} to {} distinct names from {}", s.min_len, s.max_len,
                         choices_text(s.choices));
  }
  return "?";
}

TypedValue convert_option(std::string_view key, const OptionSpec& spec, const OptionValue& v) {
  switch (spec.type) {
    case OptionType::integer:
      if (const int64_t* n = v.get_if<int64_t>()) return *n;
      break;
    case OptionType::real:
      if (const double* f = v.get_if<double>()) return *f;
      if (const int64_t* n = v.get_if<int64_t>()) return static_cast<double>(*n);
      break;
    case OptionType::boolean:
      if (const bool* b = v.get_if<bool>()) return *b;
      break;
    case OptionType::string:
      if (const std::string* s = v.get_if<std::string>()) return *s;
      break;
    case OptionType::real_array:
      if (const OptionArray* a = v.get_if<OptionArray>())
        return convert_array<double>(key, spec, *a, v.where);
      break;
    case OptionType::string_array:
      if (const OptionArray* a = v.get_if<OptionArray>())
        return convert_array<std::string>(key, spec, *a, v.where);
      break;
  }
  type_error(key, spec, v, v.where);
}

void check_option(std::string_view key, const OptionSpec& spec, const TypedValue& value,
                  const std::string& where) {
  if (const int64_t* n = std::get_if<int64_t>(&value)) {
    check_number(key, spec, static_cast<double>(*n), where, fmt::format("{}", *n));
  } else if (const double* f = std::get_if<double>(&value)) {
    check_number(key, spec, *f, where, format_real(*f));
  } else if (const std::string* s = std::get_if<std::string>(&value)) {
    check_string(key, spec, *s, where);
  } else if (const auto* reals = std::get_if<std::vector<double>>(&value)) {
    check_length(key, spec, *reals, where);
    for (double x : *reals)
      if (!in_range(spec, x))
        fail("{}{} = {} has an element {} out of range: expected {}", prefix(where), key,
             format_value(value), format_real(x), expected_text(spec));
  } else if (const auto* names = std::get_if<std::vector<std::string>>(&value)) {
    check_length(key, spec, *names, where);
    for (const std::string& name : *names) {
      if (std::count(names->begin(), names->end(), name) > 1)
        fail("{}{} = {} names \"{}\" twice: expected {}", prefix(where), key, format_value(value),
             name, expected_text(spec));
      check_string(key, spec, name, where);
    }
  }
}

OptionValue option_value(const TypedValue& value) {
  if (const int64_t* n = std::get_if<int64_t>(&value)) return *n;
  if (const double* f = std::get_if<double>(&value)) return *f;
  if (const bool* b = std::get_if<bool>(&value)) return *b;
  if (const std::string* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* reals = std::get_if<std::vector<double>>(&value))
    return OptionArray(reals->begin(), reals->end());
  const auto& names = std::get<std::vector<std::string>>(value);
  return OptionArray(names.begin(), names.end());
}

std::string format_entries(const OptionMap& options) {
  std::string out;
  for (const auto& [key, value] : options) {
    const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
    out +=
        fmt::format("{} = {}\n", bare ? key : format_value(TypedValue(key)), format_value(value));
  }
  return out;
}

std::string format_value(const TypedValue& value) {
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

std::string format_value(const OptionValue& value) {
  if (const OptionArray* a = value.get_if<OptionArray>()) {
    std::string out = "[";
    for (size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + format_value((*a)[i]);
    return out + "]";
  }
  if (const int64_t* n = value.get_if<int64_t>()) return format_value(TypedValue(*n));
  if (const double* f = value.get_if<double>()) return format_value(TypedValue(*f));
  if (const bool* b = value.get_if<bool>()) return format_value(TypedValue(*b));
  if (const std::string* s = value.get_if<std::string>()) return format_value(TypedValue(*s));
  return std::get<OptionValue::Unsupported>(value.data).text;
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

}  // namespace headlab
