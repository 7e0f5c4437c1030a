// The CoNLL-U reader and the conllu task: what the specification says is skipped is skipped,
// every malformed line is one message naming the line and the column, the task's features,
// labels and gold partners, and `headlab train` on the hand-written sample.

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "layers/options.h"
#include "train/config/config.h"
#include "train/tasks/conllu.h"
#include "train/tasks/conllu_reader.h"
#include "train/tasks/registry.h"

namespace fs = std::filesystem;
using namespace headlab;

namespace {

std::string word(int id, const std::string& form, const std::string& upos, int head,
                 const std::string& rel) {
  return fmt::format("{}\t{}\t{}\t{}\t_\t_\t{}\t{}\t_\t_\n", id, form, form, upos, head, rel);
}

// "The old man reads a book ." with a multiword range and an empty node in between.
const std::string kSentence =
    "# sent_id = 1\n# text = The old man reads a book.\n" + word(1, "The", "DET", 3, "det") +
    word(2, "old", "ADJ", 3, "amod") + word(3, "man", "NOUN", 4, "nsubj") +
    "4-5\treads_a\t_\t_\t_\t_\t_\t_\t_\t_\n" + word(4, "reads", "VERB", 0, "root") +
    word(5, "a", "DET", 6, "det") + "5.1\tx\tx\tX\t_\t_\t_\t_\t4:dep\t_\n" +
    word(6, "book", "NOUN", 4, "obj") + word(7, ".", "PUNCT", 4, "punct");

std::string error_of(const std::string& text, const ConlluLimits& limits = {}) {
  try {
    parse_conllu(text, "t.conllu", limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path p =
      fs::temp_directory_path() / fmt::format("headlab-conllu-{}-{}", ::getpid(), name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

}  // namespace

TEST_CASE("train: conllu reader skips comments, multiword ranges and empty nodes") {
  const auto s = parse_conllu(kSentence + "\n" + kSentence + "\r\n", "t.conllu");
  REQUIRE(s.size() == 2);
  REQUIRE(s[0].words.size() == 7);
  CHECK(s[0].words[3].form == "reads");
  CHECK(s[0].words[3].head == 0);
  CHECK(s[0].words[4].form == "a");
  CHECK(s[0].words[5].head == 4);
  CHECK(s[0].line == 3);
  CHECK(s[1].words.size() == 7);
}

TEST_CASE("train: conllu reader names the line and the column of a malformed line") {
  CHECK(error_of("1\tA\ta\tDET\t_\t_\t0\troot\t_\n") ==
        "t.conllu:1: 9 tab-separated columns: expected 10 (ID FORM LEMMA UPOS XPOS FEATS HEAD "
        "DEPREL DEPS MISC)");
  CHECK(error_of(word(1, "A", "DET", 0, "root") + word(3, "b", "NOUN", 1, "dep")) ==
        "t.conllu:2: column 1 (ID) is 3: expected 2 (words are numbered 1, 2, ... in a sentence)");
  CHECK(error_of(word(1, "A", "DET", 5, "det")).starts_with("t.conllu:1: column 7 (HEAD) is 5"));
  CHECK(error_of(word(1, "A", "DET", 2, "det") + word(2, "b", "NOUN", 1, "root"))
            .find("form a cycle") != std::string::npos);
  CHECK(error_of(word(1, "A", "DET", 1, "det")) ==
        "t.conllu:1: column 7 (HEAD) is 1, the word itself");
  CHECK(error_of("") == "t.conllu: contains no sentence: expected CoNLL-U word lines");
  CHECK(error_of("# c\n\n\n") == "t.conllu: contains no sentence: expected CoNLL-U word lines");
  CHECK(error_of("# caf\xc3\n" + word(1, "A", "DET", 0, "root")) ==
        "t.conllu:1: invalid UTF-8 at byte 5: expected UTF-8 text");
  ConlluLimits small;
  small.max_line_bytes = 28;
  CHECK(error_of(word(1, "A", "DET", 0, "root") + "# " + std::string(30, 'x') + "\n", small) ==
        "t.conllu:2: the line is 32 bytes, more than the limit of 28");
  small.max_file_bytes = 10;
  CHECK(error_of(kSentence, small).starts_with("t.conllu: is "));
}

TEST_CASE("train: conllu task features, labels and gold partners") {
  const fs::path file =
      write_temp("task.conllu", kSentence + "\n" + word(1, "Man", "NOUN", 2, "nsubj") +
                                    word(2, "sleeps", "VERB", 0, "root") + "\n");
  OptionMap given;
  given.set("train_file", OptionValue(file.string()));
  given.set("lowercase", OptionValue(true));
  given.set("label", OptionValue("head_upos"));
  given.set("relations", OptionValue(OptionArray{"PREV", "HEAD", "CHILD", "det"}));
  given.set("max_len", OptionValue(int64_t{3}));
  given.set("long_sentences", OptionValue("cut"));
  const auto task = make_task({"conllu", given});
  const auto& c = dynamic_cast<const ConlluTask&>(*task);
  CHECK(c.seq_len() == 4);
  CHECK(c.long_sentences_count() == 1);
  CHECK(c.train_sentences() == 2);
  // <bos> <pad> <unk>, then the forms lowercased in order of first appearance ("man" once).
  CHECK(c.vocabulary() == std::vector<std::string>{"<bos>", "<pad>", "<unk>", "the", "old", "man",
                                                   "reads", "a", "book", ".", "sleeps"});
  // Find the cut sentence: sentences are drawn by (seed, index, k).
  Batch b;
  bool seen_long = false, seen_short = false;
  for (int64_t i = 0; i < 16 && !(seen_long && seen_short); ++i) {
    task->generate(7, i, 1, b);
    Batch again;
    task->generate_sentences(7, i, 0, 1, again);
    CHECK(again.features == b.features);
    if (b.features[0][1] == 3) {  // "the old man": heads 3, 3, cut 4 -> no partner
      seen_long = true;
      // NOUN NOUN, then VERB: the head cut off keeps its tag for the label.
      CHECK(b.labels == std::vector<int32_t>{kIgnoreIndex, 7, 7, 15});
      CHECK(b.partners[0] == std::vector<int32_t>{kNoPartner, 0, 1, 2});
      CHECK(b.partners[1] == std::vector<int32_t>{kNoPartner, 3, 3, kNoPartner});
      // CHILD: the and old have no dependent; man's nearest is old.
      CHECK(b.partners[2] == std::vector<int32_t>{kNoPartner, kNoPartner, kNoPartner, 2});
      // det: only "the" is a det; the other words have no det partner (not BOS).
      CHECK(b.partners[3] == std::vector<int32_t>{kNoPartner, 3, kNoPartner, kNoPartner});
    } else {
      seen_short = true;
      CHECK(b.features[0] == std::vector<int32_t>{0, 5, 10, 1});
      CHECK(b.labels == std::vector<int32_t>{kIgnoreIndex, 15, 17, kIgnoreIndex});  // VERB ROOT
      CHECK(b.partners[1] == std::vector<int32_t>{kNoPartner, 2, 0, kNoPartner});
      CHECK(task->token_string(b.features, 1) == "man/NOUN");
    }
  }
  CHECK(seen_long);
  CHECK(seen_short);
  fs::remove(file);
}

TEST_CASE("train: headlab train on the CoNLL-U sample names the treebank's relations") {
  const fs::path out = fs::temp_directory_path() / fmt::format("headlab-conllu-run-{}", ::getpid());
  fs::remove_all(out);
  const std::string cmd = fmt::format(
      "'{}' train '{}/examples/data/sample.toml' --out '{}' --no-progress --quiet "
      "--set train.steps=20 --set train.eval_every=0 --set schedule.warmup_steps=2 </dev/null",
      HEADLAB_CLI, HEADLAB_SOURCE_DIR, out.string());
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(out / "heads.json");
  const nlohmann::json heads = nlohmann::json::parse(in);
  CHECK(heads["relations"] == nlohmann::json({"PREV", "HEAD", "det", "nsubj"}));
  CHECK(fs::exists(out / "report.html"));
  std::ifstream report(out / "report.html");
  std::stringstream html;
  html << report.rdbuf();
  CHECK(html.str().find("nsubj") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("train: run.json records the data files and eval refuses a changed one") {
  const fs::path dir =
      fs::temp_directory_path() / fmt::format("headlab-conllu-data-{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"sample.toml", "sample-train.conllu", "sample-dev.conllu"})
    fs::copy_file(fs::path(HEADLAB_SOURCE_DIR) / "examples/data" / f, dir / f);
  auto run = [&](const std::string& args) {
    const std::string cmd = fmt::format("cd '{}' && '{}' {} >/dev/null 2>err.txt </dev/null",
                                        dir.string(), HEADLAB_CLI, args);
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  REQUIRE(run("train sample.toml --out run --quiet --no-analysis --set train.steps=4 "
              "--set train.eval_every=0 --set schedule.warmup_steps=1") == 0);
  std::ifstream in(dir / "run" / "run.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  REQUIRE(doc["data_files"].size() == 2);
  CHECK(doc["data_files"][0]["key"] == "task.train_file");
  CHECK(doc["data_files"][0]["path"] == fs::canonical(dir / "sample-train.conllu").string());
  CHECK(doc["data_files"][0]["bytes"] == fs::file_size(dir / "sample-train.conllu"));
  CHECK(doc["data_files"][0]["sha256"].get<std::string>().size() == 64);
  CHECK(run("eval run") == 0);
  std::ofstream(dir / "sample-train.conllu", std::ios::app) << "# one more comment\n";
  CHECK(run("eval run") == 2);
  std::ifstream err(dir / "err.txt");
  std::stringstream text;
  text << err.rdbuf();
  const std::string message = text.str();
  CHECK(message.find("task.train_file '") != std::string::npos);
  CHECK(message.find("has changed since the run was trained (sha256 ") != std::string::npos);
  CHECK(std::count(message.begin(), message.end(), '\n') == 1);
  fs::remove_all(dir);
}

TEST_CASE("train: a conllu config without an eval file reads back from its resolved form") {
  const fs::path dir = fs::path(HEADLAB_SOURCE_DIR) / "examples/data";
  const Config c = parse_config("[task]\nname = \"conllu\"\ntrain_file = \"sample-train.conllu\"\n",
                                (dir / "t.toml").string());
  CHECK(c.task.options.find("train_file")->get_if<std::string>()->starts_with("/"));
  CHECK(*c.task.options.find("eval_file")->get_if<std::string>() == "");
  const Config again = parse_config(to_toml(c), "resolved.toml");
  CHECK(to_toml(again) == to_toml(c));
}
