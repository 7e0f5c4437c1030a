#include "train/io/npy.h"

#include <bit>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "train/io/checksum.h"
#include "train/io/files.h"

namespace headlab {
namespace {

constexpr uint64_t kMaxFileBytes = uint64_t{1} << 32;  // far above any attention.npy we write

uint32_t to_little(uint32_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The dims of "'shape': (8, 4, 17, 17), " in a header: non-negative integers separated by
// commas (a malformed or overflowing dim throws).
std::vector<int64_t> parse_shape(const std::string& header, const std::string& path) {
  const size_t key = header.find("'shape':");
  const size_t open = key == std::string::npos ? key : header.find('(', key);
  const size_t close = open == std::string::npos ? open : header.find(')', open);
  if (close == std::string::npos) fail("npy: {} has no shape in its header", path);
  const std::string_view dims(header.data() + open + 1, close - open - 1);
  std::vector<int64_t> shape;
  for (size_t i = 0; i < dims.size();) {
    if (dims[i] == ' ' || dims[i] == ',') {
      ++i;
      continue;
    }
    if (!is_digit(dims[i])) fail("npy: {} has a malformed shape ({})", path, dims);
    int64_t d = 0;
    for (; i < dims.size() && is_digit(dims[i]); ++i)
      if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, dims[i] - '0', &d))
        fail("npy: {} has a dimension out of range in its shape ({})", path, dims);
    shape.push_back(d);
  }
  return shape;
}

// The number of values of `shape`, or -1 when it does not fit in int64.
int64_t checked_product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  return overflow ? -1 : n;
}

}  // namespace

void write_npy(const std::string& path, const NpyArray& array) {
  const int64_t n = checked_product(array.shape);
  if (n < 0 || n != static_cast<int64_t>(array.data.size())) {
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

  std::string bytes = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};  // magic, version 1.0
  const uint16_t len = static_cast<uint16_t>(header.size());
  bytes.push_back(static_cast<char>(len & 0xff));
  bytes.push_back(static_cast<char>(len >> 8));
  bytes += header;
  const size_t data_at = bytes.size();
  bytes.resize(data_at + array.data.size() * 4);
  for (size_t i = 0; i < array.data.size(); ++i) {
    const uint32_t v = to_little(std::bit_cast<uint32_t>(array.data[i]));
    std::memcpy(bytes.data() + data_at + 4 * i, &v, 4);
  }
  write_file_atomic(path, bytes);
}

NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_file(path, kMaxFileBytes);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    fail("npy: {} is not a .npy file", path);
  const auto byte = [&](size_t i) {
    return static_cast<uint64_t>(static_cast<unsigned char>(bytes[i]));
  };
  uint64_t header_len = byte(8) | byte(9) << 8;
  size_t header_at = 10;
  if (bytes[6] == 2 || bytes[6] == 3) {
    if (bytes.size() < 12) fail("npy: {} ends inside its header", path);
    header_len |= byte(10) << 16 | byte(11) << 24;
    header_at = 12;
  } else if (bytes[6] != 1) {
    fail("npy: {} has format version {}.{} but expected 1.0 or 2.0", path, byte(6), byte(7));
  }
  if (header_len > bytes.size() - header_at) fail("npy: {} ends inside its header", path);
  const std::string header = bytes.substr(header_at, header_len);
  if (header.find("'descr': '<f4'") == std::string::npos)
    fail("npy: {} does not hold little-endian float32 ('<f4')", path);
  if (header.find("'fortran_order': False") == std::string::npos)
    fail("npy: {} is not in C order", path);
  const size_t data_at = header_at + header_len;
  const uint64_t data_bytes = bytes.size() - data_at;
  NpyArray array;
  array.shape = parse_shape(header, path);
  const int64_t n = checked_product(array.shape);
  if (n < 0 || data_bytes % 4 != 0 || static_cast<uint64_t>(n) != data_bytes / 4)
    fail("npy: {} holds {} bytes of data but its shape needs {}", path, data_bytes,
         n < 0 ? std::string("more than 2^63 values") : std::to_string(n) + " x 4 bytes");
  array.data.resize(static_cast<size_t>(n));
  for (size_t i = 0; i < array.data.size(); ++i) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + data_at + 4 * i, 4);
    array.data[i] = std::bit_cast<float>(to_little(v));
  }
  return array;
}

std::string npy_digest(const NpyArray& array) {
  std::string text;
  for (const int64_t d : array.shape) text += std::to_string(d) + ',';
  text += ';';
  text.append(reinterpret_cast<const char*>(array.data.data()), array.data.size() * sizeof(float));
  return checksum_hex(text);
}

}  // namespace headlab
