#include "tests/reliability/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "train/io/checksum.h"
#include "train/io/safetensors.h"
#include "train/run/checkpoint.h"

namespace headlab::testing {

namespace fs = std::filesystem;

namespace {

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

[[noreturn]] void bad(const std::string& operation, const std::string& why) {
  throw std::runtime_error("operation '" + operation + "': " + why);
}

// "checkpoints/step-000004" for the word LATEST at the start of a path.
fs::path resolve(const fs::path& run, const std::string& path, const std::string& operation) {
  if (path.rfind("LATEST", 0) == 0) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(run / "checkpoints" / "latest", ec);
    if (ec) bad(operation, "the run has no checkpoints/latest");
    return run / "checkpoints" / target / path.substr(std::min(path.size(), size_t{7}));
  }
  return run / path;
}

// \n \t \\ \xNN and {deep:N} (N '[' then N ']') in operation text.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 6, "{deep:") == 0) {
      const size_t end = s.find('}', i);
      const size_t n = std::stoul(s.substr(i + 6, end - i - 6));
      out += std::string(n, '[') + std::string(n, ']');
      i = end;
      continue;
    }
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    if (c == 'n')
      out += '\n';
    else if (c == 't')
      out += '\t';
    else if (c == 'x' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else
      out += c;
  }
  return out;
}

Shape parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  std::istringstream in(text);
  std::string d;
  while (std::getline(in, d, ',')) dims.push_back(std::stoll(d));
  return Shape(dims.begin(), dims.end());
}

// A safetensors file split into its header (as ordered JSON) and its data section.
struct RawSafetensors {
  nlohmann::ordered_json header;
  std::string data;
};

RawSafetensors split_safetensors(const std::string& bytes, const std::string& operation) {
  if (bytes.size() < 8) bad(operation, "file shorter than 8 bytes");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8) bad(operation, "header length beyond the file");
  RawSafetensors raw;
  raw.header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  raw.data = bytes.substr(8 + n);
  return raw;
}

// The corpus edits fields as a tool that knows the format would: an edited state.json and a
// rewritten tensor file carry fresh checksums, so the check behind the checksum is reached.
// (The flipped-bytes cases of test_run_dirs.cpp damage files without re-signing them.)
void sign_state(nlohmann::ordered_json& j) {
  if (!j.is_object() || !j.contains("checksum")) return;
  j["checksum"] = headlab::state_checksum(nlohmann::json::parse(j.dump()));
}

// After an edit of a checkpoint's config.resolved.toml: its checksum in state.json, re-signed.
void sign_config(const fs::path& config) {
  const fs::path state_path = config.parent_path() / "state.json";
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(read_bytes(state_path));
  } catch (const std::exception&) {
    return;  // a case that damaged state.json too
  }
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object()) return;
  j["files"]["config.resolved.toml"] = headlab::checksum_hex(read_bytes(config));
  sign_state(j);
  write_bytes(state_path, j.dump(2) + "\n");
}

// After a rewrite of a checkpoint's tensor file (format 3): its digest in state.json, re-signed,
// when the file still parses (else the case is about the file itself).
void sign_tensor_file(const fs::path& file) {
  const fs::path state_path = file.parent_path() / "state.json";
  nlohmann::ordered_json j;
  SafetensorsFile f;
  try {
    j = nlohmann::ordered_json::parse(read_bytes(state_path));
    f = read_safetensors(file);
  } catch (const std::exception&) {
    return;
  }
  const std::string name = file.filename().string();
  if (!j.is_object() || !j.contains("files") || !j["files"].is_object() ||
      !j["files"].contains(name))
    return;
  j["files"][name] = headlab::tensor_file_digest(f.tensors, f.metadata);
  sign_state(j);
  write_bytes(state_path, j.dump(2) + "\n");
}

SafetensorsMetadata signed_metadata(const SafetensorsFile& f) {
  SafetensorsMetadata meta;
  for (const auto& [k, v] : f.metadata)
    if (k.rfind("xxh3_64:", 0) != 0) meta[k] = v;
  if (!meta.count("checksum")) return f.metadata;
  for (const NamedTensor& t : f.tensors)
    meta["xxh3_64:" + t.name] = headlab::checksum_hex(
        t.tensor.data(), static_cast<size_t>(t.tensor.numel()) * sizeof(float));
  return meta;
}

std::string join_safetensors(const std::string& header_text, const std::string& data) {
  std::string header = header_text;
  while (header.size() % 8) header += ' ';
  uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

}  // namespace

namespace {

void snapshot_into(const fs::path& root, const fs::path& dir, Snapshot& s) {
  // By hand rather than recursive_directory_iterator: it stats through links, and hostile
  // links (a loop, /dev/zero) must be recorded, not followed.
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string rel = e.path().lexically_relative(root).string();
    const fs::file_status st = fs::symlink_status(e.path());
    if (fs::is_symlink(st)) {
      s[rel] = "link -> " + fs::read_symlink(e.path()).string();
    } else if (fs::is_directory(st)) {
      s[rel] = "dir";
      snapshot_into(root, e.path(), s);
    } else if (!fs::is_regular_file(st)) {
      s[rel] = fs::is_fifo(st) ? "fifo" : "special";  // never opened: a FIFO would block
    } else if (fs::file_size(e.path()) > (uint64_t{64} << 20)) {
      // A huge (sparse) hostile file: its size and modification time stand for its bytes.
      const auto mtime = fs::last_write_time(e.path()).time_since_epoch().count();
      s[rel] = fmt::format("file {} mtime {}", fs::file_size(e.path()), mtime);
    } else {
      const std::string bytes = read_bytes(e.path());
      s[rel] = fmt::format("file {} {:016x}", bytes.size(), fnv1a(bytes));
    }
  }
}

}  // namespace

Snapshot snapshot(const fs::path& dir) {
  Snapshot s;
  if (fs::is_directory(fs::symlink_status(dir))) snapshot_into(dir, dir, s);
  return s;
}

std::string snapshot_diff(const Snapshot& before, const Snapshot& after) {
  std::string out;
  for (const auto& [k, v] : before) {
    auto it = after.find(k);
    if (it == after.end())
      out += "- " + k + " (" + v + ")\n";
    else if (it->second != v)
      out += "~ " + k + " (" + v + " -> " + it->second + ")\n";
  }
  for (const auto& [k, v] : after)
    if (!before.count(k)) out += "+ " + k + " (" + v + ")\n";
  return out;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
}

std::string metrics_without_timing(const fs::path& metrics_jsonl) {
  std::istringstream in(read_bytes(metrics_jsonl));
  std::string line, out;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line);
    row.erase("tokens_per_second");
    row.erase("elapsed_seconds");
    out += row.dump() + "\n";
  }
  return out;
}

fs::path resolve_path(const fs::path& run, const std::string& word) {
  return resolve(run, word, word);
}

namespace {

void apply_one(const fs::path& run, const fs::path& hostile, const std::string& operation) {
  std::istringstream in(operation);
  std::string op, path_word;
  in >> op >> path_word;
  std::string rest;
  std::getline(in, rest);
  if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
  const fs::path path = resolve(run, path_word, operation);
  std::istringstream args(rest);

  if (op == "truncate") {
    long long n = std::stoll(rest);
    const std::string bytes = read_bytes(path);
    if (n < 0) n += static_cast<long long>(bytes.size());
    write_bytes(path, bytes.substr(0, static_cast<size_t>(std::max(0LL, n))));
  } else if (op == "write") {
    write_bytes(path, unescape(rest));
  } else if (op == "append") {
    write_bytes(path, read_bytes(path) + unescape(rest));
  } else if (op == "copy") {
    fs::remove_all(path);
    fs::copy_file(hostile / rest, path);
  } else if (op == "clone") {
    fs::remove_all(path);
    fs::copy(resolve(run, rest, operation), path,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  } else if (op == "resize") {
    fs::resize_file(path, std::stoull(rest));  // sparse when it grows
  } else if (op == "remove") {
    fs::remove_all(path);
  } else if (op == "mkdir") {
    fs::remove_all(path);
    fs::create_directories(path);
  } else if (op == "link") {
    fs::remove_all(path);
    fs::create_symlink(rest, path);
  } else if (op == "fifo") {
    fs::remove_all(path);
    if (::mkfifo(path.c_str(), 0644) != 0) bad(operation, "mkfifo failed");
  } else if (op == "poke" || op == "u64") {
    long long offset = 0;
    std::string value;
    args >> offset >> value;
    std::string bytes = read_bytes(path);
    if (offset < 0) offset += static_cast<long long>(bytes.size());
    std::string patch;
    if (op == "u64") {
      const uint64_t v = std::stoull(value);
      patch.assign(8, '\0');
      std::memcpy(patch.data(), &v, 8);
    } else {
      for (size_t i = 0; i + 1 < value.size(); i += 2)
        patch += static_cast<char>(std::stoi(value.substr(i, 2), nullptr, 16));
    }
    if (offset < 0 || static_cast<size_t>(offset) + patch.size() > bytes.size())
      bad(operation, "offset beyond the file");
    bytes.replace(static_cast<size_t>(offset), patch.size(), patch);
    write_bytes(path, bytes);
  } else if (op == "json" || op == "json-remove") {
    std::string pointer;
    args >> pointer;
    std::string value;
    std::getline(args, value);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_bytes(path));
    const nlohmann::ordered_json::json_pointer ptr(pointer);
    if (op == "json")
      j[ptr] = nlohmann::ordered_json::parse(value);
    else
      j[ptr.parent_pointer()].erase(ptr.back());
    if (path.filename() == "state.json" && pointer != "/checksum") sign_state(j);
    write_bytes(path, j.dump(2) + "\n");
  } else if (op == "header" || op == "header-remove" || op == "header-raw") {
    RawSafetensors raw = split_safetensors(read_bytes(path), operation);
    std::string header_text;
    if (op == "header-raw") {
      // {run_id}: the run id the checkpoint's state.json names (a format-3 file carries it).
      header_text = unescape(rest);
      const size_t at = header_text.find("{run_id}");
      if (at != std::string::npos) {
        const auto state = nlohmann::json::parse(read_bytes(path.parent_path() / "state.json"));
        header_text.replace(at, 8, state.at("run_id").get<std::string>());
      }
    } else {
      std::string pointer;
      args >> pointer;
      std::string value;
      std::getline(args, value);
      const nlohmann::ordered_json::json_pointer ptr(pointer);
      if (op == "header")
        raw.header[ptr] = nlohmann::ordered_json::parse(value);
      else
        raw.header[ptr.parent_pointer()].erase(ptr.back());
      header_text = raw.header.dump();
    }
    write_bytes(path, join_safetensors(header_text, raw.data));
  } else if (op == "tensor-drop" || op == "tensor-add" || op == "tensor-reshape" ||
             op == "tensor-rename") {
    std::string name, arg;
    args >> name >> arg;
    SafetensorsFile f = read_safetensors(path);
    auto it = std::find_if(f.tensors.begin(), f.tensors.end(),
                           [&](const NamedTensor& t) { return t.name == name; });
    if (op != "tensor-add" && it == f.tensors.end()) bad(operation, "no tensor " + name);
    if (op == "tensor-drop")
      f.tensors.erase(it);
    else if (op == "tensor-add")
      f.tensors.push_back({name, Tensor::zeros(parse_shape(arg))});
    else if (op == "tensor-reshape")
      it->tensor = Tensor::zeros(parse_shape(arg));
    else
      it->name = arg;
    write_safetensors(path, f.tensors, signed_metadata(f));
  } else {
    bad(operation, "unknown operation '" + op + "'");
  }
}

}  // namespace

std::string tensors_of(const fs::path& safetensors_file) {
  const SafetensorsFile f = read_safetensors(safetensors_file);
  std::string out;
  for (const auto& [key, value] : f.metadata)
    if (key != "run_id") out += key + '\0' + value + '\n';
  for (const NamedTensor& t : f.tensors) {
    out += t.name + '\0';
    for (const int64_t d : t.tensor.shape()) out += std::to_string(d) + ',';
    out.append(reinterpret_cast<const char*>(t.tensor.data()),
               static_cast<size_t>(t.tensor.numel()) * sizeof(float));
    out += '\n';
  }
  return out;
}

void apply_operation(const fs::path& run, const fs::path& hostile, const std::string& operation) {
  apply_one(run, hostile, operation);
  std::istringstream in(operation);
  std::string op, path_word;
  in >> op >> path_word;
  const fs::path path = resolve(run, path_word, operation);
  const bool in_checkpoint = path.parent_path().parent_path().filename() == "checkpoints" &&
                             fs::is_regular_file(fs::symlink_status(path));
  if (path.filename() == "config.resolved.toml" && in_checkpoint) sign_config(path);
  if (path.extension() == ".safetensors" && in_checkpoint &&
      (op.rfind("tensor-", 0) == 0 || op.rfind("header", 0) == 0 || op == "truncate"))
    sign_tensor_file(path);
}

}  // namespace headlab::testing
