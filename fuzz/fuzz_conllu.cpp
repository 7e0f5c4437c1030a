// libFuzzer target: the CoNLL-U reader (train/tasks/conllu_reader.h). The input is a file's
// content for parse_conllu, under small limits (lines of 4 KiB, sentences of 512 words) so that
// the limits are reached too. Every rejection must be a headlab::Error; anything else (another
// exception, a crash, a sanitizer report) is a finding. An accepted file must keep what the
// reader promises: at least one sentence, every head in [0, n] and no word its own head.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "train/tasks/conllu_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  headlab::ConlluLimits limits;
  limits.max_line_bytes = 4096;
  limits.max_sentence_words = 512;
  try {
    const auto sentences = headlab::parse_conllu(text, "fuzz.conllu", limits);
    if (sentences.empty()) std::abort();
    for (const auto& s : sentences) {
      const auto n = static_cast<int32_t>(s.words.size());
      if (n < 1 || n > 512) std::abort();
      for (int32_t i = 0; i < n; ++i)
        if (s.words[i].head < 0 || s.words[i].head > n || s.words[i].head == i + 1) std::abort();
    }
  } catch (const headlab::Error&) {
  }
  return 0;
}
