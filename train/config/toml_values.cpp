#include "train/config/toml_values.h"

#include <sstream>

#include <fmt/format.h>

namespace headlab {

std::string position(const toml::source_region& src, std::string_view fallback) {
  const std::string path = src.path ? *src.path : std::string(fallback);
  return fmt::format("{}:{}:{}", path, src.begin.line, src.begin.column);
}

const char* node_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    default:
      return "none";
  }
}

OptionValue to_option_value(const toml::node& node, std::string_view source) {
  OptionValue v;
  if (auto n = node.as_integer()) {
    v = n->get();
  } else if (auto f = node.as_floating_point()) {
    v = f->get();
  } else if (auto b = node.as_boolean()) {
    v = b->get();
  } else if (auto s = node.as_string()) {
    v = s->get();
  } else if (auto a = node.as_array()) {
    OptionArray elements;
    for (const toml::node& e : *a) elements.push_back(to_option_value(e, source));
    v = std::move(elements);
  } else {
    std::ostringstream text;
    node.visit([&](const auto& n) { text << toml::toml_formatter{n}; });
    v = OptionValue::Unsupported{node_type_name(node), text.str()};
  }
  if (node.source().begin.line != 0) v.where = position(node.source(), source);
  return v;
}

}  // namespace headlab
