// The cross-check of the conllu task against the built-in one: the dependency task's sentences
// written as CoNLL-U (`headlab export-conllu`, train/tasks/dependency_conllu.h) read back with
// the same tokens, the same PREV and HEAD partners and the same labels, and train.

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layers/options.h"
#include "train/tasks/dependency.h"
#include "train/tasks/dependency_conllu.h"
#include "train/tasks/registry.h"

namespace fs = std::filesystem;
using namespace headlab;

namespace {

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("headlab-{}-{}", name, ::getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("train: the exported dependency sentences read back with the same partners and labels") {
  TempDir dir("conllu-crosscheck");
  constexpr int64_t kSentences = 40;
  constexpr uint64_t kSeed = 11;
  const fs::path file = dir.path / "dependency.conllu";
  std::ofstream(file, std::ios::binary) << dependency_conllu(4, kSeed, kSentences);
  OptionMap given;
  given.set("train_file", OptionValue(file.string()));
  given.set("eval_file", OptionValue(file.string()));
  given.set("features", OptionValue(OptionArray{"form"}));
  given.set("label", OptionValue("head_upos"));
  given.set("relations", OptionValue(OptionArray{"PREV", "HEAD"}));
  given.set("max_len", OptionValue(int64_t{16}));
  const auto conllu = make_task({"conllu", given});
  // Labels: the colour of the head (relations = ["HEAD"]); partners: PREV and HEAD.
  const DependencyTask by_head({4, {"HEAD"}, "factored"});
  const DependencyTask partners({4, {"PREV", "HEAD"}, "factored"});
  const EvalStream stream = eval_stream(*conllu, 1, 16, 0);
  REQUIRE(stream.set_sentences == kSentences);
  int64_t words = 0, roots = 0;
  Batch c, d, p;
  for (int64_t i = 0; i < stream.batches; ++i) {
    stream.batch(*conllu, i, c);
    by_head.generate_sentences(kSeed, 0, i * 16, c.batch_size, d);
    partners.generate_sentences(kSeed, 0, i * 16, c.batch_size, p);
    REQUIRE(c.seq_len == d.seq_len);
    CHECK(c.partners == p.partners);
    for (int64_t q = 0; q < c.tokens(); ++q) {
      const auto at = static_cast<size_t>(q);
      if (q % c.seq_len == 0) {
        CHECK(c.labels[at] == kIgnoreIndex);
        CHECK(d.labels[at] == kIgnoreIndex);
        continue;
      }
      ++words;
      CHECK(conllu->token_string(c.features, q) == by_head.token_string(d.features, q));
      if (p.partners[1][at] == 0) {  // the VERB: its head is BOS, the dependency task's colour 0
        ++roots;
        CHECK(c.labels[at] == 17);  // ROOT
        CHECK(d.labels[at] == 0);
      } else {
        CHECK(c.labels[at] == d.labels[at]);
      }
    }
  }
  CHECK(words == kSentences * 16);
  CHECK(roots == kSentences);
}

TEST_CASE("train: headlab export-conllu writes the file that the conllu task trains on") {
  TempDir dir("conllu-export");
  auto run = [&](const std::string& args) {
    const std::string cmd = fmt::format("cd '{}' && '{}' {} >/dev/null 2>err.txt </dev/null",
                                        dir.path.string(), HEADLAB_CLI, args);
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  REQUIRE(run("export-conllu --out dep.conllu --sentences 64 --seed 5") == 0);
  CHECK(read_text(dir.path / "dep.conllu") == dependency_conllu(4, 5, 64));
  std::ofstream(dir.path / "dep.toml")
      << "[task]\nname = \"conllu\"\ntrain_file = \"dep.conllu\"\neval_file = \"dep.conllu\"\n"
         "features = [\"form\"]\nlabel = \"head_upos\"\nrelations = [\"PREV\", \"HEAD\"]\n"
         "max_len = 16\n[model]\nd_model = 16\nheads = 2\nd_ff = 32\n"
         "[train]\nsteps = 6\nbatch_size = 8\neval_every = 0\neval_batch_size = 32\n"
         "checkpoint_every = 0\n[schedule]\nwarmup_steps = 1\n";
  REQUIRE(run("train dep.toml --out run --quiet --no-progress") == 0);
  const nlohmann::json heads = nlohmann::json::parse(read_text(dir.path / "run" / "heads.json"));
  CHECK(heads["relations"] == nlohmann::json({"PREV", "HEAD"}));
  // The analysis read the exported file once, in order: 64 sentences of 16 words.
  CHECK(heads["eval"]["set_sentences"] == 64);
  CHECK(heads["eval"]["queries"] == 64 * 16);
  // summary.json and the report say what the task read.
  const nlohmann::json summary =
      nlohmann::json::parse(read_text(dir.path / "run" / "summary.json"));
  CHECK(summary["data"]["train_sentences"] == 64);
  CHECK(summary["data"]["long_sentences"] == 0);
  CHECK(read_text(dir.path / "run" / "report.html").find("the eval file's 64, in order") !=
        std::string::npos);
  // Cut one word short, every sentence of both files is long (the same file twice).
  REQUIRE(run("train dep.toml --out cut --quiet --no-progress --no-analysis --set train.steps=2 "
              "--set task.max_len=15 --set task.long_sentences=cut") == 0);
  const nlohmann::json cut = nlohmann::json::parse(read_text(dir.path / "cut" / "summary.json"));
  CHECK(cut["data"]["long_sentences"] == 128);
  CHECK(cut["data"]["eval_sentences"] == 64);
  CHECK(run("export-conllu --out dep2.conllu --colours 18") == 2);
}
