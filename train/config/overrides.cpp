#include "train/config/overrides.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "train/config/schema.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(0, 1);
  return s;
}

// The type the schema (or the task) gives `key`, when it gives one.
std::optional<OptionType> expected_type(const std::string& key) {
  if (const KeySpec* spec = find_key(key)) return spec->type;
  if (key.starts_with("task.") && key != "task.name")
    for (const std::string& task : registered_tasks())
      for (const TaskOptions::Read& r : describe_task(task))
        if ("task." + r.key == key) return r.spec.type;
  return std::nullopt;
}

// A TOML basic string holding `text`.
std::string toml_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool is_bare_word(const std::string& text) {
  return !text.empty() && (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_') &&
         std::all_of(text.begin(), text.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

// The value as people type it, as TOML: a bare string where the key is a string (model.norm=post),
// a,b,c where it is an array (optim.betas=0.9,0.98; task.relations=PREV,HEAD); TOML syntax
// ("post", [0.9, 0.98]) always works too.
}  // namespace

std::string override_as_toml(const std::string& key, const std::string& text) {
  const std::optional<OptionType> type = expected_type(key);
  const bool quoted = !text.empty() && (text[0] == '"' || text[0] == '\'');
  if (type == OptionType::string && !quoted) return toml_string(text);
  if ((type == OptionType::real_array || type == OptionType::string_array) && !text.empty() &&
      text[0] != '[') {
    std::string array = "[";
    size_t begin = 0;
    while (begin <= text.size()) {
      size_t end = text.find(',', begin);
      if (end == std::string::npos) end = text.size();
      const std::string element = trim(text.substr(begin, end - begin));
      const bool bare = type == OptionType::string_array && !element.empty() && element[0] != '"' &&
                        element[0] != '\'';
      array += (begin ? ", " : "") + (bare ? toml_string(element) : element);
      begin = end + 1;
    }
    return array + "]";
  }
  if (!type && !quoted && is_bare_word(text) && text != "true" && text != "false" &&
      text != "inf" && text != "nan")
    return toml_string(text);  // a layer option whose type only its layer knows
  return text;
}

}  // namespace headlab
