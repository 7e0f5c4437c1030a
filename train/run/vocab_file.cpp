#include "train/run/vocab_file.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/io/files.h"
#include "train/io/json.h"
#include "train/tasks/task.h"

namespace headlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kRebuilt =
    "the task built from the run's config and data files no longer gives the ids the run was "
    "trained with";

// Short enough for one line, whatever the entry holds.
std::string shown(const std::string& s) {
  return s.size() <= 40 ? "'" + s + "'" : "'" + s.substr(0, 37) + "...'";
}

}  // namespace

fs::path vocab_path(const fs::path& run_dir) {
  return run_dir / "vocab.json";
}

void write_run_vocabulary(const fs::path& run_dir, const Task& task) {
  const std::vector<TaskVocabulary> tables = task.vocabularies();
  if (tables.empty()) return;
  json by_name = json::object();
  for (const TaskVocabulary& t : tables) by_name[t.name] = t.entries;
  const json doc = {
      {"format_version", kVocabFormatVersion}, {"task", task.name()}, {"tables", by_name}};
  write_file_atomic(vocab_path(run_dir), doc.dump(1) + "\n");
}

void check_run_vocabulary(const fs::path& run_dir, const Task& task) {
  const fs::path path = vocab_path(run_dir);
  const std::string name = path.string();
  const std::optional<json> doc = read_json_file_if_present(path);
  if (!doc) return;
  const auto version = doc->find("format_version");
  if (version == doc->end() || !version->is_number_integer() ||
      version->get<int64_t>() != kVocabFormatVersion)
    fail("{}: format_version is {} but expected {}", name,
         version == doc->end() ? "missing" : version->dump(), kVocabFormatVersion);
  const auto tables = doc->find("tables");
  if (tables == doc->end() || !tables->is_object())
    fail("{}: \"tables\" is missing or not an object: expected {{\"NAME\": [strings]}}", name);
  const std::vector<TaskVocabulary> now = task.vocabularies();
  for (const auto& [table, entries] : tables->items()) {
    const std::string& wanted = table;  // a lambda cannot capture a structured binding in C++20
    const auto it = std::find_if(now.begin(), now.end(),
                                 [&](const TaskVocabulary& t) { return t.name == wanted; });
    if (it == now.end())
      fail("{}: table '{}' is in the run but task '{}' has no such table now: {}", name, table,
           task.name(), kRebuilt);
    if (!entries.is_array())
      fail("{}: table '{}' is {} but expected an array of strings", name, table,
           entries.type_name());
    const size_t n = std::min(entries.size(), it->entries.size());
    for (size_t id = 0; id < n; ++id) {
      if (!entries[id].is_string())
        fail("{}: table '{}' id {} is {} but expected a string", name, table, id,
             entries[id].type_name());
      const std::string& was = entries[id].get_ref<const std::string&>();
      if (was != it->entries[id])
        fail("{}: table '{}' id {} is {} in the run but {} now: {}", name, table, id, shown(was),
             shown(it->entries[id]), kRebuilt);
    }
    if (entries.size() != it->entries.size())
      fail("{}: table '{}' has {} entries in the run but {} now: {}", name, table, entries.size(),
           it->entries.size(), kRebuilt);
  }
  for (const TaskVocabulary& t : now)
    if (!tables->contains(t.name))
      fail("{}: table '{}' of task '{}' is missing from the run's file: {}", name, t.name,
           task.name(), kRebuilt);
}

}  // namespace headlab
