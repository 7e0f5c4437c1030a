#include "core/one_line.h"

#include <fmt/format.h>

namespace headlab {

std::string one_line_message(const std::string& message) {
  constexpr size_t kMaxMessage = 1000;
  std::string line;
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t')
      line += ' ';
    else if (u < 0x20 || u == 0x7f)
      line += fmt::format("\\x{:02x}", u);
    else
      line += c;
  }
  if (line.size() > kMaxMessage) {
    size_t head = kMaxMessage / 2, tail = line.size() - kMaxMessage / 2;
    while (head > 0 && (static_cast<unsigned char>(line[head]) & 0xc0) == 0x80) --head;
    while (tail < line.size() && (static_cast<unsigned char>(line[tail]) & 0xc0) == 0x80) ++tail;
    line = fmt::format("{} [... {} characters ...] {}", line.substr(0, head), tail - head,
                       line.substr(tail));
  }
  return line;
}

}  // namespace headlab
