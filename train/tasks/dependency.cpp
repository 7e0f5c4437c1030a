#include "train/tasks/dependency.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "train/tasks/registry.h"

namespace headlab {

// The grammar table of docs/task.md. Index = category id.
const std::array<const char*, DependencyGrammar::kCategories> DependencyGrammar::names = {
    "VERB",  "SUBJ",  "OBJ",   "ADV",   "PREP",  "AUX",   "POBJ",  "DET_S",
    "ADJ_S", "DET_O", "ADJ_O", "DET_P", "ADJ_P", "NUM_O", "INT_A", "NEG"};
const std::array<int, DependencyGrammar::kCategories> DependencyGrammar::governor = {
    kRoot, 0, 0, 0, 0, 0, 4, 1, 1, 2, 2, 6, 6, 2, 8, 0};
const std::array<int, DependencyGrammar::kCategories> DependencyGrammar::sem = {
    9, 4, 5, 6, 1, 2, 3, 14, 13, 0, 15, 12, 11, 8, 7, 10};

namespace {

constexpr std::array<const char*, 5> kRelationNames = {"PREV", "HEAD", "SEM", "NEXT",
                                                       "BEFORE_HEAD"};
constexpr size_t kMaxRelations = 4;  // K^R classes: 4^4 = 256 at the default K

}  // namespace

const char* relation_name(Relation r) {
  return kRelationNames[static_cast<int>(r)];
}

Relation parse_relation(const std::string& name, const char* key) {
  for (size_t i = 0; i < kRelationNames.size(); ++i)
    if (name == kRelationNames[i]) return static_cast<Relation>(i);
  fail("{}: unknown relation '{}' (expected one of PREV, HEAD, SEM, NEXT, BEFORE_HEAD)", key, name);
}

DependencyTask::DependencyTask(const DependencyOptions& options) : colours_(options.colours) {
  if (colours_ < 2 || colours_ > 64)
    fail("task.colours = {} is out of range: expected 2 <= colours <= 64", colours_);
  if (options.relations.empty() || options.relations.size() > kMaxRelations)
    fail("task.relations has {} entries but expected 1 to 4 of PREV, HEAD, SEM, NEXT, BEFORE_HEAD",
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
                        OptionSpec::integer(2, 64).shaped().documented(
                            "Colours K per word; the label has K^R classes."));
  d.relations = o.get_strings(
      "relations", defaults.relations,
      OptionSpec::names(1, kMaxRelations, {kRelationNames.begin(), kRelationNames.end()})
          .shaped()
          .documented("Relations R whose partners' colours form the label, in digit order."));
  d.embedding = o.get_string(
      "embedding", defaults.embedding,
      OptionSpec::one_of({"factored", "joint"})
          .shaped()
          .documented("Separate category and colour embeddings, or one joint token id."));
  return std::make_unique<DependencyTask>(d);
}

namespace {

constexpr int kWords = DependencyGrammar::kCategories;
constexpr int64_t kT = DependencyTask::kSeqLen;

// One sentence: category[t] and colour[t] for t in [0, T), position[c] of each category c.
struct Sentence {
  std::array<int, kT> category{};
  std::array<int, kT> colour{};
  std::array<int, kWords> position{};
};

// Draws the permutation (Fisher-Yates), then the colours of positions 1..T-1, from rng.
Sentence draw_sentence(Rng& rng, uint64_t colours) {
  Sentence s;
  std::array<int, kWords> perm{};
  for (int i = 0; i < kWords; ++i) perm[i] = i;
  for (int i = kWords - 1; i > 0; --i)
    std::swap(perm[i], perm[rng.below(static_cast<uint64_t>(i) + 1)]);
  s.category[0] = DependencyGrammar::kBos;
  s.colour[0] = 0;
  for (int i = 0; i < kWords; ++i) {
    s.category[i + 1] = perm[i];
    s.position[perm[i]] = i + 1;
  }
  for (int t = 1; t < kT; ++t) s.colour[t] = static_cast<int>(rng.below(colours));
  return s;
}

// The gold partner position of relation r for the word at position t >= 1.
int partner(Relation r, int t, const Sentence& s) {
  const int c = s.category[t];
  switch (r) {
    case Relation::prev:
      return t - 1;
    case Relation::next:
      return t + 1 == kT ? 0 : t + 1;
    case Relation::head: {
      const int g = DependencyGrammar::governor[c];
      return g == DependencyGrammar::kRoot ? 0 : s.position[g];
    }
    case Relation::sem:
      return s.position[DependencyGrammar::sem[c]];
    case Relation::before_head: {
      const int head = partner(Relation::head, t, s);
      return head <= 1 ? 0 : head - 1;  // BOS when the head is BOS or the first word
    }
  }
  return 0;
}

// Writes the sentence's features, labels and partners at flat offset `row` (= b * T) of out.
void write_sentence(const Sentence& s, bool joint, int64_t colours,
                    const std::vector<Relation>& relations, int64_t row, Batch& out) {
  const int R = static_cast<int>(relations.size());
  for (int t = 0; t < kT; ++t) {
    const size_t at = static_cast<size_t>(row + t);
    if (joint) {
      out.features[0][at] =
          t == 0 ? 0 : 1 + s.category[t] * static_cast<int>(colours) + s.colour[t];
    } else {
      out.features[0][at] = s.category[t];
      out.features[1][at] = s.colour[t];
    }
    if (t == 0) {
      out.labels[at] = kIgnoreIndex;
      for (int r = 0; r < R; ++r) out.partners[r][at] = kNoPartner;
      continue;
    }
    int64_t label = 0;
    for (int r = 0; r < R; ++r) {
      const int p = partner(relations[r], t, s);
      out.partners[r][at] = p;
      label = label * colours + s.colour[p];
    }
    out.labels[at] = static_cast<int32_t>(label);
  }
}

}  // namespace

void DependencyTask::generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                                        Batch& out) const {
  if (count < 1) fail("dependency task: batch_size is {} but expected >= 1", count);
  if (index < 0) fail("dependency task: batch index is {} but expected >= 0", index);
  if (first < 0) fail("dependency task: first sentence is {} but expected >= 0", first);
  out.resize(count, kT, features_.size(), relations_.size());
  for (int64_t b = 0; b < count; ++b) {
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(index), static_cast<uint64_t>(first + b));
    write_sentence(draw_sentence(rng, static_cast<uint64_t>(colours_)), joint_, colours_,
                   relations_, b * kT, out);
  }
}

bool DependencyTask::corrupt(const Batch& clean, int relation, uint64_t seed, Batch& corrupted,
                             std::vector<uint8_t>& measured) const {
  const int R = static_cast<int>(relations_.size());
  if (relation < 0 || relation >= R)
    fail("dependency task: corrupt: relation is {} but expected 0 <= relation < {}", relation, R);
  const int64_t B = clean.batch_size;
  const auto n = static_cast<size_t>(B * kT);
  bool sized = B >= 1 && clean.seq_len == kT && clean.features.size() == features_.size() &&
               clean.partners.size() == relations_.size() && clean.labels.size() == n;
  for (const auto& f : clean.features) sized = sized && f.size() == n;
  for (const auto& p : clean.partners) sized = sized && p.size() == n;
  if (!sized)
    fail(
        "dependency task: corrupt: the clean batch is not one of this task's ({} sentences of "
        "length {}, {} features, {} relations)",
        B, clean.seq_len, clean.features.size(), clean.partners.size());
  // Checked before anything is written: a throw leaves `corrupted` as it was.
  for (int64_t b = 0; b < B; ++b)
    for (int s = 0; s < R; ++s)
      for (int64_t t = 1; t < kT; ++t)
        if (const int32_t p = clean.partners[s][b * kT + t]; p < 0 || p >= kT)
          fail(
              "dependency task: corrupt: sentence {} token {} has partner {} for relation {}, "
              "outside [0, {})",
              b, t, p, relation_names_[s], kT);
  // Copy-assignment keeps corrupted's capacity; each sentence is then changed in place, reading
  // only its own row, which also makes corrupting `clean` itself work.
  if (&corrupted != &clean) corrupted = clean;
  measured.assign(n, 0);
  const auto K = static_cast<int>(colours_);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row = b * kT;
    auto partner_of = [&](int s, int t) { return corrupted.partners[s][row + t]; };
    // Token t is measurable at p when its r-partner is p and no other relation's partner is:
    // recolouring p then changes its label in digit r alone.
    auto measurable = [&](int t, int p) {
      if (partner_of(relation, t) != p) return false;
      for (int s = 0; s < R; ++s)
        if (s != relation && partner_of(s, t) == p) return false;
      return true;
    };
    std::array<int, kT> candidates{};
    int count = 0;
    for (int i = 1; i < kT; ++i) {
      const int p = partner_of(relation, i);
      if (p < 1) continue;  // BOS's colour is fixed
      bool any = false;
      for (int t = 1; t < kT && !any; ++t) any = measurable(t, p);
      if (any) candidates[count++] = i;
    }
    if (count == 0) continue;
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(b), static_cast<uint64_t>(relation));
    const int i = candidates[rng.below(static_cast<uint64_t>(count))];
    const int p = partner_of(relation, i);
    const auto at = static_cast<size_t>(row + p);
    int colour = 0, category = 0;
    if (joint_) {
      category = (corrupted.features[0][at] - 1) / K;
      colour = (corrupted.features[0][at] - 1) % K;
    } else {
      colour = corrupted.features[1][at];
    }
    colour = (colour + 1 + static_cast<int>(rng.below(static_cast<uint64_t>(K - 1)))) % K;
    if (joint_)
      corrupted.features[0][at] = 1 + category * K + colour;
    else
      corrupted.features[1][at] = colour;
    // Every label of the sentence again, from the partners' colours (the new one included).
    for (int t = 1; t < kT; ++t) {
      int64_t label = 0;
      for (int s = 0; s < R; ++s) {
        const auto q = static_cast<size_t>(row + partner_of(s, t));
        const int32_t c =
            joint_ ? (q == static_cast<size_t>(row) ? 0 : (corrupted.features[0][q] - 1) % K)
                   : corrupted.features[1][q];
        label = label * colours_ + c;
      }
      corrupted.labels[static_cast<size_t>(row + t)] = static_cast<int32_t>(label);
      measured[static_cast<size_t>(row + t)] = measurable(t, p) ? 1 : 0;
    }
  }
  return true;
}

}  // namespace headlab
