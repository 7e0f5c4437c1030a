// safetensors: round trip, the standard layout checked by an independent numpy reader and
// writer (tests/train/read_safetensors.py), and one clear error per malformed file.

#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "tests/temp_dir.h"
#include "train/io/files.h"
#include "train/io/safetensors.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

using TempDir = testing::TempDir;

Tensor random_tensor(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = rng.normal();
  return t;
}

StateDict sample_state() {
  Rng rng(3);
  StateDict s;
  s.push_back({"encoder.layers.0.attn.w_o.weight", random_tensor({8, 8}, rng)});
  s.push_back({"bias", random_tensor({5}, rng)});
  s.push_back({"scalar", Tensor::from(Shape{}, {-2.5f})});
  s.push_back({"empty", Tensor::empty({0, 3})});
  s.push_back({"rank6", random_tensor({1, 2, 1, 3, 1, 2}, rng)});
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A file with the given header text and data bytes.
std::string make_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(header.size() >> (8 * i));
  return out + header + std::string(data_bytes, '\0');
}

bool python_numpy_available() {
  return ::access("/usr/bin/python3", X_OK) == 0 &&
         std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

std::string run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  CHECK(::pclose(pipe) == 0);
  return out;
}

const std::string kScript = std::string(HEADLAB_SOURCE_DIR) + "/tests/train/read_safetensors.py";

}  // namespace

TEST_CASE("train: safetensors round trip keeps names, order, shapes, values and metadata") {
  TempDir dir("headlab-st");
  const StateDict state = sample_state();
  const fs::path file = dir.path / "m.safetensors";
  write_safetensors(file, state, {{"step", "12"}, {"note", "héllo"}});
  const std::string bytes = slurp(file);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[i]);
  CHECK(header_len % 8 == 0);  // data section aligned
  uint64_t data_bytes = 0;
  for (const auto& t : state) data_bytes += static_cast<uint64_t>(t.tensor.numel()) * 4;
  CHECK(bytes.size() == 8 + header_len + data_bytes);

  const SafetensorsFile read = read_safetensors(file);
  REQUIRE(read.tensors.size() == state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    CHECK(read.tensors[i].name == state[i].name);
    CHECK(read.tensors[i].tensor.shape() == state[i].tensor.shape());
    CHECK(read.tensors[i].tensor.to_vector() == state[i].tensor.to_vector());
  }
  CHECK(read.metadata.at("step") == "12");
  CHECK(read.metadata.at("note") == "héllo");
  // The in-memory parser agrees with the file reader.
  CHECK(parse_safetensors(bytes, "mem").tensors.size() == state.size());
}

TEST_CASE("train: safetensors files are standard: numpy reads ours, we read numpy's") {
  if (!python_numpy_available()) {
    MESSAGE("skipped: /usr/bin/python3 with numpy is not available (apt install python3-numpy)");
    return;
  }
  TempDir dir("headlab-st");
  const StateDict state = sample_state();
  const fs::path ours = dir.path / "ours.safetensors";
  write_safetensors(ours, state, {{"step", "7"}});
  const auto parsed =
      nlohmann::json::parse(run_capture("/usr/bin/python3 " + kScript + " read " + ours.string()));
  CHECK(parsed["metadata"]["step"] == "7");
  REQUIRE(parsed["tensors"].size() == state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& t = parsed["tensors"][i];
    CHECK(t["name"] == state[i].name);
    std::vector<int64_t> shape(state[i].tensor.shape().begin(), state[i].tensor.shape().end());
    CHECK(t["shape"].get<std::vector<int64_t>>() == shape);
    const auto values = t["values"].get<std::vector<double>>();
    REQUIRE(values.size() == static_cast<size_t>(state[i].tensor.numel()));
    for (size_t k = 0; k < values.size(); ++k)
      CHECK(static_cast<float>(values[k]) == state[i].tensor[static_cast<int64_t>(k)]);
  }

  const fs::path theirs = dir.path / "theirs.safetensors";
  run_capture("/usr/bin/python3 " + kScript + " write " + theirs.string());
  const SafetensorsFile f = read_safetensors(theirs);
  CHECK(f.metadata.at("who") == "numpy");
  REQUIRE(f.tensors.size() == 3);  // in data order, whatever the header's key order
  CHECK(f.tensors[0].name == "b");
  CHECK(f.tensors[0].tensor.shape() == Shape{2, 3});
  for (int64_t i = 0; i < 6; ++i) CHECK(f.tensors[0].tensor[i] == static_cast<float>(i) * 0.5f - 1);
  CHECK(f.tensors[1].name == "a");
  for (int64_t i = 0; i < 4; ++i) CHECK(f.tensors[1].tensor[i] == 1.0f / static_cast<float>(1 + i));
  CHECK(f.tensors[2].name == "s");
  CHECK(f.tensors[2].tensor.rank() == 0);
  CHECK(f.tensors[2].tensor.item() == 3.25f);
}

TEST_CASE("train: safetensors malformed files give one line naming the file and the problem") {
  TempDir dir("headlab-st");
  const fs::path file = dir.path / "bad.safetensors";
  auto expect_error = [&](const std::string& bytes, const std::string& fragment) {
    spit(file, bytes);
    std::string message;
    try {
      read_safetensors(file);
    } catch (const Error& e) {
      message = e.what();
    }
    INFO("expected '" << fragment << "', got '" << message << "'");
    CHECK(message.find(fragment) != std::string::npos);
    CHECK(message.rfind(file.string() + ": ", 0) == 0);
    CHECK(message.find('\n') == std::string::npos);
  };
  const std::string f32 = R"("dtype":"F32")";
  auto entry = [&](const std::string& name, const std::string& shape, int b, int e) {
    return fmt::format(R"("{}":{{{},"shape":{},"data_offsets":[{},{}]}})", name, f32, shape, b, e);
  };

  expect_error("", "file is 0 bytes, too short");
  expect_error("abcde", "file is 5 bytes, too short");
  expect_error(make_file("{}", 0).substr(0, 8), "header length is 2 bytes but only 0 bytes follow");
  std::string huge_len(8, '\xff');
  expect_error(huge_len + "{}", "header length is 18446744073709551615 bytes but only 2");
  expect_error(make_file("PK", 0), "header does not start with '{'");
  expect_error(make_file("{\"a\": ", 0), "header is not valid JSON");
  expect_error(make_file("[1]", 0), "header does not start with '{'");
  expect_error(make_file("{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0),
               "nests deeper than 64 levels");
  expect_error(
      make_file("{" + entry("w", "[2,3]", 0, 24) + "," + entry("w", "[6]", 24, 48) + "}", 48),
      "key 'w' twice");
  expect_error(make_file(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4),
               "tensor 'w': dtype is \"F16\" but headlab reads only F32");
  expect_error(make_file("{" + entry("w", "[2,3]", 0, 20) + "}", 20),
               "shape [2, 3] needs 24 bytes of F32 but data_offsets [0, 20] hold 20");
  expect_error(make_file("{" + entry("w", "[2,3]", 0, 24) + "}", 20),
               "data_offsets [0, 24] reach past the data section of 20 bytes");
  expect_error(make_file("{" + entry("a", "[4]", 0, 16) + "," + entry("b", "[4]", 8, 24) + "}", 24),
               "tensor 'b': data_offsets [8, 24] overlap tensor 'a' at [0, 16]");
  expect_error(make_file("{" + entry("a", "[2]", 0, 8) + "," + entry("b", "[2]", 12, 20) + "}", 20),
               "begin at 12 but the previous tensor ends at 8 (a gap)");
  expect_error(make_file("{" + entry("a", "[2]", 0, 8) + "}", 12),
               "data section has 12 bytes but the tensors cover 8");
  expect_error(make_file("{" + entry("a", "[2]", 8, 4) + "}", 8), "end before they begin");
  expect_error(make_file("{" + entry("a", "[-2]", 0, 8) + "}", 8),
               "shape has a negative integer -2");
  expect_error(make_file("{" + entry("a", "[1,1,1,1,1,1,2]", 0, 8) + "}", 8),
               "shape has 7 dimensions but headlab supports at most 6");
  expect_error(make_file("{" + entry("a", "[1099511627776,1099511627776]", 0, 8) + "}", 8),
               "needs more than 2^42 bytes");
  expect_error(make_file("{" + entry("a", "[2199023255552]", 0, 8) + "}", 8),
               "dimension 2199023255552 is larger than 2^40");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8),
               "tensor 'a' has no 'data_offsets'");
  expect_error(make_file(R"({"a":[1,2]})", 8), "tensor 'a' is an array but expected an object");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
               "unexpected key 'x'");
  expect_error(make_file(R"({"__metadata__":{"step":3}})", 0), "__metadata__ 'step' is an integer");
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", 8),
               "data_offsets is [0,8.0] but expected [begin, end]");

  // A valid file cut short anywhere fails cleanly.
  write_safetensors(file, sample_state());
  const std::string good = slurp(file);
  for (size_t cut : {good.size() - 1, good.size() - 40, size_t{20}, size_t{9}}) {
    spit(file, good.substr(0, cut));
    CHECK_THROWS_AS(read_safetensors(file), Error);
  }
  CHECK_THROWS_WITH_AS(read_safetensors(dir.path / "missing.safetensors"),
                       doctest::Contains("cannot open: No such file or directory"), Error);
  CHECK_THROWS_WITH_AS(read_safetensors(dir.path), doctest::Contains("not a regular file"), Error);
}

TEST_CASE("train: safetensors reader survives random corruption with headlab errors only") {
  TempDir dir("headlab-st");
  write_safetensors(dir.path / "m.safetensors", sample_state(), {{"step", "1"}});
  const std::string good = slurp(dir.path / "m.safetensors");
  Rng rng(11);
  int ok = 0, errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int edits = 1 + static_cast<int>(rng.below(4));
    for (int e = 0; e < edits; ++e) {
      switch (rng.below(4)) {
        case 0:
          bytes[rng.below(bytes.size())] = static_cast<char>(rng.below(256));
          break;
        case 1:
          bytes.resize(rng.below(bytes.size() + 1));
          break;
        case 2: {  // corrupt the header text, where structure lives
          const size_t at = 8 + rng.below(std::min<size_t>(bytes.size(), 400));
          if (at < bytes.size()) bytes[at] = "{}[],:\"0123456789-e.x"[rng.below(21)];
          break;
        }
        default:
          bytes.insert(rng.below(bytes.size() + 1), 1, static_cast<char>(rng.below(256)));
      }
      if (bytes.empty()) break;
    }
    try {
      parse_safetensors(bytes, "fuzz");
      ++ok;
    } catch (const Error& e) {
      ++errors;
      CHECK(std::string(e.what()).rfind("fuzz: ", 0) == 0);
    }
  }
  CHECK(errors > 1000);  // corruption is noticed (only value bytes may change silently)
  MESSAGE("corrupted files: " << errors << " rejected, " << ok << " accepted");
}

TEST_CASE("train: safetensors writer rejects bad names and reports I/O failures") {
  TempDir dir("headlab-st");
  const Tensor t = Tensor::zeros({2});
  CHECK_THROWS_WITH_AS(write_safetensors(dir.path / "a", {{"w", t}, {"w", t}}),
                       doctest::Contains("tensor name 'w' appears twice"), Error);
  CHECK_THROWS_WITH_AS(write_safetensors(dir.path / "a", {{"", t}}),
                       doctest::Contains("empty name"), Error);
  CHECK_THROWS_WITH_AS(write_safetensors(dir.path / "a", {{"__metadata__", t}}),
                       doctest::Contains("reserved"), Error);
  CHECK_THROWS_WITH_AS(write_safetensors(dir.path / "a", {{"w", Tensor()}}),
                       doctest::Contains("tensor 'w' is undefined"), Error);
  spit(dir.path / "file", "x");
  CHECK_THROWS_WITH_AS(write_safetensors(dir.path / "file" / "m.safetensors", {{"w", t}}),
                       doctest::Contains("Not a directory"), Error);
  // A real "disk full": /dev/full fails every write with ENOSPC.
  if (::access("/dev/full", W_OK) == 0) {
    DurableFile full("/dev/full");
    CHECK_THROWS_WITH_AS(full.write(std::string(1 << 16, 'x')),
                         "cannot write '/dev/full': No space left on device", Error);
  } else {
    MESSAGE("skipped the ENOSPC check: /dev/full is not writable here");
  }
}
