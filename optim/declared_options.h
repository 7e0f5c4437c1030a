#pragma once
// The options an optimizer or a schedule declares for its own table ([optim.options],
// [schedule.options]): each key with its OptionSpec (layers/option_schema.h: type, range,
// choices, a line of documentation) and its default. The config checks a table against the
// declaration before anything is built, with the messages layer and task options give:
//   "t.toml:9:7: optim.options.beta1 = 1.5 is out of range: expected a number in [0, 1)"
//   "t.toml:9:1: unknown key optim.options.beta (did you mean optim.options.beta1?)"
// and the factory then reads the resolved table (every declared key, given or default) with
// the typed readers below, which cannot fail on a resolved table.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "layers/option_schema.h"
#include "layers/options.h"

namespace headlab {

struct DeclaredOption {
  std::string key;
  OptionSpec spec;
  TypedValue fallback;  // the default; must have spec's type
};
using DeclaredOptions = std::vector<DeclaredOption>;

// `given` checked against `declared` and completed with the defaults, in declaration order
// (positions kept). `table` names the table in messages ("optim.options"). Throws
// headlab::Error for a key not declared (with a did-you-mean, or the declared keys), a value of
// the wrong type or out of range; each names "<table>.<key>" and the value's position.
OptionMap resolve_declared_options(std::string_view table, const DeclaredOptions& declared,
                                   const OptionMap& given);

// Typed reads of a resolved table. Throw headlab::Error naming `key` when it is absent or of
// another type (a factory reading a key it did not declare).
double option_real(const OptionMap& options, std::string_view key);
int64_t option_int(const OptionMap& options, std::string_view key);
bool option_bool(const OptionMap& options, std::string_view key);
std::string option_string(const OptionMap& options, std::string_view key);

}  // namespace headlab
