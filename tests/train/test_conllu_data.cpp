// The conllu task's data as part of the run: evaluation reads the eval file once, in order;
// the vocabularies are written to the run directory (vocab.json) and a run whose saved
// vocabulary differs from the rebuilt one is refused in one line.

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/config/config.h"
#include "train/run/evaluate.h"
#include "train/run/model.h"
#include "train/tasks/conllu.h"
#include "train/tasks/registry.h"

namespace fs = std::filesystem;
using namespace headlab;

namespace {

// Sentence k: k + 1 words "sK w1 w2 ...", every word headed by the first (the root).
std::string numbered_sentences(int count) {
  std::string text;
  for (int k = 0; k < count; ++k) {
    for (int i = 1; i <= k + 1; ++i)
      text += fmt::format("{}\t{}\t_\tNOUN\t_\t_\t{}\t{}\t_\t_\n", i,
                          i == 1 ? fmt::format("s{}", k) : fmt::format("w{}", i), i == 1 ? 0 : 1,
                          i == 1 ? "root" : "dep");
    text += "\n";
  }
  return text;
}

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
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Config five_sentence_config(const TempDir& dir, bool with_eval) {
  std::ofstream(dir.path / "five.conllu") << numbered_sentences(5);
  return parse_config(fmt::format("[task]\nname = \"conllu\"\ntrain_file = \"five.conllu\"\n"
                                  "eval_file = \"{}\"\nfeatures = [\"form\"]\nmax_len = 8\n"
                                  "[model]\nd_model = 8\nheads = 2\nd_ff = 16\n"
                                  "[train]\neval_batches = 1\neval_batch_size = 2\n",
                                  with_eval ? "five.conllu" : ""),
                      (dir.path / "t.toml").string());
}

}  // namespace

TEST_CASE("train: conllu evaluation reads every eval sentence once, in file order") {
  TempDir dir("conllu-eval-order");
  const Config config = five_sentence_config(dir, true);
  const auto task = make_task(config.task);
  // train.eval_batches = 1 does not cut the set: ceil(5 / 2) batches of 2, 2 and 1.
  const EvalStream stream = eval_stream(*task, 1, 2, 99);
  REQUIRE(stream.from_set());
  CHECK(stream.set_sentences == 5);
  REQUIRE(stream.batches == 3);
  std::vector<std::string> first_words;
  Batch b;
  for (int64_t i = 0; i < stream.batches; ++i) {
    stream.batch(*task, i, b);
    CHECK(b.batch_size == (i < 2 ? 2 : 1));
    for (int64_t row = 0; row < b.batch_size; ++row)
      first_words.push_back(task->token_string(b.features, row * b.seq_len + 1));
  }
  CHECK(first_words == std::vector<std::string>{"s0", "s1", "s2", "s3", "s4"});
  CHECK_THROWS_WITH_AS(task->eval_set_batch(4, 2, b),
                       "conllu task: eval sentences [4, 6) are outside the eval file's [0, 5)",
                       Error);
  // The run's evaluation counts each of the 1 + 2 + 3 + 4 + 5 words once.
  RunModel model(config);
  const EvalMetrics e = evaluate(model, 0);
  CHECK(e.from_set);
  CHECK(e.sentences == 5);
  CHECK(e.tokens == 15);
}

TEST_CASE("train: without an eval file, conllu evaluation draws seeded sentences") {
  TempDir dir("conllu-eval-stream");
  const Config config = five_sentence_config(dir, false);
  const auto task = make_task(config.task);
  const EvalStream stream = eval_stream(*task, 3, 2, 99);
  CHECK_FALSE(stream.from_set());
  CHECK(stream.batches == 3);
  Batch a, b;
  stream.batch(*task, 2, a);
  task->generate(99, 2, 2, b);
  CHECK(a.features == b.features);
  CHECK(a.partners == b.partners);
  CHECK_THROWS_AS(stream.batch(*task, 3, a), Error);
}

TEST_CASE("train: the run keeps the conllu vocabulary and eval refuses a changed one") {
  TempDir dir("conllu-vocab");
  for (const char* f : {"sample.toml", "sample-train.conllu", "sample-dev.conllu"})
    fs::copy_file(fs::path(HEADLAB_SOURCE_DIR) / "examples/data" / f, dir.path / f);
  auto run = [&](const std::string& args) {
    const std::string cmd = fmt::format("cd '{}' && '{}' {} >/dev/null 2>err.txt </dev/null",
                                        dir.path.string(), HEADLAB_CLI, args);
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  REQUIRE(run("train sample.toml --out run --quiet --no-analysis --set train.steps=2 "
              "--set train.eval_every=0 --set schedule.warmup_steps=1") == 0);
  const fs::path vocab = dir.path / "run" / "vocab.json";
  REQUIRE(fs::exists(vocab));
  nlohmann::json doc = nlohmann::json::parse(read_text(vocab));
  const Config config =
      parse_config(read_text(dir.path / "sample.toml"), (dir.path / "sample.toml").string());
  const auto task = make_task(config.task);
  const auto& conllu = dynamic_cast<const ConlluTask&>(*task);
  CHECK(doc["task"] == "conllu");
  CHECK(doc["tables"]["form"].get<std::vector<std::string>>() == conllu.vocabulary());
  CHECK(doc["tables"]["classes"].get<std::vector<std::string>>() == conllu.classes());
  CHECK_FALSE(doc["tables"].contains("upos"));  // sample.toml's features are ["form"]
  CHECK(run("eval run") == 0);

  auto refused = [&](const nlohmann::json& edited) {
    std::ofstream(vocab) << edited.dump();
    CHECK(run("eval run") == 2);
    const std::string message = read_text(dir.path / "err.txt");
    CHECK(std::count(message.begin(), message.end(), '\n') == 1);
    return message;
  };
  nlohmann::json swapped = doc;
  std::swap(swapped["tables"]["form"][3], swapped["tables"]["form"][4]);
  const std::string id_message = refused(swapped);
  CHECK(id_message.find("vocab.json: table 'form' id 3 is '" + conllu.vocabulary()[4] +
                        "' in the run but '" + conllu.vocabulary()[3] + "' now") !=
        std::string::npos);
  nlohmann::json shorter = doc;
  shorter["tables"]["classes"].erase(shorter["tables"]["classes"].size() - 1);
  CHECK(refused(shorter).find(fmt::format("table 'classes' has {} entries in the run but {} now",
                                          conllu.classes().size() - 1, conllu.classes().size())) !=
        std::string::npos);
  CHECK(run("analyze run") == 2);  // analyze restores through the same check
  std::ofstream(vocab) << doc.dump();
  CHECK(run("eval run") == 0);
}
