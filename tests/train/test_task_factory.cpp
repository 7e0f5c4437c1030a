// make_task: the task named by the [task] config table.

#include <doctest/doctest.h>

#include "core/error.h"
#include "train/config/config.h"
#include "train/tasks/task.h"

using namespace headlab;

TEST_CASE("train: make_task builds the configured task and names unknown ones") {
  TaskConfig config;
  config.name = "dependency";
  auto task = make_task(config);
  CHECK(task->name() == "dependency");
  CHECK(task->seq_len() == 17);
  CHECK(task->num_classes() == 64);
  CHECK(task->relations() == std::vector<std::string>{"PREV", "HEAD", "SEM"});
  config.relations = {"PREV", "HEAD", "SEM", "NEXT"};
  config.colours = 3;
  config.embedding = "joint";
  task = make_task(config);
  CHECK(task->num_classes() == 81);
  REQUIRE(task->features().size() == 1);
  CHECK(task->features()[0].vocab == 1 + 16 * 3);
  config.colours = 0;
  CHECK_THROWS_WITH_AS(make_task(config), doctest::Contains("task.colours = 0"), Error);
  config.name = "parity";
  CHECK_THROWS_WITH_AS(make_task(config), doctest::Contains("task.name = 'parity'"), Error);
}
