#pragma once
// What a plugin file must be before dlopen maps it (train/plugins/loader.cpp). dlopen trusts
// the file's program headers: a truncated shared library (a copy or a build cut short) is mapped
// past its end, and the first touch of a missing page kills the process with SIGBUS, before
// dlopen can return an error. So the loader reads the ELF header and program headers itself,
// with plain reads, and refuses a file that dlopen could not map safely:
//
//   larger than kMaxPluginBytes (checked by size first: a sparse 4 GB file is refused at once,
//   before anything reads or hashes it), shorter than an ELF header, not ELF (no magic),
//   another class (32/64-bit), byte order, ELF version or machine than this build, not a shared
//   object (e_type ET_DYN), program or section header table outside the file, no PT_LOAD
//   segment, or a PT_LOAD whose file range lies outside the file (or exceeds its memory size).
//
// Only then is the file hashed and loaded. What the checks cannot see (a file that changes
// between the check and dlopen) is the user's own doing; a plugin that passes is still
// checked by dlopen and the handshake.

#include <cstdint>
#include <filesystem>
#include <string>

namespace headlab {

// The largest plugin file the loader reads: 1 GiB (plugins are a few MB; with debug
// information, tens of MB).
inline constexpr uint64_t kMaxPluginBytes = uint64_t{1} << 30;

// "" when `path` (a regular file) passes every check above, else the reason, e.g. "is 20000
// bytes, but its PT_LOAD segment 2 needs bytes up to 41280 (a truncated file?)". Throws
// headlab::Error naming the path when it cannot be opened or read.
std::string elf_file_problem(const std::filesystem::path& path);

}  // namespace headlab
