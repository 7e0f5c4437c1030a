#include "train/tasks/jsonl_reader.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/io/files.h"
#include "train/io/json.h"

namespace headlab {

using nlohmann::json;

namespace {

const char* kind(const json& v) {
  return v.is_null()      ? "null"
         : v.is_array()   ? "an array"
         : v.is_object()  ? "an object"
         : v.is_string()  ? "a string"
         : v.is_boolean() ? "a boolean"
                          : "a number";
}

JsonlSentence parse_line(std::string_view text, const std::string& at, const JsonlLimits& limits) {
  const json doc = parse_json(text, at);  // "<file>:<line>: not valid JSON: ..."
  for (const auto& [key, value] : doc.items())
    if (key != "tokens" && key != "labels" && key != "relations")
      fail("{}: unknown key \"{}\": expected only tokens, labels and relations", at, key);
  JsonlSentence s;
  const auto tokens = doc.find("tokens");
  if (tokens == doc.end()) fail("{}: no \"tokens\": expected an array of strings", at);
  if (!tokens->is_array() || tokens->empty())
    fail("{}: tokens is {}: expected a non-empty array of strings", at,
         tokens->is_array() ? "empty" : kind(*tokens));
  if (tokens->size() > limits.max_tokens)
    fail("{}: tokens has {} entries, more than the limit of {}", at, tokens->size(),
         limits.max_tokens);
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& t = (*tokens)[i];
    if (!t.is_string() || t.get_ref<const std::string&>().empty())
      fail("{}: tokens[{}] is {}: expected a non-empty string", at, i,
           t.is_string() ? "empty" : kind(t));
    s.tokens.push_back(t.get<std::string>());
  }
  const size_t n = s.tokens.size();
  if (const auto labels = doc.find("labels"); labels != doc.end()) {
    if (!labels->is_array() || labels->size() != n)
      fail("{}: labels is {}: expected an array of {} strings or nulls, one per token", at,
           labels->is_array() ? fmt::format("an array of {}", labels->size()) : kind(*labels), n);
    for (size_t i = 0; i < n; ++i) {
      const json& l = (*labels)[i];
      if (l.is_null()) {
        s.labels.emplace_back();
      } else if (l.is_string() && !l.get_ref<const std::string&>().empty()) {
        s.labels.emplace_back(l.get<std::string>());
      } else {
        fail("{}: labels[{}] is {}: expected a non-empty string or null", at, i,
             l.is_string() ? "empty" : kind(l));
      }
    }
  } else {
    s.labels.assign(n, std::nullopt);
  }
  if (const auto rel = doc.find("relations"); rel != doc.end()) {
    if (!rel->is_object()) fail("{}: relations is {}: expected an object", at, kind(*rel));
    for (const auto& [name, p] : rel->items()) {
      if (!p.is_array() || p.size() != n)
        fail("{}: relations.{} is {}: expected an array of {} integers, one per token", at, name,
             p.is_array() ? fmt::format("an array of {}", p.size()) : kind(p), n);
      std::vector<int32_t> partners;
      for (size_t i = 0; i < n; ++i) {
        const json& v = p[i];
        if (!v.is_number_integer() || v.get<int64_t>() < -1 ||
            v.get<int64_t>() >= static_cast<int64_t>(n))
          fail("{}: relations.{}[{}] is {}: expected a token index in [0, {}) or -1 (none)", at,
               name, i, v.dump(), n);
        partners.push_back(static_cast<int32_t>(v.get<int64_t>()));
      }
      s.relations.emplace_back(name, std::move(partners));
    }
  }
  return s;
}

}  // namespace

const std::vector<int32_t>* JsonlSentence::partners(const std::string& name) const {
  for (const auto& [n, p] : relations)
    if (n == name) return &p;
  return nullptr;
}

std::vector<JsonlSentence> parse_jsonl_sentences(std::string_view text, const std::string& file,
                                                 const JsonlLimits& limits) {
  if (text.size() > limits.max_file_bytes)
    fail("{}: is {} bytes, more than the limit of {}", file, text.size(), limits.max_file_bytes);
  std::vector<JsonlSentence> out;
  int64_t line = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(start, end - start);
    start = end + 1;
    ++line;
    if (row.size() > limits.max_line_bytes)
      fail("{}:{}: the line is {} bytes, more than the limit of {}", file, line, row.size(),
           limits.max_line_bytes);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.find_first_not_of(" \t") == std::string_view::npos) continue;
    JsonlSentence s = parse_line(row, fmt::format("{}:{}", file, line), limits);
    s.line = line;
    out.push_back(std::move(s));
  }
  if (out.empty()) fail("{}: contains no sentence: expected one JSON object a line", file);
  return out;
}

std::vector<JsonlSentence> read_jsonl_sentences(const std::string& path,
                                                const JsonlLimits& limits) {
  return parse_jsonl_sentences(read_file(path, limits.max_file_bytes), path, limits);
}

}  // namespace headlab
