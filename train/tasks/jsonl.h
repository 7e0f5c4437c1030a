#pragma once
// The jsonl task ([task] name = "jsonl"): token classification on token files (jsonl_reader.h:
// one sentence a line, {"tokens": [...], "labels": [...], "relations": {"NAME": [...]}}), for
// data that is not a treebank (docs/data.md).
//
// A sequence is BOS followed by a sentence's tokens, padded to T = max_len + 1; padding, BOS and
// a null label carry no label. One feature, "token" (lowercased when task.lowercase; ids 0 BOS,
// 1 padding, 2 unknown, then the training file's tokens seen at least task.min_count times, in
// order of first appearance). Classes: the training file's labels in order of first appearance
// (an eval label not among them is an error naming its line). Relations: task.relations, or
// when empty every relation of the training file's first sentence, in name order; every sentence must give
// each of them. Token index k's partner is position k + 1; -1, or a partner cut off with the
// sentence (task.long_sentences = "cut"), is kNoPartner.
//
// Training sentence k of batch `index` of stream `seed` is the training file's sentence
// Rng::derive(seed, index, k).below(N), as in the conllu task; with task.eval_file, evaluation
// reads that file once, in order.

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "train/tasks/jsonl_reader.h"
#include "train/tasks/task.h"

namespace headlab {

class TaskOptions;

struct JsonlOptions {
  std::string train_file;              // required; absolute after config loading
  std::string eval_file;               // optional
  std::vector<std::string> relations;  // empty: the first training sentence's, by name
  bool lowercase = false;
  int64_t min_count = 1;
  int64_t max_len = 32;
  std::string long_sentences = "skip";
};

class JsonlTask final : public Task {
 public:
  // Reads the files; throws headlab::Error for a bad file (jsonl_reader.h) or option.
  explicit JsonlTask(const JsonlOptions& options);

  std::string name() const override { return "jsonl"; }
  int64_t seq_len() const override { return options_.max_len + 1; }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  const std::vector<FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return relations_; }
  void generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                          Batch& out) const override;
  int64_t eval_set_sentences() const override { return static_cast<int64_t>(eval_.size()); }
  void eval_set_batch(int64_t first, int64_t count, Batch& out) const override;
  std::string token_string(const std::vector<std::vector<int32_t>>& features,
                           int64_t index) const override;
  // "token" and "classes", id -> string.
  std::vector<TaskVocabulary> vocabularies() const override;
  // train_sentences, eval_sentences (as kept), long_sentences (skipped or cut, both files).
  std::vector<DataCount> data_counts() const override;

  // Sentences of both files longer than max_len (skipped or cut).
  int64_t long_sentences_count() const { return long_; }

 private:
  void write_sentence(const JsonlSentence& s, int64_t row, Batch& out) const;
  std::vector<JsonlSentence> keep(std::vector<JsonlSentence> sentences);
  void check(const std::vector<JsonlSentence>& sentences, const std::string& file) const;

  JsonlOptions options_;
  std::vector<std::string> relations_;
  std::vector<JsonlSentence> train_, eval_;
  int64_t long_ = 0;
  std::vector<std::string> tokens_;  // id -> token
  std::unordered_map<std::string, int32_t> token_ids_;
  std::vector<std::string> classes_;
  std::unordered_map<std::string, int32_t> class_ids_;
  std::vector<FeatureSpec> features_;
};

// Registry factory "jsonl": the keys of JsonlOptions.
std::unique_ptr<Task> make_jsonl_task(TaskOptions& options);

}  // namespace headlab
