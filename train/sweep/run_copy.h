#pragma once
// Copies of one run directory on several hosts, for a distributed sweep without a shared
// filesystem (train/sweep/gather_runs.h): a directory as one byte string and back, a copy put in
// place of an older one without a moment where neither is there, and which of two copies is the
// newer, from their run.json.
//
// Copies of a run differ only by the sessions trained into them: a copy sent to another host and
// resumed there gains a session at the end of run.json's "sessions" (train/run/run_json.h),
// and no session is ever rewritten once it has ended. So copy B continues copy A when both were
// started at the same time ("start") and A's sessions are the first ones of B's.

#include <filesystem>
#include <string>

namespace headlab {

// A directory tree (regular files, directories, symbolic links, relative paths in sorted
// order) as one byte string, and back into a directory `into` that must not exist yet. Refuses
// entries of other kinds, and paths that are absolute or climb out with "..".
std::string pack_tree(const std::filesystem::path& dir);
void unpack_tree(const std::string& packed, const std::filesystem::path& into);

// Writes `packed` as `dir`: unpacked into the hidden sibling ".NAME.incoming" first, then renamed
// into place, or, where `dir` exists, swapped with it in one step (renameat2 RENAME_EXCHANGE), so
// `dir` is at every moment one whole copy; the older copy is then removed. A stale
// ".NAME.incoming" is not this call's: it is refused and left as it is.
void place_tree(const std::string& packed, const std::filesystem::path& dir);

// run.json of a copy, its text ("" when the directory or its run.json is missing: nothing was
// trained there).
std::string run_json_text(const std::filesystem::path& dir);

// How copy `b` of a run stands to copy `a`, both given as their run.json text ("" for none).
enum class CopyOrder {
  same,       // the same text
  newer,      // b continues a (a is "" and b is not, or a's sessions are the first of b's)
  older,      // a continues b
  unrelated,  // neither continues the other: another run, or copies that went their own ways
};
CopyOrder compare_copies(const std::string& a, const std::string& b);

}  // namespace headlab
