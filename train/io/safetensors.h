#pragma once
// safetensors files (https://github.com/huggingface/safetensors), fp32 only.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON (padded with spaces to a
// multiple of 8 so the data is aligned), then the data section: every tensor's raw
// little-endian fp32 values, row-major, packed in order without gaps. The header maps each
// tensor name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]} (byte offsets
// relative to the data section) and may hold "__metadata__": {string: string}. Files written
// here load with safetensors.numpy.load_file / safetensors.torch.load_file.
//
// Usage:
//   write_safetensors(dir / "model.safetensors", model.state_dict(), {{"step", "1000"}});
//   SafetensorsFile f = read_safetensors(dir / "model.safetensors");
//   model.load_state_dict(f.tensors);   // reports missing / unexpected / mis-shaped names
//
// The reader is strict and bounded: every problem throws one headlab::Error line that starts
// with the file's path and names the problem with expected and actual values; nothing it reads
// makes it allocate more than the file's size (plus bookkeeping per header entry) or recurse
// deeply. It rejects: a file shorter than 8 bytes; a header length beyond the file or above
// 100 MB; a header that is not a JSON object (JSON errors give the byte offset), or nests
// deeper than 64 levels; a repeated tensor name; an entry that is not {dtype, shape,
// data_offsets}; a dtype other than F32; a shape that is not a list of at most 6 non-negative
// integers; data_offsets that are not [begin, end] with begin <= end, whose size differs from
// 4 * product(shape); offsets that overlap, leave a gap, or do not end exactly at the end of the
// file; non-string metadata values.

#include <filesystem>
#include <map>
#include <string>

#include "core/state_dict.h"

namespace headlab {

using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  StateDict tensors;  // in data order (the writer's order), each a fresh contiguous tensor
  SafetensorsMetadata metadata;
};

// Writes `tensors` in order (header keys in the same order) and `metadata` to `path`, creating
// or truncating it, then fsyncs the file (not its directory: callers that need the name to be
// durable fsync the directory, see train/io/files.h). Throws headlab::Error: an undefined
// tensor, an empty, repeated or "__metadata__" name, or an I/O failure (naming the path and the
// system's reason, e.g. "No space left on device").
void write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                       const SafetensorsMetadata& metadata = {});

// Reads and validates a whole file (see the list above). Throws headlab::Error.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

// The same validation over bytes in memory; `name` stands for the path in messages.
SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name);

}  // namespace headlab
