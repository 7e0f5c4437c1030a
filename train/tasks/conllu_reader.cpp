#include "train/tasks/conllu_reader.h"

#include <array>
#include <charconv>

#include "core/error.h"
#include "train/io/files.h"

namespace headlab {
namespace {

constexpr std::array<const char*, 10> kColumns = {"ID",    "FORM", "LEMMA",  "UPOS", "XPOS",
                                                  "FEATS", "HEAD", "DEPREL", "DEPS", "MISC"};

// The byte offset of the first invalid UTF-8 sequence, or npos.
size_t invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || (n == 2 && c < 0xC2) || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return i;
    const auto c1 = static_cast<unsigned char>(n > 1 ? s[i + 1] : 0);
    if ((n == 3 && c == 0xE0 && c1 < 0xA0) || (n == 3 && c == 0xED && c1 >= 0xA0) ||
        (n == 4 && c == 0xF0 && c1 < 0x90) || (n == 4 && (c > 0xF4 || (c == 0xF4 && c1 >= 0x90))))
      return i;
    i += n;
  }
  return std::string_view::npos;
}

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  std::from_chars(s.data(), s.data() + s.size(), out);
  return true;
}

// Checks the finished sentence's heads (every head in [0, n], no cycle) and appends it.
void finish(ConlluSentence& s, const std::vector<int64_t>& lines, const std::string& file,
            std::vector<ConlluSentence>& out) {
  if (s.words.empty()) return;
  const auto n = static_cast<int32_t>(s.words.size());
  for (int32_t i = 0; i < n; ++i) {
    const int32_t h = s.words[i].head;
    if (h > n)
      fail("{}:{}: column 7 (HEAD) is {} but the sentence has {} words: expected 0 to {}", file,
           lines[i], h, n, n);
    if (h == i + 1) fail("{}:{}: column 7 (HEAD) is {}, the word itself", file, lines[i], h);
  }
  // A cycle: following heads from a word never reaches 0 within n steps.
  for (int32_t i = 0; i < n; ++i) {
    int32_t at = i + 1;
    for (int32_t steps = 0; at != 0 && steps <= n; ++steps) at = s.words[at - 1].head;
    if (at != 0)
      fail("{}:{}: column 7 (HEAD): the heads of the sentence form a cycle through word {}", file,
           lines[i], i + 1);
  }
  out.push_back(std::move(s));
  s = ConlluSentence{};
}

}  // namespace

std::vector<ConlluSentence> parse_conllu(std::string_view text, const std::string& file,
                                         const ConlluLimits& limits) {
  if (text.size() > limits.max_file_bytes)
    fail("{}: is {} bytes, more than the limit of {}", file, text.size(), limits.max_file_bytes);
  if (const size_t bad = invalid_utf8(text); bad != std::string_view::npos) {
    int64_t line = 1;
    for (size_t i = 0; i < bad; ++i) line += text[i] == '\n';
    fail("{}:{}: invalid UTF-8 at byte {}: expected UTF-8 text", file, line, bad);
  }
  std::vector<ConlluSentence> out;
  ConlluSentence s;
  std::vector<int64_t> lines;  // of s's words
  std::array<std::string_view, 10> col;
  int64_t number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (line.size() > limits.max_line_bytes)
      fail("{}:{}: the line is {} bytes, more than the limit of {}", file, number, line.size(),
           limits.max_line_bytes);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      finish(s, lines, file, out);
      lines.clear();
      continue;
    }
    if (line[0] == '#') continue;
    size_t n = 0, start = 0;
    for (size_t i = 0; i <= line.size(); ++i) {
      if (i < line.size() && line[i] != '\t') continue;
      if (n == 10)
        fail(
            "{}:{}: more than 10 tab-separated columns: expected ID FORM LEMMA UPOS XPOS FEATS "
            "HEAD DEPREL DEPS MISC",
            file, number);
      col[n++] = line.substr(start, i - start);
      start = i + 1;
    }
    if (n != 10)
      fail(
          "{}:{}: {} tab-separated column{}: expected 10 (ID FORM LEMMA UPOS XPOS FEATS HEAD "
          "DEPREL DEPS MISC)",
          file, number, n, n == 1 ? "" : "s");
    for (size_t c = 0; c < 10; ++c)
      if (col[c].empty())
        fail("{}:{}: column {} ({}) is empty: expected a value or '_'", file, number, c + 1,
             kColumns[c]);
    const std::string_view id = col[0];
    if (id.find('-') != std::string_view::npos || id.find('.') != std::string_view::npos) {
      // A multiword token's range (3-4) or an empty node (5.1): not a word of the basic tree.
      const size_t sep = id.find_first_of("-.");
      int64_t a = 0, b = 0;
      if (!parse_int(id.substr(0, sep), a) || !parse_int(id.substr(sep + 1), b))
        fail(
            "{}:{}: column 1 (ID) is '{}': expected an integer, a range like 3-4 or an empty "
            "node like 5.1",
            file, number, id);
      continue;
    }
    int64_t index = 0;
    if (!parse_int(id, index))
      fail(
          "{}:{}: column 1 (ID) is '{}': expected an integer, a range like 3-4 or an empty node "
          "like 5.1",
          file, number, id);
    if (index != static_cast<int64_t>(s.words.size()) + 1)
      fail("{}:{}: column 1 (ID) is {}: expected {} (words are numbered 1, 2, ... in a sentence)",
           file, number, index, s.words.size() + 1);
    if (s.words.size() >= limits.max_sentence_words)
      fail("{}:{}: the sentence has more than {} words", file, number, limits.max_sentence_words);
    int64_t head = 0;
    if (!parse_int(col[6], head))
      fail("{}:{}: column 7 (HEAD) is '{}': expected an integer >= 0 (0: the root)", file, number,
           col[6]);
    if (col[7] == "_")
      fail("{}:{}: column 8 (DEPREL) is '_': expected a dependency relation", file, number);
    if (s.words.empty()) s.line = number;
    s.words.push_back({std::string(col[1]), std::string(col[3]), static_cast<int32_t>(head),
                       std::string(col[7])});
    lines.push_back(number);
  }
  finish(s, lines, file, out);
  if (out.empty()) fail("{}: contains no sentence: expected CoNLL-U word lines", file);
  return out;
}

std::vector<ConlluSentence> read_conllu(const std::string& path, const ConlluLimits& limits) {
  return parse_conllu(read_file(path, limits.max_file_bytes), path, limits);
}

}  // namespace headlab
