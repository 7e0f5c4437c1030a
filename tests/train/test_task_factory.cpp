// The task registry: make_task builds the task named by the [task] table, the task reads its
// own keys (checked against their specs), and a task registered from outside is selected by
// name like a built-in one.

#include <doctest/doctest.h>

#include <algorithm>

#include "core/error.h"
#include "train/config/config.h"
#include "train/config/schema.h"
#include "train/tasks/registry.h"

using namespace headlab;

namespace {

// A task defined outside the library: predict each token's own id; one relation, "SELF".
class CopyTask : public Task {
 public:
  explicit CopyTask(int64_t vocab) : features_{{"token", vocab}} {}
  std::string name() const override { return "test_copy"; }
  int64_t seq_len() const override { return 4; }
  int64_t num_classes() const override { return features_[0].vocab; }
  const std::vector<FeatureSpec>& features() const override { return features_; }
  const std::vector<std::string>& relations() const override { return relations_; }
  void generate_sentences(uint64_t, int64_t index, int64_t first, int64_t batch_size,
                          Batch& out) const override {
    out.batch_size = batch_size;
    out.seq_len = 4;
    out.features.assign(1, std::vector<int32_t>(static_cast<size_t>(batch_size * 4)));
    out.partners.assign(1, std::vector<int32_t>(out.features[0].size()));
    out.labels.resize(out.features[0].size());
    for (size_t i = 0; i < out.labels.size(); ++i) {
      const size_t token = static_cast<size_t>(first * 4) + i;  // sentence first + i / 4
      out.features[0][i] = static_cast<int32_t>((token + static_cast<size_t>(index)) % 3);
      out.labels[i] = out.features[0][i];
      out.partners[0][i] = static_cast<int32_t>(i % 4);
    }
  }

 private:
  std::vector<FeatureSpec> features_;
  std::vector<std::string> relations_{"SELF"};
};

std::unique_ptr<Task> make_copy_task(TaskOptions& o) {
  return std::make_unique<CopyTask>(
      o.get_int("vocab", 3, OptionSpec::integer(3, 100).documented("Token ids.")));
}

const TaskRegistrar copy_registrar("test_copy", make_copy_task);

TaskConfig dependency(OptionMap options = {}) {
  return {"dependency", std::move(options)};
}

}  // namespace

TEST_CASE("train: make_task builds the configured task and names unknown ones") {
  auto task = make_task(dependency());
  CHECK(task->name() == "dependency");
  CHECK(task->seq_len() == 17);
  CHECK(task->num_classes() == 64);
  CHECK(task->relations() == std::vector<std::string>{"PREV", "HEAD", "SEM"});
  task = make_task(dependency({{"relations", OptionArray{"PREV", "HEAD", "SEM", "NEXT"}},
                               {"colours", 3},
                               {"embedding", "joint"}}));
  CHECK(task->num_classes() == 81);
  REQUIRE(task->features().size() == 1);
  CHECK(task->features()[0].vocab == 1 + 16 * 3);
  CHECK_THROWS_WITH_AS(make_task(dependency({{"colours", 0}})),
                       "task.colours = 0 is out of range: expected an integer in [2, 64]", Error);
  CHECK_THROWS_WITH_AS(
      make_task({"parity", {}}),
      doctest::Contains("task.name = \"parity\" is not one of \"conllu\", \"dependency\""), Error);
}

TEST_CASE("train: a task reads its own keys: types, unknown keys, defaults in reading order") {
  OptionValue colours = "4";
  colours.where = "t.toml:3:11";
  CHECK_THROWS_WITH_AS(make_task(dependency({{"colours", colours}})),
                       "t.toml:3:11: task.colours has type string but expected an integer in "
                       "[2, 64]",
                       Error);
  OptionValue typo = 5;
  typo.where = "t.toml:3:10";
  typo.key_where = "t.toml:3:1";
  CHECK_THROWS_WITH_AS(make_task(dependency({{"colour", typo}})),
                       "t.toml:3:1: unknown key task.colour (did you mean task.colours?)", Error);
  // build_task returns what it read (defaults filled, given positions kept) and what it did not.
  const TaskBuild b = build_task(dependency({{"embedding", "joint"}, {"extra", 1}}));
  CHECK(b.known == std::vector<std::string>{"colours", "relations", "embedding"});
  CHECK(b.unknown == std::vector<std::string>{"extra"});
  std::vector<std::string> keys;
  for (const auto& [key, value] : b.resolved) keys.push_back(key);
  CHECK(keys == b.known);
  CHECK(format_value(*b.resolved.find("embedding")) == "\"joint\"");
  const auto described = describe_task("dependency");
  REQUIRE(described.size() == 3);
  CHECK(described[0].spec.shape);
  CHECK(format_value(described[1].fallback) == "[\"PREV\", \"HEAD\", \"SEM\"]");
}

TEST_CASE("train: a task registered outside the library is selected by its config name") {
  CHECK(has_task("test_copy"));
  const auto all = registered_tasks();
  CHECK(std::find(all.begin(), all.end(), "test_copy") != all.end());
  CHECK(builtin_tasks() == std::vector<std::string>{"conllu", "dependency", "induction", "jsonl"});
  const Config c = parse_config("[task]\nname = \"test_copy\"\nvocab = 5\n", "t.toml");
  CHECK(to_toml(c).find("[task]\nname = \"test_copy\"\nvocab = 5\n") != std::string::npos);
  const auto task = make_task(c.task);
  CHECK(task->num_classes() == 5);
  CHECK(task->relation_correct(2, 2, 0));  // the default scoring: the whole label
  CHECK_FALSE(task->relation_correct(1, 2, 0));
  Batch b;
  task->generate(1, 0, 1, b);
  CHECK(task->token_string(b.features, 2) == "2");  // the default display: the ids
  // Its keys are checked like the built-in task's, with the config's positions.
  CHECK_THROWS_WITH_AS(parse_config("[task]\nname = \"test_copy\"\nvocab = 1\n", "t.toml"),
                       "t.toml:3:9: task.vocab = 1 is out of range: expected an integer in "
                       "[3, 100]",
                       Error);
  CHECK_THROWS_WITH_AS(parse_config("[task]\nname = \"test_copy\"\ncolours = 4\n", "t.toml"),
                       "t.toml:3:1: unknown key task.colours", Error);
  // configs/README.md documents the library's tasks only.
  CHECK(config_reference_markdown().find("`task.vocab` (test_copy)") == std::string::npos);
  CHECK(config_reference_markdown().find("task.colours") != std::string::npos);
  CHECK_THROWS_WITH_AS(register_task("test_copy", make_copy_task),
                       doctest::Contains("'test_copy' is already registered"), Error);
}

TEST_CASE("train: a changed task option is a shape difference, named by its task key") {
  const Config a = parse_config("[task]\nname = \"dependency\"\n", "a.toml");
  const Config b = parse_config("[task]\nname = \"dependency\"\ncolours = 5\n", "b.toml");
  CHECK(shape_differences(a, b) ==
        std::vector<std::string>{"task.colours: 4 (checkpoint) vs 5 (config)"});
}
