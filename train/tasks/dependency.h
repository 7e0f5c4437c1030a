#pragma once
// The synthetic dependency task ([task] name = "dependency"), the built-in task.
//
// A sentence is BOS followed by the 16 grammar categories in a uniformly random order (each
// exactly once), T = 17. Every word has a colour uniform in [0, K); BOS has colour 0. Each word
// at position i >= 1 has one gold partner per relation:
//   PREV(i) = i - 1                  (the first word points to BOS)
//   HEAD(i) = position of the governor of category(i)   (VERB -> BOS, position 0)
//   SEM(i)  = position of the SEM partner of category(i)
//   NEXT(i) = i + 1                  (optional; the last word points to BOS)
//   BEFORE_HEAD(i) = HEAD(i) - 1     (optional; the word just before my syntactic head, BOS
//                                     when the head is BOS or the first word). It needs two
//                                     layers: the key at HEAD(i) - 1 is marked only by its right
//                                     neighbour's category, which one layer cannot see
//                                     (docs/task.md, "Composition").
// label(i) = sum_r colour(partner_r(i)) * K^(R-1-r) over the configured relations in order
// (PREV, HEAD, SEM: colour(PREV)*K^2 + colour(HEAD)*K + colour(SEM)), one of K^R classes.
// BOS has label kIgnoreIndex and partner kNoPartner for every relation.
//
// Inputs ("factored" embedding): feature "category" (0..15, BOS = 16; vocab 17) and feature
// "colour" (0..K-1, BOS 0; vocab K). "joint": one feature "token" = 1 + category*K + colour,
// BOS = 0 (vocab 1 + 16K).
//
// Sentence k of batch `index` is drawn from its own generator Rng::derive(seed, index, k), in
// this order: the permutation (Fisher-Yates: for i = 15..1, swap slot i with slot below(i + 1)),
// then the 16 colours below(K) in position order.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/tasks/task.h"

namespace headlab {

class TaskOptions;

enum class Relation { prev, head, sem, next, before_head };

// "PREV", "HEAD", "SEM", "NEXT", "BEFORE_HEAD".
const char* relation_name(Relation r);
// Inverse of relation_name (exact, upper case); throws headlab::Error naming `key` and the
// valid names.
Relation parse_relation(const std::string& name, const char* key = "task.relations");

// The fixed grammar (docs/task.md, "Vocabulary and grammar").
struct DependencyGrammar {
  static constexpr int kCategories = 16;
  static constexpr int kBos = 16;   // category id of BOS
  static constexpr int kRoot = -1;  // governor of VERB: BOS
  // Category names: VERB, SUBJ, OBJ, ADV, PREP, AUX, POBJ, DET_S, ADJ_S, DET_O, ADJ_O, DET_P,
  // ADJ_P, NUM_O, INT_A, NEG.
  static const std::array<const char*, kCategories> names;
  // governor[c]: category of c's HEAD, or kRoot for VERB.
  static const std::array<int, kCategories> governor;
  // sem[c]: category of c's SEM partner; an involution without fixed points.
  static const std::array<int, kCategories> sem;
};

struct DependencyOptions {
  int64_t colours = 4;                                           // K, in [2, 64]
  std::vector<std::string> relations = {"PREV", "HEAD", "SEM"};  // 1..4 distinct names
  std::string embedding = "factored";                            // "factored" | "joint"
};

class DependencyTask final : public Task {
 public:
  static constexpr int64_t kSeqLen = DependencyGrammar::kCategories + 1;  // BOS + 16 words

  // Throws headlab::Error naming the task.* key: colours outside [2, 64], no relations, an
  // unknown or repeated relation, more than 4, K^R above 2^24 classes, an unknown embedding.
  explicit DependencyTask(const DependencyOptions& options);

  std::string name() const override { return "dependency"; }
  int64_t seq_len() const override { return kSeqLen; }
  int64_t num_classes() const override { return num_classes_; }
  const std::vector<FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return relation_names_; }
  void generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                          Batch& out) const override;
  // Relation r is right when the predicted label's colour digit r is the gold one.
  bool relation_correct(int32_t predicted, int32_t gold, int relation) const override;
  // Activation patching's corruption (Task::corrupt; docs/task.md, "Activation patching: the
  // corruption"): per sentence b, from Rng::derive(seed, b, relation), a word i is drawn
  // uniformly among those whose partner p = partner_r(i) is a word (not BOS) and is the r-partner
  // of at least one token that has no other relation's partner at p; p gets a colour uniform
  // over the other K - 1 colours. The measured tokens are those tokens, whose label changes in
  // digit r alone; a sentence without such a word stays as it is. Positions do not move, so the
  // corrupted batch's partners are clean's.
  bool corrupt(const Batch& clean, int relation, uint64_t seed, Batch& corrupted,
               std::vector<uint8_t>& measured) const override;
  // "BOS", or "<CATEGORY>:<colour>" ("SUBJ:2").
  std::string token_string(const std::vector<std::vector<int32_t>>& features,
                           int64_t index) const override;

  int64_t colours() const { return colours_; }
  bool joint() const { return joint_; }
  // The colour digit of relation slot r (0 = most significant) of a label in [0, K^R).
  int32_t label_digit(int32_t label, int r) const;

 private:
  int64_t colours_;
  bool joint_;
  int64_t num_classes_;
  std::vector<Relation> relations_;
  std::vector<std::string> relation_names_;
  std::vector<FeatureSpec> features_;
};

// Registry factory "dependency": keys colours, relations, embedding (DependencyOptions).
std::unique_ptr<Task> make_dependency_task(TaskOptions& options);

}  // namespace headlab
