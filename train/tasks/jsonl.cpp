#include "train/tasks/jsonl.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/rng.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

constexpr int32_t kBosId = 0, kPadId = 1, kUnknownId = 2;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<JsonlSentence> JsonlTask::keep(std::vector<JsonlSentence> sentences) {
  std::vector<JsonlSentence> kept;
  const auto max = static_cast<size_t>(options_.max_len);
  for (auto& s : sentences) {
    if (s.tokens.size() > max) {
      ++long_;
      if (options_.long_sentences == "skip") continue;
      s.tokens.resize(max);  // partners beyond the cut are no partner (write_sentence)
      s.labels.resize(max);
      for (auto& [name, p] : s.relations) p.resize(max);
    }
    kept.push_back(std::move(s));
  }
  return kept;
}

// Every sentence gives each scored relation, and an eval file's labels are the training file's.
void JsonlTask::check(const std::vector<JsonlSentence>& sentences, const std::string& file) const {
  for (const JsonlSentence& s : sentences) {
    for (const std::string& r : relations_)
      if (!s.partners(r))
        fail(
            "{}:{}: relations has no \"{}\": expected every sentence to give each of "
            "task.relations",
            file, s.line, r);
    for (size_t i = 0; i < s.labels.size(); ++i)
      if (s.labels[i] && !class_ids_.contains(*s.labels[i]))
        fail("{}:{}: labels[{}] is \"{}\": expected a label of {}", file, s.line, i, *s.labels[i],
             options_.train_file);
  }
}

JsonlTask::JsonlTask(const JsonlOptions& options) : options_(options) {
  features_ = {{"token", 3}};
  if (options_.train_file.empty()) {
    // Only describe_task builds one without keys; a config must name the file, which
    // generate_sentences says. One placeholder class keeps the model buildable until then.
    classes_ = {"<label>"};
    return;
  }
  std::vector<JsonlSentence> train = read_jsonl_sentences(options_.train_file);
  std::vector<JsonlSentence> eval;
  if (!options_.eval_file.empty()) eval = read_jsonl_sentences(options_.eval_file);
  relations_ = options_.relations;
  if (relations_.empty())
    for (const auto& [name, p] : train.front().relations) relations_.push_back(name);
  if (relations_.empty())
    fail(
        "{}:{}: relations is missing or empty and task.relations is not given: expected the "
        "relations to score",
        options_.train_file, train.front().line);
  if (relations_.size() > 16)
    fail("{}:{}: relations has {} names: expected at most 16 (task.relations picks some)",
         options_.train_file, train.front().line, relations_.size());
  tokens_ = {"<bos>", "<pad>", "<unk>"};
  std::unordered_map<std::string, int64_t> counts;
  std::vector<std::string> order;
  for (const auto& s : train) {
    for (const auto& t : s.tokens) {
      const std::string f = options_.lowercase ? lower(t) : t;
      if (counts[f]++ == 0) order.push_back(f);
    }
    for (const auto& l : s.labels)
      if (l && class_ids_.emplace(*l, static_cast<int32_t>(classes_.size())).second)
        classes_.push_back(*l);
  }
  if (classes_.empty())
    fail("{}: no token has a label: expected \"labels\" with at least one string",
         options_.train_file);
  for (const auto& f : order)
    if (counts[f] >= options_.min_count) {
      token_ids_[f] = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(f);
    }
  check(train, options_.train_file);
  check(eval, options_.eval_file);
  train_ = keep(std::move(train));
  eval_ = keep(std::move(eval));
  for (const auto& [list, file] :
       {std::pair{&train_, &options_.train_file}, std::pair{&eval_, &options_.eval_file}})
    if (list->empty() && !file->empty())
      fail(
          "{}: every sentence is longer than task.max_len = {} and task.long_sentences = "
          "\"skip\"",
          *file, options_.max_len);
  features_ = {{"token", static_cast<int64_t>(tokens_.size())}};
}

void JsonlTask::write_sentence(const JsonlSentence& s, int64_t row, Batch& out) const {
  const int64_t T = seq_len();
  const auto n = static_cast<int64_t>(s.tokens.size());
  for (int64_t t = 0; t < T; ++t) {
    const auto at = static_cast<size_t>(row + t);
    if (t == 0 || t > n) {
      out.features[0][at] = t == 0 ? kBosId : kPadId;
      out.labels[at] = kIgnoreIndex;
      for (auto& p : out.partners) p[at] = kNoPartner;
      continue;
    }
    const auto k = static_cast<size_t>(t - 1);
    const auto it = token_ids_.find(options_.lowercase ? lower(s.tokens[k]) : s.tokens[k]);
    out.features[0][at] = it == token_ids_.end() ? kUnknownId : it->second;
    out.labels[at] = s.labels[k] ? class_ids_.at(*s.labels[k]) : kIgnoreIndex;
    for (size_t r = 0; r < relations_.size(); ++r) {
      const int32_t p = (*s.partners(relations_[r]))[k];
      // Token index p is position p + 1; none, or a token cut off, is no partner.
      out.partners[r][at] = p >= 0 && p < n ? p + 1 : kNoPartner;
    }
  }
}

void JsonlTask::generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                                   Batch& out) const {
  if (train_.empty())
    fail("task.train_file is required for task.name = \"jsonl\": expected a token file");
  if (count < 1) fail("jsonl task: batch_size is {} but expected >= 1", count);
  if (index < 0) fail("jsonl task: batch index is {} but expected >= 0", index);
  if (first < 0) fail("jsonl task: first sentence is {} but expected >= 0", first);
  const int64_t T = seq_len();
  out.resize(count, T, features_.size(), relations_.size());
  for (int64_t b = 0; b < count; ++b) {
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(index), static_cast<uint64_t>(first + b));
    write_sentence(train_[rng.below(static_cast<uint64_t>(train_.size()))], b * T, out);
  }
}

void JsonlTask::eval_set_batch(int64_t first, int64_t count, Batch& out) const {
  const auto n = static_cast<int64_t>(eval_.size());
  if (count < 1 || first < 0 || first + count > n)
    fail("jsonl task: eval sentences [{}, {}) are outside the eval file's [0, {})", first,
         first + count, n);
  const int64_t T = seq_len();
  out.resize(count, T, features_.size(), relations_.size());
  for (int64_t b = 0; b < count; ++b)
    write_sentence(eval_[static_cast<size_t>(first + b)], b * T, out);
}

std::string JsonlTask::token_string(const std::vector<std::vector<int32_t>>& features,
                                    int64_t index) const {
  const int32_t id = features[0][static_cast<size_t>(index)];
  return id == kBosId ? "BOS" : id == kPadId ? "PAD" : tokens_[static_cast<size_t>(id)];
}

std::vector<DataCount> JsonlTask::data_counts() const {
  return {{"train_sentences", static_cast<int64_t>(train_.size())},
          {"eval_sentences", static_cast<int64_t>(eval_.size())},
          {"long_sentences", long_}};
}

std::vector<TaskVocabulary> JsonlTask::vocabularies() const {
  return {{"token", tokens_}, {"classes", classes_}};
}

std::unique_ptr<Task> make_jsonl_task(TaskOptions& o) {
  const JsonlOptions d;
  JsonlOptions c;
  c.train_file = o.get_string(
      "train_file", d.train_file,
      OptionSpec::one_of({}).documented(
          "The token file (JSON Lines) to train on, relative to the config's folder (required)."));
  c.eval_file = o.get_string("eval_file", d.eval_file,
                             OptionSpec::one_of({}).documented(
                                 "The token file evaluation reads, every sentence once in order "
                                 "(default: sentences drawn from the training file)."));
  c.relations = o.get_strings("relations", d.relations,
                              OptionSpec::names(1, 16, {}).shaped().documented(
                                  "Relations to score, named in the files' \"relations\" (default: "
                                  "the first line's, in name order)."));
  c.lowercase = o.get_bool("lowercase", d.lowercase,
                           OptionSpec::boolean().shaped().documented("Lowercase the tokens."));
  c.min_count =
      o.get_int("min_count", d.min_count,
                OptionSpec::integer(1, 1e9).shaped().documented(
                    "Tokens seen fewer times in the training file read as the unknown token."));
  c.max_len = o.get_int(
      "max_len", d.max_len,
      OptionSpec::integer(1, 4096).shaped().documented("Tokens per sentence; T = max_len + 1."));
  c.long_sentences = o.get_string(
      "long_sentences", d.long_sentences,
      OptionSpec::one_of({"skip", "cut"}).documented("Sentences over max_len: skip or cut."));
  return std::make_unique<JsonlTask>(c);
}

}  // namespace headlab
