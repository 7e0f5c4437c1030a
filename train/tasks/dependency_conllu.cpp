#include "train/tasks/dependency_conllu.h"

#include <algorithm>
#include <array>
#include <cctype>

#include <fmt/format.h>

#include "core/error.h"
#include "train/tasks/dependency.h"

namespace headlab {

namespace {

// The order of the conllu task's UPOS ids (conllu.cpp), so that colour c reads as id c.
constexpr std::array<const char*, 17> kUpos = {"ADJ",   "ADP",   "ADV", "AUX",  "CCONJ", "DET",
                                               "INTJ",  "NOUN",  "NUM", "PART", "PRON",  "PROPN",
                                               "PUNCT", "SCONJ", "SYM", "VERB", "X"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string dependency_conllu(int64_t colours, uint64_t seed, int64_t sentences) {
  if (colours < 2 || colours > static_cast<int64_t>(kUpos.size()))
    fail("export-conllu: colours is {} but expected 2 to {} (one UD tag per colour)", colours,
         kUpos.size());
  if (sentences < 1) fail("export-conllu: sentences is {} but expected >= 1", sentences);
  const DependencyTask task({colours, {"PREV", "HEAD"}, "factored"});
  Batch b;
  std::string out;
  constexpr int64_t kChunk = 1024;  // sentence k depends on (seed, 0, k) alone
  for (int64_t k = 0; k < sentences; ++k) {
    const int64_t s = k % kChunk;
    if (s == 0) task.generate_sentences(seed, 0, k, std::min(kChunk, sentences - k), b);
    const int64_t T = b.seq_len;
    out += fmt::format("# sent_id = {}\n", k);
    for (int64_t t = 1; t < T; ++t) {
      const auto at = static_cast<size_t>(s * T + t);
      const int32_t category = b.features[0][at], colour = b.features[1][at];
      const std::string name = DependencyGrammar::names[static_cast<size_t>(category)];
      out += fmt::format("{}\t{}\t{}\t{}\t_\t_\t{}\t{}\t_\t_\n", t,
                         task.token_string(b.features, static_cast<int64_t>(at)), name,
                         kUpos[static_cast<size_t>(colour)], b.partners[1][at], lower(name));
    }
    out += "\n";
  }
  return out;
}

}  // namespace headlab
