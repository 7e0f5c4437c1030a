#include "train/distributed/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstring>

#include <fmt/format.h>

namespace headlab {
namespace {

// The build ID in one PT_NOTE segment of the object at `base`, or "".
std::string build_id_in_notes(ElfW(Addr) base, const ElfW(Phdr) & segment) {
  const auto* at = reinterpret_cast<const unsigned char*>(base + segment.p_vaddr);
  const unsigned char* end = at + segment.p_memsz;
  auto align4 = [](size_t n) { return (n + 3) & ~size_t{3}; };
  while (at + sizeof(ElfW(Nhdr)) <= end) {
    ElfW(Nhdr) note;
    std::memcpy(&note, at, sizeof note);
    const unsigned char* name = at + sizeof note;
    const unsigned char* desc = name + align4(note.n_namesz);
    if (desc + note.n_descsz > end) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
      std::string hex;
      for (size_t i = 0; i < note.n_descsz; ++i) hex += fmt::format("{:02x}", desc[i]);
      return hex;
    }
    at = desc + align4(note.n_descsz);
  }
  return "";
}

int find_main(dl_phdr_info* info, size_t, void* out) {
  // The first object reported is the main program.
  auto& id = *static_cast<std::string*>(out);
  for (int i = 0; i < info->dlpi_phnum && id.empty(); ++i)
    if (info->dlpi_phdr[i].p_type == PT_NOTE)
      id = build_id_in_notes(info->dlpi_addr, info->dlpi_phdr[i]);
  return 1;  // stop after the first
}

}  // namespace

std::string executable_build_id() {
  std::string id;
  dl_iterate_phdr(find_main, &id);
  return id;
}

}  // namespace headlab
