// The dependency task's invariants (docs/task.md): the grammar table, one valid partner
// per relation for every word, labels that decode to the partners' colours, a reproducible and
// resumable stream, and a uniform permutation.

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include "core/error.h"
#include "train/tasks/dependency.h"

using namespace headlab;

namespace {

using G = DependencyGrammar;
constexpr int64_t T = DependencyTask::kSeqLen;

DependencyTask all_relations_task(int64_t colours = 4) {
  return DependencyTask({colours, {"PREV", "HEAD", "SEM", "NEXT"}, "factored"});
}

}  // namespace

TEST_CASE("train: dependency grammar: SEM is a pairing never on a governor or dependent") {
  for (int c = 0; c < G::kCategories; ++c) {
    const int s = G::sem[c];
    REQUIRE(s >= 0);
    REQUIRE(s < G::kCategories);
    CHECK(s != c);               // no fixed point
    CHECK(G::sem[s] == c);       // involution
    CHECK(G::governor[c] != s);  // SEM partner is not the governor
    CHECK(G::governor[s] != c);  // ... nor a dependent
  }
  // The governors form a tree rooted at VERB: every chain reaches VERB within 16 steps.
  CHECK(G::governor[0] == G::kRoot);
  for (int c = 0; c < G::kCategories; ++c) {
    int at = c, steps = 0;
    while (at != 0 && steps <= G::kCategories) at = G::governor[at], ++steps;
    CHECK(at == 0);
  }
  CHECK(std::string(G::names[9]) == "DET_O");
  CHECK(G::sem[0] == 9);  // VERB <-> DET_O, as in docs/task.md's table
}

TEST_CASE("train: dependency batch layout, one valid partner per relation per token") {
  const DependencyTask task = all_relations_task();
  REQUIRE(task.seq_len() == 17);
  REQUIRE(task.num_classes() == 256);
  REQUIRE(task.features().size() == 2);
  CHECK(task.features()[0].name == "category");
  CHECK(task.features()[0].vocab == 17);
  CHECK(task.features()[1].name == "colour");
  CHECK(task.features()[1].vocab == 4);
  Batch batch;
  for (int64_t index = 0; index < 20; ++index) {
    task.generate(7, index, 16, batch);
    REQUIRE(batch.batch_size == 16);
    REQUIRE(batch.seq_len == T);
    REQUIRE(batch.labels.size() == static_cast<size_t>(16 * T));
    REQUIRE(batch.partners.size() == 4);
    for (int64_t b = 0; b < 16; ++b) {
      const int32_t* cat = batch.features[0].data() + b * T;
      const int32_t* col = batch.features[1].data() + b * T;
      CHECK(cat[0] == G::kBos);
      CHECK(col[0] == 0);
      CHECK(batch.labels[b * T] == kIgnoreIndex);
      for (int r = 0; r < 4; ++r) CHECK(batch.partners[r][b * T] == kNoPartner);
      std::set<int> seen(cat + 1, cat + T);  // each category exactly once
      CHECK(seen.size() == 16);
      CHECK(*seen.begin() == 0);
      CHECK(*seen.rbegin() == 15);
      for (int64_t t = 1; t < T; ++t) {
        CHECK(col[t] >= 0);
        CHECK(col[t] < 4);
        const int c = cat[t];
        const int32_t prev = batch.partners[0][b * T + t], head = batch.partners[1][b * T + t],
                      sem = batch.partners[2][b * T + t], next = batch.partners[3][b * T + t];
        for (int32_t p : {prev, head, sem, next}) {
          REQUIRE(p >= 0);
          REQUIRE(p < T);
          CHECK(p != t);
        }
        CHECK(prev == t - 1);
        CHECK(next == (t == T - 1 ? 0 : t + 1));
        if (G::governor[c] == G::kRoot)
          CHECK(head == 0);
        else
          CHECK(cat[head] == G::governor[c]);
        CHECK(cat[sem] == G::sem[c]);
        CHECK(head != sem);  // HEAD and SEM always point to different words
      }
    }
  }
}

TEST_CASE("train: dependency labels decode to the partners' colours in the configured order") {
  for (const std::vector<std::string>& rels : {std::vector<std::string>{"PREV", "HEAD", "SEM"},
                                               {"SEM", "NEXT", "PREV"},
                                               {"HEAD"},
                                               {"NEXT", "SEM", "HEAD", "PREV"}}) {
    const DependencyTask task({5, rels, "factored"});
    const auto R = static_cast<int>(rels.size());
    CHECK(task.num_classes() == static_cast<int64_t>(std::pow(5, R)));
    Batch batch;
    task.generate(3, 11, 8, batch);
    REQUIRE(batch.partners.size() == rels.size());
    for (int64_t i = 0; i < batch.tokens(); ++i) {
      if (i % T == 0) continue;
      const int32_t label = batch.labels[i];
      REQUIRE(label >= 0);
      REQUIRE(label < task.num_classes());
      int64_t expected = 0;
      for (int r = 0; r < R; ++r) {
        const int32_t colour = batch.features[1][i - i % T + batch.partners[r][i]];
        CHECK(task.label_digit(label, r) == colour);
        expected = expected * 5 + colour;
      }
      CHECK(label == expected);
    }
  }
  // docs/task.md's formula for the default relations.
  const DependencyTask task({4, {"PREV", "HEAD", "SEM"}, "factored"});
  Batch batch;
  task.generate(1, 0, 4, batch);
  for (int64_t i = 1; i < T; ++i) {
    auto colour_of = [&](int r) { return batch.features[1][batch.partners[r][i]]; };
    CHECK(batch.labels[i] == colour_of(0) * 16 + colour_of(1) * 4 + colour_of(2));
  }
}

TEST_CASE("train: dependency BEFORE_HEAD is the word just before the syntactic head") {
  CHECK(parse_relation("BEFORE_HEAD") == Relation::before_head);
  CHECK(std::string(relation_name(Relation::before_head)) == "BEFORE_HEAD");
  const DependencyTask task({4, {"HEAD", "BEFORE_HEAD"}, "factored"});
  CHECK(task.num_classes() == 16);
  Batch batch;
  // Where the target sits relative to the query and what it is: if one layer's attention could
  // find it, its own category or its offset from the query would have to tell it apart.
  int64_t words = 0, on_bos = 0, on_self = 0;
  for (int64_t index = 0; index < 50; ++index) {
    task.generate(5, index, 16, batch);
    for (int64_t b = 0; b < 16; ++b) {
      const int32_t* cat = batch.features[0].data() + b * T;
      CHECK(batch.partners[1][b * T] == kNoPartner);
      for (int64_t t = 1; t < T; ++t) {
        const int32_t head = batch.partners[0][b * T + t];
        const int32_t before = batch.partners[1][b * T + t];
        REQUIRE(before >= 0);
        REQUIRE(before < T);
        ++words;
        if (G::governor[cat[t]] == G::kRoot || head == 1) {  // VERB, or a head right after BOS
          CHECK(before == 0);
          ++on_bos;
          continue;
        }
        CHECK(before == head - 1);
        CHECK(cat[before + 1] == G::governor[cat[t]]);  // its right neighbour is my governor
        on_self += before == t;
      }
    }
  }
  CHECK(words == 50 * 16 * 16);
  // VERB (1 word in 16) and heads at position 1 (1 in 16 of the rest) point at BOS.
  CHECK(static_cast<double>(on_bos) / words ==
        doctest::Approx(1.0 / 16 + 15.0 / 256).epsilon(0.15));
  CHECK(on_self > 0);  // a word right before its own head attends to itself
}

TEST_CASE("train: dependency joint embedding encodes category and colour in one id") {
  const DependencyTask factored({4, {"PREV", "HEAD", "SEM"}, "factored"});
  const DependencyTask joint({4, {"PREV", "HEAD", "SEM"}, "joint"});
  REQUIRE(joint.features().size() == 1);
  CHECK(joint.features()[0].name == "token");
  CHECK(joint.features()[0].vocab == 1 + 16 * 4);
  Batch f, j;
  factored.generate(9, 2, 6, f);
  joint.generate(9, 2, 6, j);
  CHECK(j.labels == f.labels);
  CHECK(j.partners == f.partners);
  for (int64_t i = 0; i < f.tokens(); ++i) {
    if (i % T == 0)
      CHECK(j.features[0][i] == 0);
    else
      CHECK(j.features[0][i] == 1 + f.features[0][i] * 4 + f.features[1][i]);
  }
}

TEST_CASE("train: dependency stream is a function of (seed, index) and resumes from a cursor") {
  const DependencyTask task = all_relations_task();
  Batch a, b, c;
  task.generate(42, 5, 8, a);
  task.generate(42, 5, 8, b);
  CHECK(a.features == b.features);
  CHECK(a.labels == b.labels);
  CHECK(a.partners == b.partners);
  // A stream continued from cursor 3 equals the uninterrupted one.
  std::vector<std::vector<int32_t>> straight, resumed;
  for (int64_t k = 0; k < 6; ++k) task.generate(42, k, 4, c), straight.push_back(c.features[0]);
  for (int64_t k = 3; k < 6; ++k) task.generate(42, k, 4, c), resumed.push_back(c.features[0]);
  for (int k = 0; k < 3; ++k) CHECK(resumed[k] == straight[k + 3]);
  // Sentence k is the same whichever range generates it: the tail of a batch alone equals the
  // batch's rows (so micro-batches and ranks can each generate their own sentences).
  Batch tail;
  task.generate_sentences(42, 5, 3, 5, tail);
  REQUIRE(tail.batch_size == 5);
  const auto from = static_cast<std::ptrdiff_t>(3 * T);
  for (size_t f = 0; f < a.features.size(); ++f)
    CHECK(
        std::equal(tail.features[f].begin(), tail.features[f].end(), a.features[f].begin() + from));
  CHECK(std::equal(tail.labels.begin(), tail.labels.end(), a.labels.begin() + from));
  for (size_t r = 0; r < a.partners.size(); ++r)
    CHECK(
        std::equal(tail.partners[r].begin(), tail.partners[r].end(), a.partners[r].begin() + from));
  Batch longer;
  task.generate(42, 5, 12, longer);  // a larger batch begins with the same sentences
  CHECK(std::equal(a.labels.begin(), a.labels.end(), longer.labels.begin()));
  CHECK_THROWS_WITH_AS(task.generate_sentences(1, 0, -1, 2, tail),
                       doctest::Contains("first sentence is -1"), Error);
  // Different steps and different seeds give different batches.
  task.generate(42, 6, 8, b);
  CHECK(a.features != b.features);
  task.generate(43, 5, 8, b);
  CHECK(a.features != b.features);
  // Buffers are reused: same sizes, same storage.
  const int32_t* labels = a.labels.data();
  const int32_t* cats = a.features[0].data();
  task.generate(1, 0, 8, a);
  CHECK(a.labels.data() == labels);
  CHECK(a.features[0].data() == cats);
  CHECK_THROWS_WITH_AS(task.generate(1, 0, 0, a), doctest::Contains("batch_size is 0"), Error);
  CHECK_THROWS_WITH_AS(task.generate(1, -1, 1, a), doctest::Contains("index is -1"), Error);
}

TEST_CASE("train: dependency permutation and colours are uniform") {
  const DependencyTask task({4, {"PREV"}, "factored"});
  constexpr int kBatches = 500, kB = 32, N = kBatches * kB;  // 16,000 sentences
  std::array<std::array<int, 16>, T> counts{};               // [position][category]
  std::array<std::array<int, 16>, 16> before{};              // [a][b]: a precedes b
  std::array<int, 4> colour_counts{};
  Batch batch;
  for (int k = 0; k < kBatches; ++k) {
    task.generate(5, k, kB, batch);
    for (int b = 0; b < kB; ++b) {
      std::array<int, 16> pos{};
      for (int t = 1; t < T; ++t) {
        const int c = batch.features[0][b * T + t];
        ++counts[t][c];
        pos[c] = t;
        ++colour_counts[batch.features[1][b * T + t]];
      }
      for (int x = 0; x < 16; ++x)
        for (int y = 0; y < 16; ++y) before[x][y] += pos[x] < pos[y];
    }
  }
  // Each (position, category) cell is Binomial(N, 1/16): mean 1000, sd ~30.6; allow 5 sd.
  const double mean = N / 16.0, sd = std::sqrt(N * (1.0 / 16) * (15.0 / 16));
  for (int t = 1; t < T; ++t)
    for (int c = 0; c < 16; ++c) CHECK(std::abs(counts[t][c] - mean) < 5 * sd);
  // Pairwise order: P(a before b) = 1/2 for a uniform permutation.
  const double half_sd = std::sqrt(N * 0.25);
  for (int x = 0; x < 16; ++x)
    for (int y = x + 1; y < 16; ++y) CHECK(std::abs(before[x][y] - N / 2.0) < 5 * half_sd);
  const double cmean = N * 16 / 4.0, csd = std::sqrt(N * 16 * 0.25 * 0.75);
  for (int n : colour_counts) CHECK(std::abs(n - cmean) < 5 * csd);
}

TEST_CASE("train: dependency options are validated with the task key named") {
  CHECK_THROWS_WITH_AS(DependencyTask({1, {"PREV"}, "factored"}),
                       doctest::Contains("task.colours = 1"), Error);
  CHECK_THROWS_WITH_AS(DependencyTask({65, {"PREV"}, "factored"}),
                       doctest::Contains("task.colours = 65"), Error);
  CHECK_THROWS_WITH_AS(DependencyTask({4, {}, "factored"}),
                       doctest::Contains("task.relations has 0 entries"), Error);
  CHECK_THROWS_WITH_AS(DependencyTask({4, {"PREV", "LEFT"}, "factored"}),
                       doctest::Contains("unknown relation 'LEFT'"), Error);
  CHECK_THROWS_WITH_AS(DependencyTask({4, {"SEM", "SEM"}, "factored"}),
                       doctest::Contains("'SEM' is listed twice"), Error);
  CHECK_THROWS_WITH_AS(DependencyTask({4, {"SEM"}, "onehot"}),
                       doctest::Contains("task.embedding = 'onehot'"), Error);
}

namespace {

// The relation sets the corruption is checked on: the default, reordered ones, one relation
// alone, all four of the first kind and the composed one.
const std::vector<std::vector<std::string>> kCorruptionRelationSets = {
    {"PREV", "HEAD", "SEM"},
    {"SEM", "NEXT", "PREV"},
    {"HEAD"},
    {"NEXT", "SEM", "HEAD", "PREV"},
    {"HEAD", "BEFORE_HEAD"},
    {"PREV", "HEAD", "SEM", "BEFORE_HEAD"}};

// The colour of token i of a batch, either embedding.
int32_t colour_at(const DependencyTask& task, const Batch& batch, int64_t i) {
  if (!task.joint()) return batch.features[1][static_cast<size_t>(i)];
  const int32_t id = batch.features[0][static_cast<size_t>(i)];
  return id == 0 ? 0 : static_cast<int32_t>((id - 1) % task.colours());
}

int32_t category_at(const DependencyTask& task, const Batch& batch, int64_t i) {
  if (!task.joint()) return batch.features[0][static_cast<size_t>(i)];
  const int32_t id = batch.features[0][static_cast<size_t>(i)];
  return id == 0 ? G::kBos : static_cast<int32_t>((id - 1) / task.colours());
}

// A task without a corruption of its own: Task::corrupt's default.
class PlainTask final : public Task {
 public:
  std::string name() const override { return "test_plain"; }
  int64_t seq_len() const override { return 2; }
  int64_t num_classes() const override { return 2; }
  const std::vector<FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return relations_; }
  void generate_sentences(uint64_t, int64_t, int64_t, int64_t count, Batch& out) const override {
    out.resize(count, 2, 1, 1);
    for (size_t i = 0; i < out.labels.size(); ++i) {
      out.features[0][i] = static_cast<int32_t>(i % 2);
      out.labels[i] = out.features[0][i];
      out.partners[0][i] = static_cast<int32_t>(i % 2);
    }
  }

 private:
  std::vector<FeatureSpec> features_{{"token", 2}};
  std::vector<std::string> relations_{"SELF"};
};

}  // namespace

TEST_CASE(
    "train: dependency corruption recolours one partner per sentence and measures the "
    "tokens whose label changes in that relation's digit alone") {
  for (const auto& rels : kCorruptionRelationSets) {
    for (const char* embedding : {"factored", "joint"}) {
      const DependencyTask task({4, rels, embedding});
      const auto R = static_cast<int>(rels.size());
      constexpr int64_t kB = 64;
      Batch clean, corrupted;
      std::vector<uint8_t> measured;
      task.generate(20240607, 0, kB, clean);
      for (int r = 0; r < R; ++r) {
        CAPTURE(rels[static_cast<size_t>(r)]);
        CAPTURE(embedding);
        REQUIRE(task.corrupt(clean, r, 77, corrupted, measured));
        REQUIRE(corrupted.batch_size == kB);
        REQUIRE(corrupted.seq_len == T);
        REQUIRE(corrupted.features.size() == clean.features.size());
        for (const auto& f : corrupted.features) REQUIRE(f.size() == clean.labels.size());
        REQUIRE(corrupted.labels.size() == clean.labels.size());
        REQUIRE(measured.size() == clean.labels.size());
        CHECK(corrupted.partners == clean.partners);  // positions do not move
        int64_t covered = 0;
        for (int64_t b = 0; b < kB; ++b) {
          const int64_t row = b * T;
          // Exactly one token's features change, a word's colour (its category stays), or none.
          std::vector<int64_t> changed;
          for (int64_t t = 0; t < T; ++t) {
            bool differs = false;
            for (size_t f = 0; f < clean.features.size(); ++f)
              differs = differs || clean.features[f][row + t] != corrupted.features[f][row + t];
            if (differs) changed.push_back(t);
          }
          REQUIRE(changed.size() <= 1);
          int64_t sentence_measured = 0;
          for (int64_t t = 0; t < T; ++t) sentence_measured += measured[row + t];
          CHECK((changed.size() == 1) == (sentence_measured > 0));
          covered += sentence_measured > 0;
          if (changed.empty()) {
            CHECK(std::equal(clean.labels.begin() + row, clean.labels.begin() + row + T,
                             corrupted.labels.begin() + row));
            continue;
          }
          const int64_t p = changed[0];
          REQUIRE(p >= 1);
          CHECK(category_at(task, corrupted, row + p) == category_at(task, clean, row + p));
          CHECK(colour_at(task, corrupted, row + p) != colour_at(task, clean, row + p));
          CHECK(colour_at(task, corrupted, row + p) >= 0);
          CHECK(colour_at(task, corrupted, row + p) < 4);
          CHECK(measured[row] == 0);
          CHECK(corrupted.labels[row] == kIgnoreIndex);
          for (int64_t t = 1; t < T; ++t) {
            const int64_t i = row + t;
            const int32_t before = clean.labels[i], after = corrupted.labels[i];
            // The corrupted labels decode to the corrupted partners' colours.
            for (int s = 0; s < R; ++s)
              CHECK(task.label_digit(after, s) ==
                    colour_at(task, corrupted, row + corrupted.partners[s][i]));
            if (measured[i]) {
              // Only digit r differs: relation_correct scores every other part as kept.
              CHECK(corrupted.partners[r][i] == p);
              for (int s = 0; s < R; ++s) {
                CHECK((task.label_digit(after, s) != task.label_digit(before, s)) == (s == r));
                CHECK(task.relation_correct(after, before, s) == (s != r));
              }
            } else if (after != before) {
              // A changed label that is not measured changed in another relation's digit too.
              bool other = false;
              for (int s = 0; s < R; ++s)
                other =
                    other || (s != r && task.label_digit(after, s) != task.label_digit(before, s));
              CHECK(other);
            }
          }
        }
        // Every sentence gets measured tokens: on all 6,400 sentences of 100 such batches, for
        // every relation set here (docs/task.md), so no floor below 100% is needed.
        CHECK(covered == kB);
      }
    }
  }
}

TEST_CASE("train: dependency corruption is deterministic, per sentence, and seeded") {
  const DependencyTask factored({4, {"PREV", "HEAD", "SEM"}, "factored"});
  const DependencyTask joint({4, {"PREV", "HEAD", "SEM"}, "joint"});
  Batch clean, a, b;
  std::vector<uint8_t> ma, mb;
  factored.generate(3, 2, 16, clean);
  for (int r = 0; r < 3; ++r) {
    REQUIRE(factored.corrupt(clean, r, 5, a, ma));
    REQUIRE(factored.corrupt(clean, r, 5, b, mb));
    CHECK(a.features == b.features);
    CHECK(a.labels == b.labels);
    CHECK(ma == mb);
    // Another seed draws other words and colours.
    REQUIRE(factored.corrupt(clean, r, 6, b, mb));
    CHECK(a.features != b.features);
    // In place gives the same batch.
    Batch in_place = clean;
    std::vector<uint8_t> mi;
    REQUIRE(factored.corrupt(in_place, r, 5, in_place, mi));
    CHECK(in_place.features == a.features);
    CHECK(in_place.labels == a.labels);
    CHECK(mi == ma);
  }
  // Relations draw from their own generators: PREV's and HEAD's corruptions differ.
  REQUIRE(factored.corrupt(clean, 0, 5, a, ma));
  REQUIRE(factored.corrupt(clean, 1, 5, b, mb));
  CHECK(ma != mb);
  // Sentence b's corruption depends on (seed, b, relation, sentence b) alone: replacing sentence
  // 3 of the batch leaves every other sentence's corruption as it was.
  Batch other, mixed = clean;
  factored.generate(3, 9, 16, other);
  for (size_t f = 0; f < mixed.features.size(); ++f)
    std::copy_n(other.features[f].begin() + 3 * T, T, mixed.features[f].begin() + 3 * T);
  std::copy_n(other.labels.begin() + 3 * T, T, mixed.labels.begin() + 3 * T);
  for (size_t r = 0; r < mixed.partners.size(); ++r)
    std::copy_n(other.partners[r].begin() + 3 * T, T, mixed.partners[r].begin() + 3 * T);
  REQUIRE(factored.corrupt(clean, 1, 5, a, ma));
  REQUIRE(factored.corrupt(mixed, 1, 5, b, mb));
  for (int64_t s = 0; s < 16; ++s) {
    if (s == 3) continue;
    const auto from = s * T;
    CHECK(
        std::equal(a.labels.begin() + from, a.labels.begin() + from + T, b.labels.begin() + from));
    CHECK(std::equal(ma.begin() + from, ma.begin() + from + T, mb.begin() + from));
  }
  // The two embeddings corrupt the same sentences the same way.
  Batch jclean, jc;
  std::vector<uint8_t> mj;
  joint.generate(3, 2, 16, jclean);
  for (int r = 0; r < 3; ++r) {
    REQUIRE(factored.corrupt(clean, r, 5, a, ma));
    REQUIRE(joint.corrupt(jclean, r, 5, jc, mj));
    CHECK(jc.labels == a.labels);
    CHECK(mj == ma);
    for (int64_t i = 0; i < a.tokens(); ++i)
      CHECK(jc.features[0][i] == (i % T == 0 ? 0 : 1 + a.features[0][i] * 4 + a.features[1][i]));
  }
}

TEST_CASE("train: dependency corruption names a bad relation or batch, Task has no default one") {
  const DependencyTask task({4, {"PREV", "HEAD", "SEM"}, "factored"});
  Batch clean, corrupted;
  std::vector<uint8_t> measured;
  task.generate(1, 0, 4, clean);
  CHECK_THROWS_WITH_AS(task.corrupt(clean, 3, 0, corrupted, measured),
                       doctest::Contains("relation is 3 but expected 0 <= relation < 3"), Error);
  CHECK_THROWS_WITH_AS(task.corrupt(clean, -1, 0, corrupted, measured),
                       doctest::Contains("relation is -1"), Error);
  const DependencyTask one({4, {"HEAD"}, "factored"});
  CHECK_THROWS_WITH_AS(one.corrupt(clean, 0, 0, corrupted, measured),
                       doctest::Contains("is not one of this task's"), Error);
  Batch bad = clean;
  bad.partners[2][5] = 17;
  CHECK_THROWS_WITH_AS(task.corrupt(bad, 0, 0, corrupted, measured),
                       doctest::Contains("token 5 has partner 17 for relation SEM"), Error);

  const PlainTask plain;
  plain.generate(1, 0, 3, clean);
  corrupted = Batch{};
  measured.clear();
  CHECK_FALSE(plain.corrupt(clean, 0, 1, corrupted, measured));
  CHECK(corrupted.batch_size == 0);  // left as it was
  CHECK(measured.empty());
}
