#pragma once
// Checksums of what headlab writes and later trusts (checkpoint tensors, state.json, the saved
// config): XXH3 with 64 bits (xxHash, Debian's libxxhash-dev), as 16 lowercase hex digits.
// XXH3's output is fixed since xxHash 0.8.0; Python computes the same digest with
// `xxhash.xxh3_64_hexdigest(data)` (python3-xxhash).

#include <cstddef>
#include <string>
#include <string_view>

namespace headlab {

// The algorithm's name as files record it ("checksum": "xxh3_64").
inline constexpr const char* kChecksumAlgorithm = "xxh3_64";

// XXH3-64 of `bytes` bytes at `data`, as 16 hex digits.
std::string checksum_hex(const void* data, size_t bytes);
inline std::string checksum_hex(std::string_view text) {
  return checksum_hex(text.data(), text.size());
}

// Whether `text` is 16 lowercase hex digits (what checksum_hex returns).
bool is_checksum_text(std::string_view text);

}  // namespace headlab
