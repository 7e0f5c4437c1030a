// The jsonl task and its reader: the format of jsonl_reader.h, every malformed line one message
// naming the file, the line and the key, and the task's ids, labels and gold partners.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "layers/options.h"
#include "train/tasks/jsonl.h"
#include "train/tasks/jsonl_reader.h"
#include "train/tasks/registry.h"

namespace fs = std::filesystem;
using namespace headlab;

namespace {

std::string error_of(const std::string& text, const JsonlLimits& limits = {}) {
  try {
    parse_jsonl_sentences(text, "t.jsonl", limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string kTwo =
    R"({"tokens": ["The", "dog", "barks"], "labels": ["DET", "NOUN", "VERB"], )"
    R"("relations": {"HEAD": [1, 2, -1], "DET": [1, -1, -1]}})"
    "\n\n"
    R"({"tokens": ["Dogs", "bark", "loudly", "now"], "labels": ["NOUN", "VERB", null, "ADV"], )"
    R"("relations": {"HEAD": [1, -1, 1, 1], "DET": [-1, -1, -1, -1]}})"
    "\r\n";

}  // namespace

TEST_CASE("train: jsonl reader reads tokens, labels and partners line by line") {
  const auto s = parse_jsonl_sentences(kTwo, "t.jsonl");
  REQUIRE(s.size() == 2);
  CHECK(s[0].tokens == std::vector<std::string>{"The", "dog", "barks"});
  CHECK(s[1].line == 3);  // the blank line is skipped but counted
  CHECK_FALSE(s[1].labels[2].has_value());
  REQUIRE(s[1].partners("HEAD") != nullptr);
  CHECK(*s[1].partners("HEAD") == std::vector<int32_t>{1, -1, 1, 1});
  CHECK(s[1].partners("SEM") == nullptr);
}

TEST_CASE("train: jsonl reader names the line and the key of a malformed line") {
  CHECK(error_of("").starts_with("t.jsonl: contains no sentence"));
  CHECK(error_of("{\"tokens\": [\"a\"]}\n[1]\n") == "t.jsonl:2: expected a JSON object, got array");
  CHECK(error_of("{\"tokens\": [\"a\"], \"tags\": [\"X\"]}") ==
        "t.jsonl:1: unknown key \"tags\": expected only tokens, labels and relations");
  CHECK(error_of("{\"tokens\": \"a b\"}") ==
        "t.jsonl:1: tokens is a string: expected a non-empty array of strings");
  CHECK(error_of("{\"tokens\": [\"a\", 3]}") ==
        "t.jsonl:1: tokens[1] is a number: expected a non-empty string");
  CHECK(error_of("{\"tokens\": [\"a\"], \"labels\": [\"X\", \"Y\"]}") ==
        "t.jsonl:1: labels is an array of 2: expected an array of 1 strings or nulls, one per "
        "token");
  CHECK(error_of("{\"tokens\": [\"a\", \"b\"], \"relations\": {\"HEAD\": [1, 2]}}") ==
        "t.jsonl:1: relations.HEAD[1] is 2: expected a token index in [0, 2) or -1 (none)");
  CHECK(error_of("{\"tokens\": [\"a\"], \"relations\": {\"HEAD\": [0.5]}}")
            .starts_with("t.jsonl:1: relations.HEAD[0] is 0.5: expected a token index"));
  CHECK(error_of("{\"tokens\": [\"caf\xc3\"]}").starts_with("t.jsonl:1: not valid JSON"));
  JsonlLimits small;
  small.max_line_bytes = 20;
  CHECK(error_of("{\"tokens\": [\"a\"]}\n{\"tokens\": [\"abcdefgh\"]}\n", small) ==
        "t.jsonl:2: the line is 24 bytes, more than the limit of 20");
  small.max_file_bytes = 10;
  CHECK(error_of(kTwo, small).starts_with("t.jsonl: is "));
}

TEST_CASE("train: jsonl task ids, labels, no-partner entries and the eval file in order") {
  const fs::path file = fs::temp_directory_path() / fmt::format("headlab-jsonl-{}", ::getpid());
  std::ofstream(file, std::ios::binary) << kTwo;
  OptionMap given;
  given.set("train_file", OptionValue(file.string()));
  given.set("eval_file", OptionValue(file.string()));
  given.set("lowercase", OptionValue(true));
  given.set("max_len", OptionValue(int64_t{3}));
  given.set("long_sentences", OptionValue("cut"));
  const auto task = make_task({"jsonl", given});
  const auto& j = dynamic_cast<const JsonlTask&>(*task);
  // The first line's, in name order (a JSON object's keys have none of their own).
  CHECK(task->relations() == std::vector<std::string>{"DET", "HEAD"});
  CHECK(j.long_sentences_count() == 2);  // the second sentence, in both files
  CHECK(task->vocabularies()[0].entries == std::vector<std::string>{"<bos>", "<pad>", "<unk>",
                                                                    "the", "dog", "barks", "dogs",
                                                                    "bark", "loudly", "now"});
  CHECK(task->vocabularies()[1].entries == std::vector<std::string>{"DET", "NOUN", "VERB", "ADV"});
  CHECK(task->eval_set_sentences() == 2);
  Batch b;
  task->eval_set_batch(0, 2, b);
  CHECK(b.features[0] == std::vector<int32_t>{0, 3, 4, 5, 0, 6, 7, 8});
  CHECK(b.labels == std::vector<int32_t>{kIgnoreIndex, 0, 1, 2, kIgnoreIndex, 1, 2, kIgnoreIndex});
  // HEAD: token index k is position k + 1; -1 is no partner.
  CHECK(b.partners[1] ==
        std::vector<int32_t>{kNoPartner, 2, 3, kNoPartner, kNoPartner, 2, kNoPartner, 2});
  CHECK(b.partners[0] == std::vector<int32_t>{kNoPartner, 2, kNoPartner, kNoPartner, kNoPartner,
                                              kNoPartner, kNoPartner, kNoPartner});
  CHECK(task->token_string(b.features, 2) == "dog");
  // Training draws by (seed, index, k), whatever the split.
  Batch whole, part;
  task->generate(5, 3, 4, whole);
  task->generate_sentences(5, 3, 2, 2, part);
  CHECK(std::vector<int32_t>(whole.features[0].begin() + 8, whole.features[0].end()) ==
        part.features[0]);
  fs::remove(file);
}
