#pragma once
// The task's vocabularies in the run directory (vocab.json): the tables that turn text into ids
// (Task::vocabularies: the conllu task's forms, tags and classes), written when a run starts, so
// that eval, analyze, `train --resume` and programs outside headlab (Python) read the ids the
// model was trained with. headlab rebuilds the tables from the (hash-checked) data files and
// refuses a run whose saved tables differ from the rebuilt ones.
//
//   {"format_version": 1, "task": "conllu",
//    "tables": {"form": ["<bos>", "<pad>", "<unk>", "the", ...], "upos": [...], "classes": [...]}}
//
// entries[id] is the string of id. A task without tables writes no file.

#include <filesystem>

namespace headlab {

class Task;

inline constexpr int kVocabFormatVersion = 1;

std::filesystem::path vocab_path(const std::filesystem::path& run_dir);

// Writes run_dir/vocab.json atomically from task.vocabularies(); nothing when it has none.
void write_run_vocabulary(const std::filesystem::path& run_dir, const Task& task);

// Reads run_dir/vocab.json (a bounded read) and checks it against task.vocabularies(). Throws
// one headlab::Error line naming the file, the table and the first id that differs ("vocab.json:
// table 'form' id 7 is 'cat' in the run but 'Cat' now: ..."), a table missing on either side, or
// a malformed file. Nothing to check when the file is absent (a run older than vocab.json, or a
// task without tables).
void check_run_vocabulary(const std::filesystem::path& run_dir, const Task& task);

}  // namespace headlab
