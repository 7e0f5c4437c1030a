#pragma once
// What a key accepts: a type with a range, choices or a length, plus its documentation. The
// config schema (train/config/schema.h) describes every config key with one, and a task
// (train/tasks/registry.h) describes its own keys with one; both check values here, so their
// messages read the same:
//   "<file>:4:11: task.colours = 1 is out of range: expected an integer in [2, 64]"
//   "<file>:3:13: task.relations has type integer at element 1 but expected an array of ..."

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "layers/options.h"

namespace headlab {

enum class OptionType { integer, real, boolean, string, real_array, string_array };

struct OptionSpec {
  OptionType type = OptionType::integer;
  // Numbers (and array elements): lo <= v <= hi, with open ends where *_open.
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;
  // Arrays: allowed lengths.
  size_t min_len = 0, max_len = 0;
  // Strings (and string array elements): allowed values; empty means any non-empty string.
  std::vector<std::string> choices;
  bool shape = false;  // changes parameter or optimizer-state shapes
  std::string doc;

  // Specs in one expression: OptionSpec::integer(2, 64).shaped().documented("...").
  static OptionSpec integer(double lo, double hi);
  static OptionSpec real(double lo, double hi, bool lo_open = false, bool hi_open = false);
  static OptionSpec boolean();
  // A string from `choices` (any non-empty string when empty).
  static OptionSpec one_of(std::vector<std::string> choices);
  // An array of min_len to max_len distinct names from `choices`.
  static OptionSpec names(size_t min_len, size_t max_len, std::vector<std::string> choices);
  OptionSpec shaped() const;
  OptionSpec documented(std::string text) const;
};

// A value converted to its spec's type.
using TypedValue =
    std::variant<int64_t, double, bool, std::string, std::vector<double>, std::vector<std::string>>;

// "integer", "number", "boolean", "string", "array of numbers", "array of strings".
const char* option_type_name(OptionType type);
// "an integer in [1, 8192]", "a number in [0, 1)", "one of \"pre\", \"post\"", ...
std::string expected_text(const OptionSpec& spec);

// `value` as spec.type (an integer is accepted where a number is expected). Throws
// headlab::Error "<where>: <key> has type <type>[ at element i] but expected <expected_text>"
// for any other type.
TypedValue convert_option(std::string_view key, const OptionSpec& spec, const OptionValue& value);
// Throws headlab::Error "<where>: <key> = <value> is out of range: expected ..." (or not one of
// the choices, with a did-you-mean; or an array of the wrong length or with a repeated name)
// when `value` violates the spec. NaN and Inf are rejected. `where` may be empty.
void check_option(std::string_view key, const OptionSpec& spec, const TypedValue& value,
                  const std::string& where);

// The typed value as an OptionValue (arrays element by element), without a position.
OptionValue option_value(const TypedValue& value);

// TOML spelling of a value: 64, 0.003, true, "pre", [0.9, 0.98], ["PREV", "HEAD"].
std::string format_value(const TypedValue& value);
std::string format_value(const OptionValue& value);
// TOML text of a table's entries, "key = value" a line, keys quoted where they are not bare.
std::string format_entries(const OptionMap& options);

// Levenshtein distance (with adjacent transpositions); and the closest candidate within a small
// distance, or "".
size_t edit_distance(std::string_view a, std::string_view b);
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace headlab
