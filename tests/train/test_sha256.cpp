// SHA-256 against the examples of FIPS 180-4 (appendix B) and against coreutils' sha256sum on
// files whose lengths straddle the padding's block boundaries.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "train/io/sha256.h"

using namespace headlab;
namespace fs = std::filesystem;

TEST_CASE("train: sha256 gives the standard's digests") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;  // one million 'a', fed in uneven pieces
  const std::string piece(997, 'a');
  size_t fed = 0;
  for (; fed + piece.size() <= 1000000; fed += piece.size()) million.update(piece);
  million.update(std::string(1000000 - fed, 'a'));
  CHECK(million.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("train: sha256 of a file agrees with sha256sum across block boundaries") {
  const fs::path dir = fs::temp_directory_path() / fmt::format("headlab-sha256-{}", ::getpid());
  fs::create_directories(dir);
  for (size_t n : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 70001}) {
    CAPTURE(n);
    const fs::path file = dir / fmt::format("f{}", n);
    std::string bytes(n, '\0');
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 131 + 7) % 256);
    std::ofstream(file, std::ios::binary) << bytes;
    FILE* p = ::popen(("sha256sum '" + file.string() + "'").c_str(), "r");
    REQUIRE(p != nullptr);
    char line[128] = {};
    REQUIRE(std::fgets(line, sizeof line, p) != nullptr);
    ::pclose(p);
    CHECK(sha256_file(file) == std::string(line, 64));
    CHECK(sha256_hex(bytes) == std::string(line, 64));
  }
  fs::remove_all(dir);
  CHECK_THROWS_WITH_AS(sha256_file(dir / "missing"), doctest::Contains("cannot read"), Error);
}
