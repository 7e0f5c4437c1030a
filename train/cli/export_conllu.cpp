// `headlab export-conllu --out FILE [--sentences N] [--seed S] [--colours K]`: writes the
// synthetic dependency task's sentences as CoNLL-U (train/tasks/dependency_conllu.h), a treebank
// whose gold partners are known, to train the conllu task on and compare it with the built-in
// task (docs/data.md, "The cross-check").

#include <cstdint>
#include <string>

#include <fmt/core.h>

#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/io/files.h"
#include "train/tasks/dependency_conllu.h"

namespace headlab::cli {

namespace {

struct ExportArgs {
  std::string out;
  int64_t sentences = 1000;
  int64_t seed = 1;
  int64_t colours = 4;
};

}  // namespace

void add_export_conllu_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "export-conllu", "Write the dependency task's sentences as a CoNLL-U file (known partners)");
  static ExportArgs a;
  add_path_option(*cmd, "--out", a.out, "The CoNLL-U file to write", "a file to write")->required();
  add_int_option(*cmd, "--sentences", a.sentences, 1, 1000000, "Sentences to write");
  add_int_option(*cmd, "--seed", a.seed, 0, INT64_MAX,
                 "The dependency stream: sentence k is sentence k of its batch 0");
  add_int_option(*cmd, "--colours", a.colours, 2, 17, "Colours K (the task.colours of the task)");
  cmd->footer(exit_codes_text());
  cmd->callback([&exit_code] {
    write_file_atomic(a.out,
                      dependency_conllu(a.colours, static_cast<uint64_t>(a.seed), a.sentences));
    fmt::print("wrote {} sentences to {}\n", a.sentences, a.out);
    exit_code = kOk;
  });
}

}  // namespace headlab::cli
