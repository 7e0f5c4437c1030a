#pragma once
// A reader of token files for the jsonl task (jsonl.h): JSON Lines, one sentence a line,
//
//   {"tokens": ["The", "dog", "barks"], "labels": ["DET", "NOUN", "VERB"],
//    "relations": {"HEAD": [1, 2, -1], "PREV": [-1, 0, 1]}}
//
// tokens: a non-empty array of strings; labels: one string (or null: no label) per token;
// relations: an object, each value one integer per token, the index (0-based, into tokens) of
// that token's partner in the relation, or -1 for none. No other key. Blank lines are skipped.
//
// Every failure is one headlab::Error line "<file>:<line>: <key> ...: expected ..." (the JSON
// parser's reason for a line that is not JSON), or "<file>: ..." for the file as a whole
// (missing, empty, larger than the limit).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headlab {

struct JsonlSentence {
  std::vector<std::string> tokens;
  std::vector<std::optional<std::string>> labels;  // [n]; nullopt: no label
  // (name, partners [n]) in name order; a partner is a token index or -1.
  std::vector<std::pair<std::string, std::vector<int32_t>>> relations;
  int64_t line = 0;

  // The partners of relation `name`, or null when the line does not give it.
  const std::vector<int32_t>* partners(const std::string& name) const;
};

struct JsonlLimits {
  uint64_t max_file_bytes = uint64_t{512} << 20;  // 512 MiB
  size_t max_line_bytes = 1 << 20;                // 1 MiB
  size_t max_tokens = 100000;
};

// Parses `text`, the content of `file` (named in messages). Throws as above; a text without a
// sentence is an error.
std::vector<JsonlSentence> parse_jsonl_sentences(std::string_view text, const std::string& file,
                                                 const JsonlLimits& limits = {});
// Reads `path` with the bounded read of train/io/files.h and parses it.
std::vector<JsonlSentence> read_jsonl_sentences(const std::string& path,
                                                const JsonlLimits& limits = {});

}  // namespace headlab
