#pragma once
// The config's TOML meets the neutral option types (layers/options.h) here and nowhere else:
// the loader turns every value it reads into an OptionValue that remembers its position.
// Only train/config includes this header (it pulls in toml++, which compiles slowly).

#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "layers/options.h"

namespace headlab {

// "path:line:col" of a source region; the path is `fallback` when toml++ has none.
std::string position(const toml::source_region& src, std::string_view fallback);
// TOML's name of the node's type: "table", "array", "string", "integer", "float", ...
const char* node_type_name(const toml::node& node);
// The node as an OptionValue: numbers, booleans, strings and arrays of them as such, anything
// else as OptionValue::Unsupported. `where` is set from the node's position (path `source`
// when the node has none), recursively for array elements.
OptionValue to_option_value(const toml::node& node, std::string_view source);

}  // namespace headlab
