#pragma once
// A reader of CoNLL-U, the format of the Universal Dependencies treebanks
// (https://universaldependencies.org/format.html), for the conllu task (conllu.h).
//
// Per the specification: a line starting with '#' is a comment; a blank line ends a sentence;
// every other line is a word line of exactly 10 tab-separated columns (ID FORM LEMMA UPOS XPOS
// FEATS HEAD DEPREL DEPS MISC). A multiword token's range line (ID "3-4") and an empty node's line
// (ID "5.1") are skipped: the syntactic words of the basic tree are the lines with an integer
// ID, numbered 1, 2, ... in each sentence, each with an integer HEAD in [0, n] (0: the root) and
// a non-empty DEPREL. The heads must form a tree (no cycle).
//
// Every failure is one headlab::Error line "<file>:<line>: ..." naming the column and what was
// expected, or "<file>: ..." for the file as a whole (empty, not UTF-8, too large).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

struct ConlluWord {
  std::string form;
  std::string upos;
  int32_t head = 0;  // 0: the root; else the 1-based index of the head word
  std::string deprel;
  // Set by the conllu task when it cuts a sentence (task.long_sentences = "cut") before the
  // head: the head's UPOS, which the head_upos label still needs. Empty otherwise.
  std::string cut_head_upos;
};

struct ConlluSentence {
  std::vector<ConlluWord> words;
  int64_t line = 0;  // the line of its first word, for messages
};

struct ConlluLimits {
  uint64_t max_file_bytes = uint64_t{512} << 20;  // 512 MiB
  size_t max_line_bytes = 64 * 1024;
  size_t max_sentence_words = 100000;
};

// Parses `text`, the content of `file` (named in messages). Throws headlab::Error as above;
// an input without a single sentence is an error.
std::vector<ConlluSentence> parse_conllu(std::string_view text, const std::string& file,
                                         const ConlluLimits& limits = {});
// Reads `path` with the bounded read of train/io/files.h (a regular file at most
// limits.max_file_bytes) and parses it.
std::vector<ConlluSentence> read_conllu(const std::string& path, const ConlluLimits& limits = {});

}  // namespace headlab
