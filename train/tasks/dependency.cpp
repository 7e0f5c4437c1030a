#include "train/tasks/dependency.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "train/tasks/registry.h"

namespace headlab {

// The grammar table of TASK.md. Index = category id.
const std::array<const char*, DependencyGrammar::kCategories> DependencyGrammar::names = {
    "VERB",  "SUBJ",  "OBJ",   "ADV",   "PREP",  "AUX",   "POBJ",  "DET_S",
    "ADJ_S", "DET_O", "ADJ_O", "DET_P", "ADJ_P", "NUM_O", "INT_A", "NEG"};
const std::array<int, DependencyGrammar::kCategories> DependencyGrammar::governor = {
    kRoot, 0, 0, 0, 0, 0, 4, 1, 1, 2, 2, 6, 6, 2, 8, 0};
const std::array<int, DependencyGrammar::kCategories> DependencyGrammar::sem = {
    9, 4, 5, 6, 1, 2, 3, 14, 13, 0, 15, 12, 11, 8, 7, 10};

namespace {

constexpr std::array<const char*, 4> kRelationNames = {"PREV", "HEAD", "SEM", "NEXT"};

}  // namespace

const char* relation_name(Relation r) {
  return kRelationNames[static_cast<int>(r)];
}

Relation parse_relation(const std::string& name, const char* key) {
  for (size_t i = 0; i < kRelationNames.size(); ++i)
    if (name == kRelationNames[i]) return static_cast<Relation>(i);
  fail("{}: unknown relation '{}' (expected one of PREV, HEAD, SEM, NEXT)", key, name);
}

DependencyTask::DependencyTask(const DependencyOptions& options) : colours_(options.colours) {
  if (colours_ < 2 || colours_ > 64)
    fail("task.colours = {} is out of range: expected 2 <= colours <= 64", colours_);
  if (options.relations.empty() || options.relations.size() > kRelationNames.size())
    fail("task.relations has {} entries but expected 1 to 4 of PREV, HEAD, SEM, NEXT",
         options.relations.size());
  for (const auto& name : options.relations) {
    const Relation r = parse_relation(name);
    if (std::find(relations_.begin(), relations_.end(), r) != relations_.end())
      fail("task.relations: '{}' is listed twice", name);
    relations_.push_back(r);
    relation_names_.push_back(name);
  }
  num_classes_ = 1;
  for (size_t i = 0; i < relations_.size(); ++i) num_classes_ *= colours_;
  if (num_classes_ > (int64_t{1} << 24))
    fail("task: colours^relations = {}^{} = {} classes, more than the limit of 2^24", colours_,
         relations_.size(), num_classes_);
  if (options.embedding == "factored") {
    joint_ = false;
    features_ = {{"category", DependencyGrammar::kCategories + 1}, {"colour", colours_}};
  } else if (options.embedding == "joint") {
    joint_ = true;
    features_ = {{"token", 1 + DependencyGrammar::kCategories * colours_}};
  } else {
    fail("task.embedding = '{}' is unknown: expected \"factored\" or \"joint\"", options.embedding);
  }
}

int32_t DependencyTask::label_digit(int32_t label, int r) const {
  HEADLAB_ASSERT(r >= 0 && r < static_cast<int>(relations_.size()));
  int64_t v = label;
  for (int k = static_cast<int>(relations_.size()) - 1; k > r; --k) v /= colours_;
  return static_cast<int32_t>(v % colours_);
}

bool DependencyTask::relation_correct(int32_t predicted, int32_t gold, int relation) const {
  return label_digit(predicted, relation) == label_digit(gold, relation);
}

std::string DependencyTask::token_string(const std::vector<std::vector<int32_t>>& features,
                                         int64_t index) const {
  const auto i = static_cast<size_t>(index);
  int category = 0, colour = 0;
  if (joint_) {
    const int32_t id = features[0][i];
    if (id == 0) return "BOS";
    category = static_cast<int>((id - 1) / colours_);
    colour = static_cast<int>((id - 1) % colours_);
  } else {
    category = features[0][i];
    colour = features[1][i];
  }
  if (category == DependencyGrammar::kBos) return "BOS";
  return fmt::format("{}:{}", DependencyGrammar::names[category], colour);
}

std::unique_ptr<Task> make_dependency_task(TaskOptions& o) {
  const DependencyOptions defaults;
  DependencyOptions d;
  d.colours = o.get_int("colours", defaults.colours,
                        {.type = OptionType::integer, .lo = 2, .hi = 64, .shape = true,
                         .doc = "Colours K per word; the label has K^R classes."});
  d.relations = o.get_strings(
      "relations", defaults.relations,
      {.type = OptionType::string_array, .min_len = 1, .max_len = 4,
       .choices = {kRelationNames.begin(), kRelationNames.end()}, .shape = true,
       .doc = "Relations R whose partners' colours form the label, in digit order."});
  d.embedding = o.get_string("embedding", defaults.embedding,
                             {.type = OptionType::string, .choices = {"factored", "joint"},
                              .shape = true,
                              .doc = "Separate category and colour embeddings, or one joint "
                                     "token id."});
  return std::make_unique<DependencyTask>(d);
}

void DependencyTask::generate(uint64_t seed, int64_t index, int64_t batch_size, Batch& out) const {
  if (batch_size < 1) fail("dependency task: batch_size is {} but expected >= 1", batch_size);
  if (index < 0) fail("dependency task: batch index is {} but expected >= 0", index);
  constexpr int kWords = DependencyGrammar::kCategories;
  constexpr int64_t T = kSeqLen;
  const int64_t n = batch_size * T;
  const int R = static_cast<int>(relations_.size());
  out.batch_size = batch_size;
  out.seq_len = T;
  // resize() keeps the capacity, so a stream of equal-sized batches allocates only once.
  out.features.resize(features_.size());
  for (auto& f : out.features) f.resize(static_cast<size_t>(n));
  out.labels.resize(static_cast<size_t>(n));
  out.partners.resize(static_cast<size_t>(R));
  for (auto& p : out.partners) p.resize(static_cast<size_t>(n));

  Rng rng = Rng::derive(seed, static_cast<uint64_t>(index));
  const auto K = static_cast<uint64_t>(colours_);
  for (int64_t b = 0; b < batch_size; ++b) {
    // category[t] for t in [0, T); position[c] for each category c.
    std::array<int, T> category{};
    std::array<int, T> colour{};
    std::array<int, kWords> position{};
    std::array<int, kWords> perm{};
    for (int i = 0; i < kWords; ++i) perm[i] = i;
    for (int i = kWords - 1; i > 0; --i)
      std::swap(perm[i], perm[rng.below(static_cast<uint64_t>(i) + 1)]);
    category[0] = DependencyGrammar::kBos;
    colour[0] = 0;
    for (int i = 0; i < kWords; ++i) {
      category[i + 1] = perm[i];
      position[perm[i]] = i + 1;
    }
    for (int t = 1; t < T; ++t) colour[t] = static_cast<int>(rng.below(K));

    const int64_t row = b * T;
    for (int t = 0; t < T; ++t) {
      const size_t at = static_cast<size_t>(row + t);
      if (joint_) {
        out.features[0][at] = t == 0 ? 0 : 1 + category[t] * static_cast<int>(K) + colour[t];
      } else {
        out.features[0][at] = category[t];
        out.features[1][at] = colour[t];
      }
      if (t == 0) {
        out.labels[at] = kIgnoreIndex;
        for (int r = 0; r < R; ++r) out.partners[r][at] = kNoPartner;
        continue;
      }
      const int c = category[t];
      int64_t label = 0;
      for (int r = 0; r < R; ++r) {
        int p = 0;
        switch (relations_[r]) {
          case Relation::prev:
            p = t - 1;
            break;
          case Relation::next:
            p = t + 1 == T ? 0 : t + 1;
            break;
          case Relation::head: {
            const int g = DependencyGrammar::governor[c];
            p = g == DependencyGrammar::kRoot ? 0 : position[g];
            break;
          }
          case Relation::sem:
            p = position[DependencyGrammar::sem[c]];
            break;
        }
        out.partners[r][at] = p;
        label = label * colours_ + colour[p];
      }
      out.labels[at] = static_cast<int32_t>(label);
    }
  }
}

}  // namespace headlab
