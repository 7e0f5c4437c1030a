#include "train/plugins/elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace headlab {
namespace {

// The ELF flavour of this build: what dlopen in this process can load.
#if __SIZEOF_POINTER__ == 8
using Ehdr = Elf64_Ehdr;
using Phdr = Elf64_Phdr;
constexpr unsigned char kClass = ELFCLASS64;
constexpr int kBits = 64;
#else
using Ehdr = Elf32_Ehdr;
using Phdr = Elf32_Phdr;
constexpr unsigned char kClass = ELFCLASS32;
constexpr int kBits = 32;
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kData = ELFDATA2LSB;
#else
constexpr unsigned char kData = ELFDATA2MSB;
#endif

// 0: a machine this file does not know, not checked (dlopen still is).
constexpr uint16_t kMachine =
#if defined(__x86_64__)
    EM_X86_64;
#elif defined(__aarch64__)
    EM_AARCH64;
#elif defined(__i386__)
    EM_386;
#elif defined(__arm__)
    EM_ARM;
#elif defined(__riscv)
    EM_RISCV;
#elif defined(__powerpc64__)
    EM_PPC64;
#elif defined(__s390x__)
    EM_S390;
#else
    0;
#endif

std::string machine_name(uint16_t m) {
  switch (m) {
    case EM_X86_64:
      return "x86-64";
    case EM_AARCH64:
      return "AArch64";
    case EM_386:
      return "x86 (32-bit)";
    case EM_ARM:
      return "ARM (32-bit)";
    case EM_RISCV:
      return "RISC-V";
    case EM_PPC64:
      return "PowerPC 64";
    case EM_S390:
      return "s390";
    default:
      return fmt::format("machine {}", m);
  }
}

std::string type_name(uint16_t t) {
  switch (t) {
    case ET_NONE:
      return "an ELF file of no type (ET_NONE)";
    case ET_REL:
      return "a relocatable object (ET_REL, a .o file)";
    case ET_EXEC:
      return "an executable (ET_EXEC)";
    case ET_CORE:
      return "a core dump (ET_CORE)";
    default:
      return fmt::format("an ELF file of type {}", t);
  }
}

std::string segment_name(uint32_t type) {
  switch (type) {
    case PT_LOAD:
      return "PT_LOAD";
    case PT_DYNAMIC:
      return "PT_DYNAMIC";
    case PT_INTERP:
      return "PT_INTERP";
    case PT_NOTE:
      return "PT_NOTE";
    case PT_TLS:
      return "PT_TLS";
    case PT_GNU_EH_FRAME:
      return "PT_GNU_EH_FRAME";
    default:
      return fmt::format("type {:#x}", type);
  }
}

// The file descriptor, closed on every way out.
class File {
 public:
  explicit File(int fd) : fd_(fd) {}
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `bytes` at `offset` (the caller checked they lie inside the file).
void read_at(int fd, const std::filesystem::path& path, void* out, size_t bytes, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read '{}': {}", path.string(), std::strerror(errno));
    if (n == 0) fail("cannot read '{}': it became shorter while it was read", path.string());
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

// Whether [offset, offset + bytes) lies inside a file of `size` bytes (no overflow).
bool inside(uint64_t offset, uint64_t bytes, uint64_t size) {
  return offset <= size && bytes <= size - offset;
}

// offset + bytes for a message, saturated.
uint64_t end_of(uint64_t offset, uint64_t bytes) {
  return bytes > UINT64_MAX - offset ? UINT64_MAX : offset + bytes;
}

}  // namespace

std::string elf_file_problem(const std::filesystem::path& path) {
  const File file(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) fail("cannot open '{}': {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0)
    fail("cannot read '{}': {}", path.string(), std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  const auto size = static_cast<uint64_t>(st.st_size);
  // The size first: nothing below reads more than the headers, and the hash that follows reads
  // the whole file.
  if (size > kMaxPluginBytes)
    return fmt::format("it is {} bytes, more than the {} bytes (1 GiB) a plugin may be", size,
                       kMaxPluginBytes);
  Ehdr h{};
  const size_t head = size < sizeof h ? static_cast<size_t>(size) : sizeof h;
  read_at(file.get(), path, &h, head, 0);
  if (head < SELFMAG || std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
    return fmt::format(
        "it is not an ELF file (it does not start with the ELF magic 7f 45 4c 46; "
        "{} bytes)",
        size);
  if (head < sizeof h)
    return fmt::format("it is {} bytes, shorter than an ELF header ({} bytes): a truncated file?",
                       size, sizeof h);
  if (h.e_ident[EI_CLASS] != kClass)
    return fmt::format("it is a {} ELF file, but this headlab is {}-bit",
                       h.e_ident[EI_CLASS] == ELFCLASS32   ? "32-bit"
                       : h.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit"
                                                           : "malformed (unknown class)",
                       kBits);
  if (h.e_ident[EI_DATA] != kData)
    return fmt::format("its byte order is {}, but this headlab is {}",
                       h.e_ident[EI_DATA] == ELFDATA2MSB   ? "big-endian"
                       : h.e_ident[EI_DATA] == ELFDATA2LSB ? "little-endian"
                                                           : "unknown",
                       kData == ELFDATA2LSB ? "little-endian" : "big-endian");
  if (h.e_ident[EI_VERSION] != EV_CURRENT || h.e_version != EV_CURRENT)
    return fmt::format("its ELF version is {}, expected {}", h.e_version, EV_CURRENT);
  if (kMachine != 0 && h.e_machine != kMachine)
    return fmt::format("it is built for {} (e_machine {}), but this headlab runs on {} ({})",
                       machine_name(h.e_machine), h.e_machine, machine_name(kMachine), kMachine);
  if (h.e_type != ET_DYN)
    return fmt::format("it is {}, not a shared library (ET_DYN)", type_name(h.e_type));
  if (h.e_phentsize != sizeof(Phdr))
    return fmt::format("its program headers are {} bytes each, expected {}", h.e_phentsize,
                       sizeof(Phdr));
  if (h.e_phnum == 0 || h.e_phnum == PN_XNUM)
    return fmt::format("it has {} program headers, expected 1 to {}", h.e_phnum, PN_XNUM - 1);
  const uint64_t table = uint64_t{h.e_phnum} * sizeof(Phdr);
  if (!inside(h.e_phoff, table, size))
    return fmt::format("it is {} bytes, but its program headers end at byte {}: a truncated file?",
                       size, end_of(h.e_phoff, table));
  // The section headers are not mapped, but they are the last bytes a linker writes: a file cut
  // anywhere misses them.
  if (h.e_shoff != 0) {
    const uint64_t sections = uint64_t{h.e_shnum} * h.e_shentsize;
    if (!inside(h.e_shoff, sections, size))
      return fmt::format(
          "it is {} bytes, but its section headers end at byte {}: a truncated file?", size,
          end_of(h.e_shoff, sections));
  }
  std::vector<Phdr> segments(h.e_phnum);
  read_at(file.get(), path, segments.data(), table, h.e_phoff);
  int loads = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Phdr& s = segments[i];
    if (s.p_type == PT_LOAD) {
      ++loads;
      if (s.p_filesz > s.p_memsz)
        return fmt::format(
            "its program header {} (PT_LOAD) has more bytes in the file ({}) than in memory ({})",
            i, s.p_filesz, s.p_memsz);
    }
    if (s.p_filesz > 0 && !inside(s.p_offset, s.p_filesz, size))
      return fmt::format(
          "it is {} bytes, but its program header {} ({}) needs bytes {} to {}: a truncated file?",
          size, i, segment_name(s.p_type), s.p_offset, end_of(s.p_offset, s.p_filesz));
  }
  if (loads == 0) return "it has no PT_LOAD segment (nothing to map)";
  return "";
}

}  // namespace headlab
