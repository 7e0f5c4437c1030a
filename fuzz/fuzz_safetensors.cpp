// libFuzzer target: the safetensors reader over bytes in memory (parse_safetensors). Every
// rejection must be a headlab::Error; an accepted file must describe exactly its own bytes
// (the tensors' data fill the file after the header, nothing more, nothing less).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "train/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  headlab::SafetensorsFile file;
  try {
    file = headlab::parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const headlab::Error&) {
    return 0;
  }
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof header);  // accepted, so at least 8 bytes
  uint64_t data_bytes = 0;
  for (const auto& t : file.tensors) data_bytes += 4 * static_cast<uint64_t>(t.tensor.numel());
  if (8 + header + data_bytes != size) std::abort();
  return 0;
}
