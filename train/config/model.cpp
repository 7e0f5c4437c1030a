#include "train/config/model.h"

#include "train/config/schema.h"
#include "train/tasks/task.h"

namespace headlab {

EncoderOptions encoder_options(const Config& c, const Task& task) {
  const ModelConfig& m = c.model;
  EncoderOptions o;
  o.vocab_sizes.clear();
  for (const FeatureSpec& f : task.features()) o.vocab_sizes.push_back(f.vocab);
  o.max_len = task.seq_len();
  o.d_model = m.d_model;
  o.heads = m.heads;
  o.head_dim = m.head_dim;
  o.layers = m.layers;
  o.d_ff = m.d_ff;
  o.causal = m.causal;
  o.num_classes = task.num_classes();
  o.activation = parse_activation(m.activation, "model.activation");
  o.norm = parse_norm_position(m.norm, "model.norm");
  o.positions = parse_position_kind(m.positions, "model.positions");
  o.embed_init_std = static_cast<float>(m.embed_init_std);
  o.pos_init_std = static_cast<float>(m.pos_init_std);
  o.dropout = static_cast<float>(m.dropout);
  o.attn_dropout = static_cast<float>(m.attn_dropout);
  o.init = parse_init(m.init, "model.init");
  o.attention_layer = {m.attention_layer, m.attention_options};
  o.ffn_layer = {m.ffn_layer, m.ffn_options};
  o.norm_layer = {m.norm_layer, m.norm_options};
  o.positions_layer = {m.positions_layer, m.positions_options};
  return o;
}

ScheduleOptions schedule_options(const Config& c) {
  ScheduleOptions s = c.schedule;
  s.total_steps = c.train.steps;
  return s;
}

void rethrow_with_position(const Error& e, const Config& c) {
  const std::string message = e.what();
  for (const auto& t : option_tables()) {
    const std::string layer = std::get<std::string>(find_key(t.layer_key)->get(c));
    if (message.find("'" + layer + "'") == std::string::npos && !message.starts_with(layer + ":"))
      continue;
    for (const auto& [key, where] : c.origins)  // an override into the table
      if (key.starts_with(t.key + ".")) throw Error(fmt::format("{}: {}", where, message));
    if (auto it = c.origins.find(t.key); it != c.origins.end())
      throw Error(fmt::format("{}: [{}]: {}", it->second, t.key, message));
    if (auto it = c.origins.find(t.layer_key); it != c.origins.end())
      throw Error(fmt::format("{}: {}", it->second, message));
  }
  throw Error(fmt::format("{}: {}", c.source, message));
}

}  // namespace headlab
