#pragma once
// SHA-256 (FIPS 180-4), for fingerprinting the files a run depends on (the plugins recorded in
// run.json). A small implementation rather than a library: nothing here needs speed (a plugin
// is a few MB) and the installed package gains no dependency; tests/train/test_sha256.cpp checks
// it against the standard's examples and against coreutils' sha256sum.

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace headlab {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // The digest as 64 lowercase hex digits. Ends the computation: call it once.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes so far
};

// The hex digest of `data`.
std::string sha256_hex(std::string_view data);
// The hex digest of a regular file, read in chunks. Throws headlab::Error naming the path when
// it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace headlab
