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
