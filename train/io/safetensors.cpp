#include "train/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/io/files.h"

namespace headlab {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian fp32; add byte swapping for this platform");

namespace {

// The reference implementation's limit on the header size.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kMaxJsonDepth = 64;
constexpr uint64_t kMaxDim = uint64_t{1} << 40;

struct Entry {
  std::string name;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

const char* json_type(const ojson& j) {
  switch (j.type()) {
    case ojson::value_t::object:
      return "an object";
    case ojson::value_t::array:
      return "an array";
    case ojson::value_t::string:
      return "a string";
    case ojson::value_t::boolean:
      return "a boolean";
    case ojson::value_t::number_integer:
      return "a negative integer";
    case ojson::value_t::number_unsigned:
      return "an integer";
    case ojson::value_t::number_float:
      return "a floating-point number";
    case ojson::value_t::null:
      return "null";
    default:
      return "something else";
  }
}

// Rejects nesting deeper than kMaxJsonDepth before the parser sees the text, so hostile input
// ("[[[[...") costs neither deep recursion nor a large tree.
void check_depth(const std::string& text, const std::string& name) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        fail("{}: header nests deeper than {} levels", name, kMaxJsonDepth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
}

// Parses the header, rejecting repeated keys in any object (nlohmann keeps the last silently).
ojson parse_header_json(const std::string& text, const std::string& name) {
  check_depth(text, name);
  std::vector<std::unordered_set<std::string>> keys;
  std::string duplicate;
  ojson::parser_callback_t cb = [&](int, ojson::parse_event_t event, ojson& parsed) {
    if (event == ojson::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == ojson::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == ojson::parse_event_t::key && !keys.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  ojson header;
  try {
    header = ojson::parse(text, cb);
  } catch (const ojson::exception& e) {  // parse_error, or out_of_range for a number like 1e400
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    if (const auto at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != what.npos)
      what = what.substr(at + 2);
    fail("{}: header is not valid JSON: {}", name, what);
  }
  if (!duplicate.empty()) fail("{}: header has the key '{}' twice", name, duplicate);
  if (!header.is_object())
    fail("{}: header is {} but expected a JSON object", name, json_type(header));
  return header;
}

Shape parse_shape(const ojson& j, const std::string& name, const std::string& tensor,
                  uint64_t& numel) {
  if (!j.is_array())
    fail("{}: tensor '{}': shape is {} but expected a list of integers", name, tensor,
         json_type(j));
  if (j.size() > static_cast<size_t>(Shape::kMaxRank))
    fail("{}: tensor '{}': shape has {} dimensions but headlab supports at most {}", name, tensor,
         j.size(), Shape::kMaxRank);
  Shape shape;
  // Product saturated at 2^40 + 1: dimensions are <= 2^40, so 128 bits never overflow.
  unsigned __int128 product = 1;
  bool zero = false;
  for (const auto& d : j) {
    if (!d.is_number_unsigned())
      fail("{}: tensor '{}': shape has {} {} but expected non-negative integers", name, tensor,
           json_type(d), d.dump());
    const auto v = d.get<uint64_t>();
    if (v > kMaxDim)
      fail("{}: tensor '{}': shape dimension {} is larger than 2^40", name, tensor, v);
    if (v == 0) zero = true;
    product = std::min<unsigned __int128>(product * v, kMaxDim + 1);
    shape.push_back(static_cast<int64_t>(v));
  }
  numel = zero ? 0 : static_cast<uint64_t>(product);
  return shape;
}

std::vector<Entry> parse_entries(const ojson& header, uint64_t data_size, const std::string& name,
                                 SafetensorsMetadata& metadata) {
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object())
        fail("{}: __metadata__ is {} but expected an object of strings", name, json_type(value));
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          fail("{}: __metadata__ '{}' is {} but expected a string", name, mk, json_type(mv));
        metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    if (key.empty()) fail("{}: header has a tensor with an empty name", name);
    if (!value.is_object())
      fail("{}: tensor '{}' is {} but expected an object with dtype, shape and data_offsets", name,
           key, json_type(value));
    for (const auto& [field, unused] : value.items()) {
      (void)unused;
      if (field != "dtype" && field != "shape" && field != "data_offsets")
        fail("{}: tensor '{}' has the unexpected key '{}' (expected dtype, shape, data_offsets)",
             name, key, field);
    }
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field)) fail("{}: tensor '{}' has no '{}'", name, key, field);
    const ojson& dtype = value["dtype"];
    if (!dtype.is_string())
      fail("{}: tensor '{}': dtype is {} but expected a string", name, key, json_type(dtype));
    if (dtype.get_ref<const std::string&>() != "F32")
      fail("{}: tensor '{}': dtype is {} but headlab reads only F32", name, key, dtype.dump());
    Entry e;
    e.name = key;
    uint64_t numel = 0;
    e.shape = parse_shape(value["shape"], name, key, numel);
    const ojson& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail(
          "{}: tensor '{}': data_offsets is {} but expected [begin, end], two non-negative "
          "integers",
          name, key, off.dump().substr(0, 200));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end)
      fail("{}: tensor '{}': data_offsets [{}, {}] end before they begin", name, key, e.begin,
           e.end);
    if (e.end > data_size)
      fail("{}: tensor '{}': data_offsets [{}, {}] reach past the data section of {} bytes", name,
           key, e.begin, e.end, data_size);
    if (numel > kMaxDim || numel * 4 != e.end - e.begin)
      fail("{}: tensor '{}': shape {} needs {} bytes of F32 but data_offsets [{}, {}] hold {}",
           name, key, e.shape.str(),
           numel > kMaxDim ? std::string("more than 2^42") : std::to_string(numel * 4), e.begin,
           e.end, e.end - e.begin);
    entries.push_back(std::move(e));
  }
  // The tensors must tile the data section exactly, in offset order (as the reference reader
  // demands): no overlap, no gap, nothing after the last one.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const auto& e : entries) {
    if (e.begin < expected)
      fail("{}: tensor '{}': data_offsets [{}, {}] overlap tensor '{}' at [{}, {}]", name, e.name,
           e.begin, e.end, previous->name, previous->begin, previous->end);
    if (e.begin > expected)
      fail("{}: tensor '{}': data_offsets begin at {} but the previous tensor ends at {} (a gap)",
           name, e.name, e.begin, expected);
    expected = e.end;
    previous = &e;
  }
  if (expected != data_size)
    fail("{}: the data section has {} bytes but the tensors cover {}", name, data_size, expected);
  return entries;
}

// Decodes a file of `size` bytes; read_at(offset, dst, n) copies exactly n bytes or throws.
template <class ReadAt>
SafetensorsFile decode(const std::string& name, uint64_t size, ReadAt read_at) {
  if (size < 8)
    fail("{}: file is {} bytes, too short for a safetensors file (8-byte header length first)",
         name, size);
  unsigned char len_bytes[8];
  read_at(0, len_bytes, 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > size - 8)
    fail(
        "{}: header length is {} bytes but only {} bytes follow the length field (truncated, or "
        "not a safetensors file)",
        name, header_len, size - 8);
  if (header_len > kMaxHeaderBytes)
    fail("{}: header length is {} bytes, above the limit of {}", name, header_len, kMaxHeaderBytes);
  if (header_len < 2)
    fail("{}: header length is {} bytes, too short for a JSON object", name, header_len);
  std::string text(header_len, '\0');
  read_at(8, text.data(), header_len);
  if (text[0] != '{') fail("{}: header does not start with '{{' (not a safetensors file?)", name);
  const ojson header = parse_header_json(text, name);
  const uint64_t data_begin = 8 + header_len;
  SafetensorsFile out;
  const std::vector<Entry> entries = parse_entries(header, size - data_begin, name, out.metadata);
  out.tensors.reserve(entries.size());
  for (const auto& e : entries) {
    Tensor t = Tensor::empty(e.shape);
    if (e.end > e.begin) read_at(data_begin + e.begin, t.data(), e.end - e.begin);
    out.tensors.push_back({e.name, std::move(t)});
  }
  return out;
}

}  // namespace

void write_safetensors(const fs::path& path, const StateDict& tensors,
                       const SafetensorsMetadata& metadata) {
  const std::string name = path.string();
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson meta = ojson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::unordered_set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty()) fail("write_safetensors {}: a tensor has an empty name", name);
    if (t.name == "__metadata__")
      fail("write_safetensors {}: '__metadata__' is reserved and cannot name a tensor", name);
    if (!seen.insert(t.name).second)
      fail("write_safetensors {}: tensor name '{}' appears twice", name, t.name);
    if (!t.tensor.defined()) fail("write_safetensors {}: tensor '{}' is undefined", name, t.name);
    const auto bytes = static_cast<uint64_t>(t.tensor.numel()) * 4;
    ojson entry = ojson::object();
    entry["dtype"] = "F32";
    entry["shape"] = ojson::array();
    for (int64_t d : t.tensor.shape()) entry["shape"].push_back(d);
    entry["data_offsets"] = {offset, offset + bytes};
    header[t.name] = std::move(entry);
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const ojson::type_error& e) {
    fail("write_safetensors {}: a tensor name or metadata string is not valid UTF-8", name);
  }
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(text.size() >> (8 * i));

  DurableFile file(path);
  try {
    file.write(len_bytes, 8);
    file.write(text);
    for (const auto& t : tensors)
      file.write(t.tensor.data(), static_cast<size_t>(t.tensor.numel()) * sizeof(float));
    file.commit();
  } catch (...) {
    // A partial file must not look like a valid one later; remove it, but only a regular file
    // (never a device such as /dev/full that the caller named).
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
    throw;
  }
}

SafetensorsFile read_safetensors(const fs::path& path) {
  const std::string name = path.string();
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  while (fd < 0 && errno == EINTR);
  if (fd < 0) fail("{}: cannot open: {}", name, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("{}: cannot stat: {}", name, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: not a regular file", name);
  auto read_at = [&](uint64_t offset, void* dst, uint64_t n) {
    auto* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        fail("{}: cannot read: {}", name, std::strerror(errno));
      }
      if (got == 0) fail("{}: file ended early at byte {} (changed while reading?)", name, offset);
      p += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
  };
  return decode(name, static_cast<uint64_t>(st.st_size), read_at);
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name) {
  auto read_at = [&](uint64_t offset, void* dst, uint64_t n) {
    HEADLAB_ASSERT(offset + n <= bytes.size());
    std::memcpy(dst, bytes.data() + offset, n);
  };
  return decode(name, bytes.size(), read_at);
}

}  // namespace headlab
