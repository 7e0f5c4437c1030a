#include "optim/declared_options.h"

#include "core/error.h"

namespace headlab {

namespace {

const OptionValue& find_or_fail(const OptionMap& options, std::string_view key) {
  const OptionValue* v = options.find(key);
  if (!v) fail("options: '{}' is not in the resolved table (declare it to read it)", key);
  return *v;
}

}  // namespace

OptionMap resolve_declared_options(std::string_view table, const DeclaredOptions& declared,
                                   const OptionMap& given) {
  std::vector<std::string> known;
  for (const DeclaredOption& d : declared) known.push_back(d.key);
  for (const auto& [key, value] : given) {
    bool found = false;
    for (const DeclaredOption& d : declared) found = found || d.key == key;
    if (found) continue;
    const std::string where = value.key_where.empty() ? value.where : value.key_where;
    const std::string hint = closest_match(key, known);
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    fail("{}{}unknown key {}.{} ({})", where, where.empty() ? "" : ": ", table, key,
         !hint.empty()  ? fmt::format("did you mean {}.{}?", table, hint)
         : list.empty() ? std::string("this table takes no keys")
                        : "known: " + list);
  }
  OptionMap resolved;
  for (const DeclaredOption& d : declared) {
    const OptionValue* value = given.find(d.key);
    if (!value) {
      resolved.set(d.key, option_value(d.fallback));
      continue;
    }
    const std::string dotted = std::string(table) + "." + d.key;
    const TypedValue typed = convert_option(dotted, d.spec, *value);
    if (typed != d.fallback) check_option(dotted, d.spec, typed, value->where);
    OptionValue kept = option_value(typed);  // as converted: 2 given for a number reads 2.0
    kept.where = value->where;
    kept.key_where = value->key_where;
    resolved.set(d.key, std::move(kept));
  }
  return resolved;
}

double option_real(const OptionMap& options, std::string_view key) {
  const OptionValue& v = find_or_fail(options, key);
  if (const double* x = v.get_if<double>()) return *x;
  if (const int64_t* n = v.get_if<int64_t>()) return static_cast<double>(*n);
  fail("options: '{}' is {} but was read as a number", key, v.type_article());
}

int64_t option_int(const OptionMap& options, std::string_view key) {
  const OptionValue& v = find_or_fail(options, key);
  if (const int64_t* n = v.get_if<int64_t>()) return *n;
  fail("options: '{}' is {} but was read as an integer", key, v.type_article());
}

bool option_bool(const OptionMap& options, std::string_view key) {
  const OptionValue& v = find_or_fail(options, key);
  if (const bool* b = v.get_if<bool>()) return *b;
  fail("options: '{}' is {} but was read as a boolean", key, v.type_article());
}

std::string option_string(const OptionMap& options, std::string_view key) {
  const OptionValue& v = find_or_fail(options, key);
  if (const std::string* s = v.get_if<std::string>()) return *s;
  fail("options: '{}' is {} but was read as a string", key, v.type_article());
}

}  // namespace headlab
