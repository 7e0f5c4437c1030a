#include "train/tasks/conllu.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.h"
#include "core/rng.h"
#include "train/tasks/registry.h"

namespace headlab {
namespace {

constexpr std::array<const char*, 17> kUpos = {"ADJ",   "ADP",   "ADV", "AUX",  "CCONJ", "DET",
                                               "INTJ",  "NOUN",  "NUM", "PART", "PRON",  "PROPN",
                                               "PUNCT", "SCONJ", "SYM", "VERB", "X"};
constexpr int32_t kBosId = 0, kPadId = 1, kUnknownId = 2;

int32_t upos_index(const std::string& tag) {
  for (size_t i = 0; i < kUpos.size(); ++i)
    if (tag == kUpos[i]) return static_cast<int32_t>(i);
  return -1;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Checks every UPOS of a file against the 17 tags (the label and the feature need them).
void check_upos(const std::vector<ConlluSentence>& sentences, const std::string& file) {
  for (const auto& s : sentences)
    for (size_t i = 0; i < s.words.size(); ++i)
      if (upos_index(s.words[i].upos) < 0)
        fail(
            "{}: sentence at line {}, word {}: column 4 (UPOS) is '{}': expected one of the 17 "
            "Universal Dependencies tags (ADJ ... X)",
            file, s.line, i + 1, s.words[i].upos);
}

}  // namespace

std::vector<ConlluSentence> ConlluTask::keep(std::vector<ConlluSentence> sentences) {
  std::vector<ConlluSentence> kept;
  const auto max = static_cast<size_t>(options_.max_len);
  for (auto& s : sentences) {
    if (s.words.size() > max) {
      ++long_;
      if (options_.long_sentences == "skip") continue;
      // A head beyond the cut is no partner (write_sentence); its tag stays for head_upos.
      for (size_t i = 0; i < max; ++i)
        if (static_cast<size_t>(s.words[i].head) > max)
          s.words[i].cut_head_upos = s.words[static_cast<size_t>(s.words[i].head) - 1].upos;
      s.words.resize(max);
    }
    kept.push_back(std::move(s));
  }
  return kept;
}

ConlluTask::ConlluTask(const ConlluOptions& options) : options_(options) {
  if (options_.train_file.empty()) {
    // Only describe_task builds one without keys; a config must name the file.
    features_ = {{"form", 3}, {"upos", 19}};
    classes_.assign(kUpos.begin(), kUpos.end());
    return;
  }
  std::vector<ConlluSentence> train = read_conllu(options_.train_file);
  check_upos(train, options_.train_file);
  std::vector<ConlluSentence> eval;
  if (!options_.eval_file.empty()) {
    eval = read_conllu(options_.eval_file);
    check_upos(eval, options_.eval_file);
  }
  // The vocabulary and the deprel classes from the whole training file, before any cut.
  forms_ = {"<bos>", "<pad>", "<unk>"};
  std::unordered_map<std::string, int64_t> counts;
  std::vector<std::string> order;
  std::vector<std::string> deprels;
  for (const auto& s : train)
    for (const auto& w : s.words) {
      const std::string f = options_.lowercase ? lower(w.form) : w.form;
      if (counts[f]++ == 0) order.push_back(f);
      if (std::find(deprels.begin(), deprels.end(), w.deprel) == deprels.end())
        deprels.push_back(w.deprel);
    }
  for (const auto& f : order)
    if (counts[f] >= options_.min_count) {
      form_ids_[f] = static_cast<int32_t>(forms_.size());
      forms_.push_back(f);
    }
  if (options_.label == "upos") {
    classes_.assign(kUpos.begin(), kUpos.end());
  } else if (options_.label == "deprel") {
    classes_ = deprels;
  } else {
    classes_.assign(kUpos.begin(), kUpos.end());
    classes_.push_back("ROOT");
  }
  for (size_t i = 0; i < classes_.size(); ++i) class_ids_[classes_[i]] = static_cast<int32_t>(i);
  for (const auto& r : options_.relations)
    if (r != "PREV" && r != "HEAD" && r != "CHILD" &&
        std::find(deprels.begin(), deprels.end(), r) == deprels.end())
      fail("task.relations: '{}' is not PREV, HEAD, CHILD or a DEPREL of {}", r,
           options_.train_file);
  if (options_.label == "deprel")
    for (const auto& s : eval)
      for (const auto& w : s.words)
        if (!class_ids_.contains(w.deprel))
          fail("{}: sentence at line {}: column 8 (DEPREL) '{}' does not occur in {}",
               options_.eval_file, s.line, w.deprel, options_.train_file);
  train_ = keep(std::move(train));
  eval_ = keep(std::move(eval));
  if (train_.empty())
    fail(
        "{}: every sentence is longer than task.max_len = {} and task.long_sentences = "
        "\"skip\"",
        options_.train_file, options_.max_len);
  if (!options_.eval_file.empty() && eval_.empty())
    fail(
        "{}: every sentence is longer than task.max_len = {} and task.long_sentences = "
        "\"skip\": expected at least one to evaluate on",
        options_.eval_file, options_.max_len);
  for (const auto& f : options_.features) {
    if (f == "form") features_.push_back({"form", static_cast<int64_t>(forms_.size())});
    if (f == "upos") features_.push_back({"upos", 2 + static_cast<int64_t>(kUpos.size())});
  }
}

void ConlluTask::write_sentence(const ConlluSentence& s, int64_t row, Batch& out) const {
  const int64_t T = seq_len();
  const auto n = static_cast<int32_t>(s.words.size());
  for (int64_t t = 0; t < T; ++t) {
    const auto at = static_cast<size_t>(row + t);
    const bool word = t >= 1 && t <= n;
    for (size_t f = 0; f < features_.size(); ++f) {
      int32_t id = t == 0 ? kBosId : kPadId;
      if (word) {
        const ConlluWord& w = s.words[static_cast<size_t>(t - 1)];
        if (features_[f].name == "form") {
          auto it = form_ids_.find(options_.lowercase ? lower(w.form) : w.form);
          id = it == form_ids_.end() ? kUnknownId : it->second;
        } else {
          id = 2 + upos_index(w.upos);
        }
      }
      out.features[f][at] = id;
    }
    if (!word) {
      out.labels[at] = kIgnoreIndex;
      for (auto& p : out.partners) p[at] = kNoPartner;
      continue;
    }
    const ConlluWord& w = s.words[static_cast<size_t>(t - 1)];
    // Position of the head: BOS (0) for the root, as CoNLL-U's ID 0; kNoPartner for a head cut
    // off with the sentence's end.
    const int32_t head = w.head <= n ? w.head : kNoPartner;
    if (options_.label == "upos") {
      out.labels[at] = upos_index(w.upos);
    } else if (options_.label == "deprel") {
      auto it = class_ids_.find(w.deprel);
      out.labels[at] = it == class_ids_.end() ? kIgnoreIndex : it->second;
    } else {
      out.labels[at] = head == 0  ? static_cast<int32_t>(kUpos.size())
                       : head > 0 ? upos_index(s.words[static_cast<size_t>(head - 1)].upos)
                                  : upos_index(w.cut_head_upos);
    }
    for (size_t r = 0; r < options_.relations.size(); ++r) {
      const std::string& rel = options_.relations[r];
      // A word without a partner for the relation has kNoPartner: the head metrics leave it out
      // of that relation's scores (head_metrics.h) rather than score attention to BOS.
      int32_t p = kNoPartner;
      if (rel == "PREV") {
        p = static_cast<int32_t>(t - 1);
      } else if (rel == "HEAD") {
        p = head;
      } else if (rel == "CHILD") {
        for (int32_t j = 1; j <= n; ++j)
          if (s.words[static_cast<size_t>(j - 1)].head == t &&
              (p == kNoPartner || std::abs(j - t) < std::abs(p - t)))
            p = j;
      } else if (w.deprel == rel) {
        p = head;
      }
      out.partners[r][at] = p;
    }
  }
}

void ConlluTask::generate_sentences(uint64_t seed, int64_t index, int64_t first, int64_t count,
                                    Batch& out) const {
  if (train_.empty())
    fail("task.train_file is required for task.name = \"conllu\": expected a CoNLL-U file");
  if (count < 1) fail("conllu task: batch_size is {} but expected >= 1", count);
  if (index < 0) fail("conllu task: batch index is {} but expected >= 0", index);
  if (first < 0) fail("conllu task: first sentence is {} but expected >= 0", first);
  const int64_t T = seq_len();
  out.resize(count, T, features_.size(), options_.relations.size());
  for (int64_t b = 0; b < count; ++b) {
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(index), static_cast<uint64_t>(first + b));
    const auto k = rng.below(static_cast<uint64_t>(train_.size()));
    write_sentence(train_[k], b * T, out);
  }
}

void ConlluTask::eval_set_batch(int64_t first, int64_t count, Batch& out) const {
  const auto n = static_cast<int64_t>(eval_.size());
  if (count < 1 || first < 0 || first + count > n)
    fail("conllu task: eval sentences [{}, {}) are outside the eval file's [0, {})", first,
         first + count, n);
  const int64_t T = seq_len();
  out.resize(count, T, features_.size(), options_.relations.size());
  for (int64_t b = 0; b < count; ++b)
    write_sentence(eval_[static_cast<size_t>(first + b)], b * T, out);
}

std::vector<DataCount> ConlluTask::data_counts() const {
  return {{"train_sentences", static_cast<int64_t>(train_.size())},
          {"eval_sentences", static_cast<int64_t>(eval_.size())},
          {"long_sentences", long_}};
}

std::vector<TaskVocabulary> ConlluTask::vocabularies() const {
  std::vector<TaskVocabulary> out;
  for (const FeatureSpec& f : features_) {
    if (f.name == "form") {
      out.push_back({"form", forms_});
    } else {
      TaskVocabulary tags{"upos", {"<bos>", "<pad>"}};
      tags.entries.insert(tags.entries.end(), kUpos.begin(), kUpos.end());
      out.push_back(std::move(tags));
    }
  }
  out.push_back({"classes", classes_});
  return out;
}

std::string ConlluTask::token_string(const std::vector<std::vector<int32_t>>& features,
                                     int64_t index) const {
  const auto i = static_cast<size_t>(index);
  std::string out;
  for (size_t f = 0; f < features_.size(); ++f) {
    const int32_t id = features[f][i];
    if (id == kBosId) return "BOS";
    if (id == kPadId) return "PAD";
    if (!out.empty()) out += '/';
    out += features_[f].name == "form" ? forms_[static_cast<size_t>(id)]
                                       : std::string(kUpos[static_cast<size_t>(id - 2)]);
  }
  return out;
}

std::unique_ptr<Task> make_conllu_task(TaskOptions& o) {
  const ConlluOptions d;
  ConlluOptions c;
  c.train_file = o.get_string(
      "train_file", d.train_file,
      OptionSpec::one_of({}).documented(
          "The CoNLL-U file to train on, relative to the config's folder (required)."));
  c.eval_file =
      o.get_string("eval_file", d.eval_file,
                   OptionSpec::one_of({}).documented(
                       "The CoNLL-U file evaluation reads, every sentence once in order (default: "
                       "sentences drawn from the training file)."));
  c.features = o.get_strings(
      "features", d.features,
      OptionSpec::names(1, 2, {"form", "upos"}).shaped().documented("Input features."));
  c.lowercase = o.get_bool("lowercase", d.lowercase,
                           OptionSpec::boolean().shaped().documented("Lowercase the forms."));
  c.min_count =
      o.get_int("min_count", d.min_count,
                OptionSpec::integer(1, 1e9).shaped().documented(
                    "Forms seen fewer times in the training file read as the unknown word."));
  c.label = o.get_string("label", d.label,
                         OptionSpec::one_of({"upos", "deprel", "head_upos"})
                             .shaped()
                             .documented("What each word is labelled with."));
  c.relations =
      o.get_strings("relations", d.relations,
                    OptionSpec::names(1, 16, {}).shaped().documented(
                        "Relations to score: PREV, HEAD, CHILD or a DEPREL of the training file."));
  c.max_len = o.get_int(
      "max_len", d.max_len,
      OptionSpec::integer(1, 4096).shaped().documented("Words per sentence; T = max_len + 1."));
  c.long_sentences = o.get_string(
      "long_sentences", d.long_sentences,
      OptionSpec::one_of({"skip", "cut"}).documented("Sentences over max_len: skip or cut."));
  // describe_task builds the task with no key given: then there is no file to read.
  bool given = false;
  for (const auto& [key, value] : o.resolved()) given = given || !value.where.empty();
  if (c.train_file.empty() && !given) return std::make_unique<ConlluTask>(c);
  return std::make_unique<ConlluTask>(c);
}

}  // namespace headlab
