#include "layers/options.h"

#include <algorithm>

namespace headlab {

const char* OptionValue::type_article() const {
  switch (data.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a float";
    case 2:
      return "a boolean";
    case 3:
      return "a string";
    case 4:
      return "an array";
    default:
      return std::get<Unsupported>(data).type == "table" ? "a table" : "a date/time";
  }
}

std::string OptionValue::type_name() const {
  switch (data.index()) {
    case 0:
      return "integer";
    case 1:
      return "float";
    case 2:
      return "boolean";
    case 3:
      return "string";
    case 4:
      return "array";
    default:
      return std::get<Unsupported>(data).type;
  }
}

OptionMap::OptionMap(std::initializer_list<Entry> entries) {
  for (const Entry& e : entries) set(e.first, e.second);
}

const OptionValue* OptionMap::find(std::string_view key) const {
  for (const Entry& e : entries_)
    if (e.first == key) return &e.second;
  return nullptr;
}

void OptionMap::set(std::string key, OptionValue value) {
  for (Entry& e : entries_)
    if (e.first == key) {
      e.second = std::move(value);
      return;
    }
  entries_.emplace_back(std::move(key), std::move(value));
}

void OptionMap::sort() {
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.first < b.first; });
}

}  // namespace headlab
