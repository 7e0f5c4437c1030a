#pragma once
// Task: a seeded generator of token-classification batches, with the gold partner position of
// each relation for analysis. The trainer, the metrics and the head analysis code against this
// interface only: what the inputs are (features), what is predicted (num_classes labels), which
// relations a head may learn (relations, with gold partners in every batch), how a prediction
// scores per relation (relation_correct) and how a token reads (token_string). Tasks are built
// by name through the task registry (train/tasks/registry.h); the dependency task
// (train/tasks/dependency.h) is the built-in one.
//
// Reproducibility: sentence k of batch `index` of a stream with seed s is a pure function of
// (s, index, k), independent of the batch size and of which other sentences are generated with
// it (the built-in task draws it from Rng::derive(s, index, k) alone). So a training run's data
// cursor is just the number of batches consumed (save it, restore it, and the stream continues
// exactly), and a step's global batch can be split into micro-batches and over ranks in any way:
// each part generates its own range of sentences (docs/distributed.md). Evaluation uses a
// separate fixed seed and indices 0..n-1, so every evaluation sees the same sentences, or, for a
// task with a fixed evaluation set (eval_set_sentences), that set in order (EvalStream).
//
// Usage:
//   std::unique_ptr<Task> task = make_task(config.task);      // registry.h; throws on a bad
//                                                              //   task config
//   Batch batch;                                               // reused: no allocation after
//   for (int64_t step = cursor; step < steps; ++step) {        //   the first call
//     task->generate(seed, step, batch_size, batch);           // training batch `step`
//     task->generate_sentences(seed, step, first, n, batch);   // or sentences [first, first + n)
//     ... batch.features[f] ([B*T] int32 ids), batch.labels ([B*T], kIgnoreIndex at BOS) ...
//   }
//   for (int64_t i = 0; i < eval_batches; ++i) task->generate(eval_seed, i, eval_bs, batch);

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layers/options.h"

namespace headlab {

// The [task] table of a config (train/config/config.h holds the rest): the registry name of
// the task and its other keys, which the task reads itself. A loaded config holds every key the
// task reads, defaults filled, in the order it reads them.
struct TaskConfig {
  std::string name;  // required
  OptionMap options;
};

// Label value of positions that carry no label (BOS); skipped by the loss and by accuracy, as
// PyTorch's CrossEntropyLoss(ignore_index=-100).
inline constexpr int32_t kIgnoreIndex = -100;
// Partner value of positions that have no partner (BOS itself).
inline constexpr int32_t kNoPartner = -1;

// One input feature: its name and the number of distinct ids (embedding rows).
struct FeatureSpec {
  std::string name;  // "category", "colour" or "token"
  int64_t vocab = 0;
};

// A batch of B sequences of length T, every array flat and row-major over [B, T]
// (index b * T + t). Buffers are resized on demand and reused across calls.
struct Batch {
  int64_t batch_size = 0;  // B
  int64_t seq_len = 0;     // T
  // features[f][b * T + t]: id of feature f (Task::features()[f]) at position t of sequence b,
  // in [0, vocab_f).                                                       [F][B * T]
  std::vector<std::vector<int32_t>> features;
  // Class in [0, Task::num_classes()), or kIgnoreIndex.                    [B * T]
  std::vector<int32_t> labels;
  // partners[r][b * T + t]: position in [0, T) of the gold partner of relation r
  // (Task::relations()[r]) of token t, or kNoPartner where t has none.     [R][B * T]
  std::vector<std::vector<int32_t>> partners;

  int64_t tokens() const { return batch_size * seq_len; }
  // Views of the feature arrays, one per feature, into `out` (reused: no allocation once sized),
  // as Encoder::forward takes them.
  void feature_spans(std::vector<std::span<const int32_t>>& out) const;
  // Sets the sizes and resizes every buffer (F features, R relations) to B * T, keeping their
  // capacity: a stream of equal-sized batches allocates only once. Contents are unspecified.
  void resize(int64_t batch, int64_t length, size_t features, size_t relations);
};

// A count about the data a task read ("train_sentences", "long_sentences"), for summary.json's
// "data" and the report.
struct DataCount {
  std::string name;
  int64_t value = 0;
};

// A table of the task from ids to strings (a feature's vocabulary, the label classes).
struct TaskVocabulary {
  std::string name;                  // "form", "upos", "classes"
  std::vector<std::string> entries;  // entries[id]
};

class Task {
 public:
  virtual ~Task() = default;

  virtual std::string name() const = 0;
  // T: every sequence has this length (no padding).
  virtual int64_t seq_len() const = 0;
  virtual int64_t num_classes() const = 0;
  // The input features, in the order of Batch::features.
  virtual const std::vector<FeatureSpec>& features() const = 0;
  // Relation names, in the order of Batch::partners (and of the label's digits).
  virtual const std::vector<std::string>& relations() const = 0;

  // Fills `out` with sentences [first, first + count) of batch `index` of the stream `seed`, as
  // out's rows 0..count-1. Sentence k must be a pure function of (seed, index, k): the same
  // whatever `first` and `count` are (see the top). Reuses out's buffers (no allocation when the
  // sizes are unchanged). Throws headlab::Error if count < 1, first < 0 or index < 0.
  virtual void generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                                  Batch& out) const = 0;
  // Sentences [0, batch_size) of batch `index`.
  void generate(uint64_t seed, int64_t index, int64_t batch_size, Batch& out) const {
    generate_sentences(seed, index, 0, batch_size, out);
  }

  // Whether `predicted` gets relation `relation`'s part of the gold label `gold` right (both
  // in [0, num_classes)): what the per-relation ("component") accuracy of metrics.jsonl,
  // summary.json and heads.json counts. The default, for labels that do not decompose by
  // relation, is the whole label.
  virtual bool relation_correct(int32_t predicted, int32_t gold, int relation) const;
  // How token `index` (flat b * T + t) of a batch's features ([F][B * T]) reads in
  // attention_tokens.json and the report. The default joins the feature ids with ':'.
  virtual std::string token_string(const std::vector<std::vector<int32_t>>& features,
                                   int64_t index) const;

  // Whether the task is next-token prediction: one feature of token ids, each label the id of
  // the next position's token (label(t) = features[0][t + 1] for t < T - 1; the last position
  // has none). The analysis then also scores language-model heads (previous-token, duplicate-
  // token and induction detectors), the in-context learning score and K-composition
  // (train/analysis/induction.h). False (the default) for a classification task.
  virtual bool next_token() const { return false; }

  // The tables that turn text into ids, for a task that builds them from data (the conllu
  // task's forms, tags and classes): the run directory keeps them (vocab.json,
  // train/run/vocab_file.h) and eval, analyze and resume check that the task rebuilt from the
  // config gives the same ones. Empty (the default) for a task whose ids its options fix.
  virtual std::vector<TaskVocabulary> vocabularies() const { return {}; }
  // Counts about the data files read (sentences per file, those over task.max_len), in the
  // order summary.json lists them. Empty (the default) for a generated task.
  virtual std::vector<DataCount> data_counts() const { return {}; }

  // A fixed evaluation set (the conllu task's eval file): its number of sentences, or 0 (the
  // default) when evaluation draws a seeded stream with generate. With a set, evaluation reads
  // every sentence once, in order (eval_stream below).
  virtual int64_t eval_set_sentences() const { return 0; }
  // Sentences [first, first + count) of the evaluation set, in its order, as out's rows.
  // Throws headlab::Error when the task has no set or the range is outside [0, N).
  virtual void eval_set_batch(int64_t first, int64_t count, Batch& out) const;

  // Activation patching (Heimersheim & Nanda): a corrupted copy of `clean` in which relation
  // `relation`'s partner of some tokens changes and their label changes with it, so that a
  // head's output patched from the clean run into the corrupted one can be scored by the
  // fraction of the clean-minus-corrupted logit difference it restores. Returns false when the
  // task cannot make one (the default): the analysis then skips patching and says so, and
  // `corrupted` and `measured` are left as they were. Returns true after filling them:
  //   - `corrupted` has clean's sizes; its features, labels and partners are those of the
  //     corrupted sentences (a task may keep the partners, e.g. when only a partner's content
  //     changes and no position moves);
  //   - measured[b * T + t] ([B * T]) is 1 at exactly the tokens whose label differs from
  //     clean's in relation `relation`'s part and in no other relation's part (relation_correct
  //     tells the parts apart), 0 elsewhere: the tokens where the logit difference between the
  //     clean label and the corrupted label is measured. A token whose label changes in
  //     another relation's part too is not measured: patching one relation's head cannot
  //     restore it.
  //   - deterministic in (clean, relation, seed), and sentence b's corruption is a function of
  //     (seed, b, relation, sentence b) alone, as generate's sentences are of their own seeds;
  //   - every sentence gets at least one measured token where the task can give it one; a
  //     sentence that cannot be corrupted this way is left as it is, with none.
  // `corrupted` may be `clean` itself (corrupted in place); its buffers are reused. Throws
  // headlab::Error if relation is outside [0, R) or clean's sizes are not this task's.
  virtual bool corrupt(const Batch& clean, int relation, uint64_t seed, Batch& corrupted,
                       std::vector<uint8_t>& measured) const;
};

// What an evaluation reads: `batches` batches of `batch_size` sentences, batch i being batch i
// of the seeded stream `seed` (generate), or, for a task with an evaluation set of N
// sentences, sentences [i * batch_size, min(N, (i + 1) * batch_size)) of the set: every
// sentence once, in order, the last batch possibly smaller (batches = ceil(N / batch_size)).
struct EvalStream {
  int64_t batches = 0;
  int64_t batch_size = 0;
  uint64_t seed = 0;
  int64_t set_sentences = 0;  // N; 0 for a seeded stream

  bool from_set() const { return set_sentences > 0; }
  // Batch i (0 <= i < batches) into `out`.
  void batch(const Task& task, int64_t i, Batch& out) const;
};
// The evaluation of `task` for train.eval_batches, train.eval_batch_size and train.eval_seed
// (a set ignores batches and seed). Throws headlab::Error when batch_size < 1.
EvalStream eval_stream(const Task& task, int64_t batches, int64_t batch_size, uint64_t seed);

}  // namespace headlab
