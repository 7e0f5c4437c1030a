#include "train/run/timeline.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "train/io/files.h"
#include "train/io/json.h"

namespace headlab {

using nlohmann::json;

json timeline_row(const EvalMetrics& e, const HeadMetrics& heads, double claim_threshold) {
  const Specialization s = specialization(heads.mass, claim_threshold);
  json components = json::object(), assignment = json::object(), mass = json::array();
  for (size_t r = 0; r < e.relations.size(); ++r) {
    if (r < e.relation_accuracy.size()) components[e.relations[r]] = e.relation_accuracy[r];
    const HeadRef a = s.assignment[r];
    assignment[e.relations[r]] = a.valid() ? json::array({a.layer, a.head}) : json(nullptr);
  }
  for (int l = 0; l < heads.layers; ++l) {
    json layer = json::array();
    for (int h = 0; h < heads.heads; ++h) {
      json m = json::object();
      for (int r = 0; r < heads.relations; ++r) m[e.relations[r]] = heads.mass.at(l, h, r);
      layer.push_back(std::move(m));
    }
    mass.push_back(std::move(layer));
  }
  return {{"step", e.step},
          {"accuracy", e.accuracy},
          {"loss", e.loss},
          {"component_accuracy", components},
          {"s_match", s.s_match},
          {"s_max", s.s_max},
          {"n_claimed", s.n_claimed},
          {"assignment", assignment},
          {"mass", mass}};
}

TimelineWriter::TimelineWriter(std::filesystem::path path, int64_t keep_through)
    : path_(std::move(path)) {
  std::string kept;
  if (keep_through >= 0 && std::filesystem::exists(path_)) {
    // As metrics.jsonl: a torn last line of a crashed session is dropped, never trusted.
    for_each_jsonl_row(path_, uint64_t{1} << 32, [&](std::string_view line, const json& row) {
      const auto step = row.find("step");
      if (step != row.end() && step->is_number_integer() && step->get<int64_t>() <= keep_through)
        kept.append(line).append("\n");
    });
  }
  write_file_atomic(path_, kept);
  out_.open(path_, std::ios::app | std::ios::binary);
  if (!out_) fail("cannot open '{}' for appending: {}", path_.string(), std::strerror(errno));
}

void TimelineWriter::write(const json& row) {
  out_ << row.dump() << '\n';
  out_.flush();
  if (!out_) fail("cannot write '{}': {}", path_.string(), std::strerror(errno));
}

}  // namespace headlab
