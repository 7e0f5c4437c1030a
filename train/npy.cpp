#include "train/npy.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <regex>

#include "core/error.h"

namespace headlab {
namespace {

uint32_t to_little(uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

void write_npy(const std::string& path, const NpyArray& array) {
  const int64_t n = product(array.shape);
  if (n != static_cast<int64_t>(array.data.size())) {
    fail("npy: {} values do not fill a shape with {} elements ({})", array.data.size(), n, path);
  }
  std::string dims;  // Python tuple syntax: "2, 3"; a 1-D shape needs the comma: "2,"
  for (size_t i = 0; i < array.shape.size(); ++i) {
    dims += (i > 0 ? ", " : "") + std::to_string(array.shape[i]);
  }
  if (array.shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 65535) fail("npy: header of {} bytes is too long ({})", header.size(), path);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("npy: cannot open {} for writing", path);
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(magic, 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<uint32_t> raw(array.data.size());
  std::memcpy(raw.data(), array.data.data(), raw.size() * 4);
  for (uint32_t& v : raw) v = to_little(v);
  out.write(reinterpret_cast<const char*>(raw.data()),
            static_cast<std::streamsize>(raw.size() * 4));
  out.close();
  if (!out) fail("npy: writing {} failed", path);
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("npy: cannot open {}", path);
  unsigned char pre[10];
  in.read(reinterpret_cast<char*>(pre), 10);
  if (!in || std::memcmp(pre, "\x93NUMPY", 6) != 0) fail("npy: {} is not a .npy file", path);
  size_t header_len = pre[8] | (pre[9] << 8);
  if (pre[6] == 2 || pre[6] == 3) {
    unsigned char more[2];
    in.read(reinterpret_cast<char*>(more), 2);
    header_len |= static_cast<size_t>(more[0]) << 16 | static_cast<size_t>(more[1]) << 24;
  } else if (pre[6] != 1) {
    fail("npy: {} has format version {}.{} but expected 1.0 or 2.0", path, pre[6], pre[7]);
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail("npy: {} ends inside its header", path);
  if (header.find("'descr': '<f4'") == std::string::npos) {
    fail("npy: {} does not hold little-endian float32 ('<f4'): {}", path, header);
  }
  if (header.find("'fortran_order': False") == std::string::npos) {
    fail("npy: {} is not in C order", path);
  }
  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('shape':\s*\(([^)]*)\))"))) {
    fail("npy: {} has no shape in its header", path);
  }
  NpyArray array;
  const std::string dims = m[1];
  std::regex num(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator();
       ++it) {
    array.shape.push_back(std::stoll(it->str()));
  }
  const int64_t n = product(array.shape);
  std::vector<uint32_t> raw(static_cast<size_t>(n));
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(n * 4));
  if (!in) fail("npy: {} holds fewer than the {} values its shape needs", path, n);
  for (uint32_t& v : raw) v = to_little(v);
  array.data.resize(raw.size());
  std::memcpy(array.data.data(), raw.data(), raw.size() * 4);
  return array;
}

}  // namespace headlab
