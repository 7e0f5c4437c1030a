#pragma once
// The task registry: config names ([task] name = "dependency") to factories that build the
// task from the rest of its [task] table, like the layer registry (layers/registry.h). A task
// defined in a program outside the library registers in one line:
//     static headlab::TaskRegistrar copy_registrar("copy", make_copy_task);
// a plugin through its entry point (registry.add_task("copy", make_copy_task), in
// train/plugins/plugin.h); either way it is then selected by its name in a config.
//
// A factory reads its keys through TaskOptions, each with an OptionSpec (layers/option_schema.h)
// that gives its type, range or choices, whether it changes shapes, and a line of
// documentation:
//     std::unique_ptr<Task> make_copy_task(TaskOptions& o) {
//       const int64_t length = o.get_int(
//           "length", 8, OptionSpec::integer(2, 64).shaped().documented("Sequence length."));
//       return std::make_unique<CopyTask>(length);
//     }
// A value of the wrong type or out of range is an error naming the key and its position in the
// config ("t.toml:4:11: task.length = 1 is out of range: expected an integer in [2, 64]"); a key
// the factory never asks for is an error with a did-you-mean. So a factory asks for all of its
// keys unconditionally, in the order the resolved config should list them.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "layers/option_schema.h"
#include "layers/options.h"
#include "train/tasks/task.h"

namespace headlab {

class TaskOptions {
 public:
  // `given`: the [task] table's keys other than name (with their positions).
  TaskOptions(std::string task, const OptionMap& given);

  // The key's value converted to spec.type and checked against the spec, or `fallback` when
  // the key is not given. Throws headlab::Error naming "task.<key>", the position, expected and
  // actual. The typed forms need spec.type to match.
  TypedValue get(const std::string& key, TypedValue fallback, const OptionSpec& spec);
  int64_t get_int(const std::string& key, int64_t fallback, const OptionSpec& spec);
  double get_real(const std::string& key, double fallback, const OptionSpec& spec);
  bool get_bool(const std::string& key, bool fallback, const OptionSpec& spec);
  std::string get_string(const std::string& key, std::string fallback, const OptionSpec& spec);
  std::vector<std::string> get_strings(const std::string& key, std::vector<std::string> fallback,
                                       const OptionSpec& spec);

  struct Read {
    std::string key;
    OptionSpec spec;
    TypedValue fallback;
  };
  const std::string& task() const { return task_; }
  // Every key asked for, in order, with its spec and default.
  const std::vector<Read>& reads() const { return reads_; }
  // Every key asked for with its value (the given one, keeping its position, or the default).
  const OptionMap& resolved() const { return resolved_; }
  // Given keys never asked for, in the table's order.
  std::vector<std::string> unknown() const;
  // Throws "<where>: unknown key task.colour (did you mean task.colours?)" for the first
  // unknown key.
  void check_all_used() const;

 private:
  std::string task_;
  const OptionMap& given_;
  std::vector<Read> reads_;
  OptionMap resolved_;
};

using TaskFactory = std::function<std::unique_ptr<Task>(TaskOptions&)>;

// Adds a factory under `name`. Throws if the name is empty or already registered.
void register_task(std::string name, TaskFactory factory);
// Registers at static-initialisation time: `static TaskRegistrar r("name", factory);`.
struct TaskRegistrar {
  TaskRegistrar(std::string name, TaskFactory factory);
};

// Removes a task that register_task added (the plugin loader undoes a failed plugin's
// registrations with it). Throws for a built-in task; an unknown name is a no-op.
void unregister_task(std::string_view name);

bool has_task(std::string_view name);
// Every registered name, sorted; and the library's own tasks (those configs/README.md lists).
std::vector<std::string> registered_tasks();
std::vector<std::string> builtin_tasks();
// "task.name = \"copy\" is not one of \"dependency\"" (with a did-you-mean), prefixed by
// `where` when given.
[[noreturn]] void fail_unknown_task(std::string_view name, const std::string& where);

// The task and what building it read: its options with defaults filled (resolved), and the
// given keys it never read (unknown), which make_task refuses.
struct TaskBuild {
  std::unique_ptr<Task> task;
  OptionMap resolved;
  std::vector<std::string> known;    // the keys the factory read
  std::vector<std::string> unknown;  // given but never read
};
// Builds config.name from config.options. Throws for an unknown name and for what the factory
// throws (a wrong type or value, with the key and its position); unknown keys are returned.
TaskBuild build_task(const TaskConfig& config);
// build_task, refusing unknown keys (TaskOptions::check_all_used).
std::unique_ptr<Task> make_task(const TaskConfig& config);
// The keys task `name` reads, with their specs and defaults (from building it with none given).
std::vector<TaskOptions::Read> describe_task(std::string_view name);

}  // namespace headlab
