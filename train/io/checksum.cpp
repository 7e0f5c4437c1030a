#include "train/io/checksum.h"

#include <xxhash.h>

#include <fmt/format.h>

namespace headlab {

std::string checksum_hex(const void* data, size_t bytes) {
  return fmt::format("{:016x}", static_cast<unsigned long long>(XXH3_64bits(data, bytes)));
}

bool is_checksum_text(std::string_view text) {
  if (text.size() != 16) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace headlab
