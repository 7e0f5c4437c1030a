#include "train/tasks/task.h"

#include "core/error.h"
#include "train/tasks/dependency.h"

namespace headlab {

std::unique_ptr<Task> make_task(const TaskConfig& config) {
  if (config.name == "dependency") {
    DependencyOptions options;
    options.colours = config.colours;
    options.relations = config.relations;
    options.embedding = config.embedding;
    return std::make_unique<DependencyTask>(options);
  }
  fail("task.name = '{}' is unknown: expected \"dependency\"", config.name);
}

}  // namespace headlab
