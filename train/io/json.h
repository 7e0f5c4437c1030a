#pragma once
// The one way headlab reads JSON it finds on disk (heads.json, summary.json, state.json,
// metrics.jsonl, ...): bounded in size (read_file's limit) and in nesting depth, every failure one
// headlab::Error line that names the file. Files written by headlab are the common case, but
// anything may be found in their place, so nothing here trusts the content.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace headlab {

// Deeper documents are refused while parsing (copying or printing a deep value recurses).
inline constexpr int kMaxJsonDepth = 64;
// The default size limit of a JSON file: far above anything headlab writes.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;

// Parses one JSON document. Throws "<name>: not valid JSON: <reason, with the byte offset>",
// "<name>: nests deeper than 64 levels", or, with require_object, "<name>: expected a JSON
// object, got <type>".
nlohmann::json parse_json(std::string_view text, const std::string& name,
                          bool require_object = true);

// read_file (train/io/files.h: regular files only, at most max_bytes) + parse_json, named by
// the path.
nlohmann::json read_json_file(const std::filesystem::path& path,
                              uint64_t max_bytes = kMaxJsonFileBytes, bool require_object = true);
// As read_json_file, but nullopt when nothing exists at `path` (anything else there is read,
// and refused when it is not a regular file).
std::optional<nlohmann::json> read_json_file_if_present(const std::filesystem::path& path,
                                                        uint64_t max_bytes = kMaxJsonFileBytes);

// JSON Lines: calls visit(line_text, row) for every line that parses as a JSON object, in file
// order; blank lines and lines that do not parse (a torn last line of a crashed writer, an edited
// row) are skipped. Missing file: no call. Throws as read_file does otherwise.
void for_each_jsonl_row(const std::filesystem::path& path, uint64_t max_bytes,
                        const std::function<void(std::string_view, const nlohmann::json&)>& visit);
// Every row of for_each_jsonl_row.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path,
                                       uint64_t max_bytes = kMaxJsonFileBytes);

}  // namespace headlab
