#pragma once
// The conllu task ([task] name = "conllu"): token classification on a CoNLL-U treebank
// (conllu_reader.h), with the gold partners of its dependency trees (docs/data.md).
//
// A sequence is BOS followed by a sentence's words, padded to T = max_len + 1; padding and BOS
// carry no label. Features (task.features): "form" (lowercased when task.lowercase; ids 0 BOS,
// 1 padding, 2 unknown, then the training file's forms seen at least task.min_count times, in
// order of first appearance) and "upos" (0 BOS, 1 padding, then the 17 UD tags). Labels
// (task.label): "upos", "deprel" (the training file's relations, in order of first appearance;
// one unseen there is an error) or "head_upos" (the head's tag; ROOT for the root).
// Relations (task.relations): PREV (the word before; BOS for the first), HEAD (column 7; BOS,
// position 0, for the root, as CoNLL-U's ID 0), CHILD (the nearest dependent) and any dependency
// label: the partner of a word with that DEPREL is its head (Clark et al. 2019). A word without
// a partner for a relation (no dependent for CHILD, another DEPREL for a label relation, a head
// cut off by task.long_sentences = "cut") has kNoPartner: the head metrics score each relation
// over the words that have a partner for it (head_metrics.h).
//
// Sentence k of training batch `index` of stream `seed` is the training file's sentence
// Rng::derive(seed, index, k).below(N): a pure function of (seed, index, k), as task.h requires.
// With task.eval_file, evaluation reads that file's sentences once each, in file order
// (eval_set_batch); without one it draws from the training file with train.eval_seed.
// Sentences longer than max_len are skipped or cut (task.long_sentences); how many is
// long_sentences_count().

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "train/tasks/conllu_reader.h"
#include "train/tasks/task.h"

namespace headlab {

class TaskOptions;

struct ConlluOptions {
  std::string train_file;  // required; absolute after config loading
  std::string eval_file;   // optional
  std::vector<std::string> features = {"form", "upos"};
  bool lowercase = false;
  int64_t min_count = 1;
  std::string label = "upos";
  std::vector<std::string> relations = {"PREV", "HEAD"};
  int64_t max_len = 32;
  std::string long_sentences = "skip";
};

class ConlluTask final : public Task {
 public:
  // Reads the files; throws headlab::Error for a bad file (conllu_reader.h) or option.
  explicit ConlluTask(const ConlluOptions& options);

  std::string name() const override { return "conllu"; }
  int64_t seq_len() const override { return options_.max_len + 1; }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  const std::vector<FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return options_.relations; }
  void generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                          Batch& out) const override;
  // The eval file's sentences (kept after task.max_len), read in file order; 0 without one.
  int64_t eval_set_sentences() const override { return static_cast<int64_t>(eval_.size()); }
  void eval_set_batch(int64_t first, int64_t count, Batch& out) const override;
  std::string token_string(const std::vector<std::vector<int32_t>>& features,
                           int64_t index) const override;

  // "form" (when a feature), "upos" (when a feature) and "classes", id -> string.
  std::vector<TaskVocabulary> vocabularies() const override;
  // train_sentences, eval_sentences (as kept), long_sentences (skipped or cut, both files).
  std::vector<DataCount> data_counts() const override;

  int64_t train_sentences() const { return static_cast<int64_t>(train_.size()); }
  int64_t eval_sentences() const { return static_cast<int64_t>(eval_.size()); }
  // Sentences of both files longer than max_len (skipped or cut).
  int64_t long_sentences_count() const { return long_; }
  const std::vector<std::string>& vocabulary() const { return forms_; }
  const std::vector<std::string>& classes() const { return classes_; }

 private:
  void write_sentence(const ConlluSentence& s, int64_t row, Batch& out) const;
  std::vector<ConlluSentence> keep(std::vector<ConlluSentence> sentences);

  ConlluOptions options_;
  std::vector<ConlluSentence> train_, eval_;
  int64_t long_ = 0;
  std::vector<std::string> forms_;  // id -> form
  std::unordered_map<std::string, int32_t> form_ids_;
  std::vector<std::string> classes_;
  std::unordered_map<std::string, int32_t> class_ids_;
  std::vector<FeatureSpec> features_;
};

// Registry factory "conllu": the keys of ConlluOptions.
std::unique_ptr<Task> make_conllu_task(TaskOptions& options);

}  // namespace headlab
