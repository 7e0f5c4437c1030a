#include "layers/registry.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "layers/dropout.h"
#include "layers/feed_forward.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/multi_head_attention.h"
#include "layers/positional_encoding.h"
#include "layers/softmax.h"

namespace headlab {
namespace {

using Registry = std::map<std::string, LayerFactory, std::less<>>;

// Built-ins are registered here, when the registry is first used, rather than by static
// registrars in each layer's file: a static library drops object files nobody references, and
// their registrars with them.
Registry& registry() {
  static Registry r = {
      {"dropout", make_dropout_layer},
      {"feed_forward", make_feed_forward_layer},
      {"layer_norm", make_layer_norm_layer},
      {"linear", make_linear_layer},
      {"multi_head_attention", make_multi_head_attention_layer},
      {"positional_encoding", make_positional_encoding_layer},
      {"softmax", make_softmax_layer},
  };
  return r;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

const char* type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

}  // namespace

LayerOptions::LayerOptions(std::string layer, const toml::table& own,
                           const toml::table& inherited, Rng& init_rng,
                           std::shared_ptr<Rng> dropout_rng)
    : layer_(std::move(layer)),
      own_(own),
      inherited_(inherited),
      init_rng_(init_rng),
      dropout_rng_(std::move(dropout_rng)) {}

std::shared_ptr<Rng> LayerOptions::dropout_rng() {
  if (!dropout_rng_) dropout_rng_ = std::make_shared<Rng>(init_rng_.next_u64());
  return dropout_rng_;
}

const toml::node* LayerOptions::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  if (const toml::node* n = own_.get(key)) return n;
  return inherited_.get(key);
}

std::string LayerOptions::where(const toml::node& node) const { return where_region(node.source()); }

std::string LayerOptions::where_key(const toml::key& key) const { return where_region(key.source()); }

std::string LayerOptions::where_region(const toml::source_region& src) const {
  if (src.begin.line == 0) return "";
  return fmt::format(" ({}:{}:{})", src.path ? *src.path : std::string("<config>"),
                     src.begin.line, src.begin.column);
}

int64_t LayerOptions::get_int(std::string_view key, int64_t fallback) {
  const toml::node* n = find(key);
  if (!n) return fallback;
  if (auto v = n->value_exact<int64_t>()) return *v;
  fail("layers: option '{}' of layer '{}' is {} but expected an integer{}", key, layer_,
       type_name(*n), where(*n));
}

int64_t LayerOptions::require_int(std::string_view key) {
  const toml::node* n = find(key);
  if (!n) fail("layers: layer '{}' needs option '{}' (an integer)", layer_, key);
  return get_int(key, 0);
}

float LayerOptions::get_float(std::string_view key, float fallback) {
  const toml::node* n = find(key);
  if (!n) return fallback;
  if (n->is_floating_point() || n->is_integer()) return static_cast<float>(*n->value<double>());
  fail("layers: option '{}' of layer '{}' is {} but expected a number{}", key, layer_,
       type_name(*n), where(*n));
}

bool LayerOptions::get_bool(std::string_view key, bool fallback) {
  const toml::node* n = find(key);
  if (!n) return fallback;
  if (auto v = n->value_exact<bool>()) return *v;
  fail("layers: option '{}' of layer '{}' is {} but expected a boolean{}", key, layer_,
       type_name(*n), where(*n));
}

std::string LayerOptions::get_string(std::string_view key, std::string_view fallback) {
  const toml::node* n = find(key);
  if (!n) return std::string(fallback);
  if (auto v = n->value_exact<std::string>()) return *v;
  fail("layers: option '{}' of layer '{}' is {} but expected a string{}", key, layer_,
       type_name(*n), where(*n));
}

void LayerOptions::check_all_used() const {
  std::vector<std::string> unknown;
  std::string first_where;
  for (const auto& [key, node] : own_) {
    if (std::find(known_.begin(), known_.end(), key.str()) != known_.end()) continue;
    if (unknown.empty()) first_where = key.source().begin.line ? where_key(key) : where(node);
    unknown.push_back(fmt::format("'{}'", key.str()));
  }
  if (unknown.empty()) return;
  fail("layers: unknown option{} {} for layer '{}'{} (known: {})", unknown.size() > 1 ? "s" : "",
       join(unknown), layer_, first_where, known_.empty() ? "none" : join(known_));
}

void register_layer(std::string name, LayerFactory factory) {
  if (name.empty()) fail("register_layer: the name is empty");
  if (!factory) fail("register_layer: the factory for '{}' is empty", name);
  auto [it, inserted] = registry().emplace(name, std::move(factory));
  if (!inserted) fail("register_layer: a layer named '{}' is already registered", name);
}

LayerRegistrar::LayerRegistrar(std::string name, LayerFactory factory) {
  register_layer(std::move(name), std::move(factory));
}

bool has_layer(std::string_view name) { return registry().find(name) != registry().end(); }

std::vector<std::string> registered_layers() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

std::shared_ptr<SequenceLayer> make_layer(std::string_view name, const toml::table& options,
                                          const toml::table& inherited, Rng& init_rng,
                                          std::shared_ptr<Rng> dropout_rng) {
  auto it = registry().find(name);
  if (it == registry().end())
    fail("layers: unknown layer '{}' (known: {})", name, join(registered_layers()));
  LayerOptions reader(std::string(name), options, inherited, init_rng, std::move(dropout_rng));
  std::shared_ptr<SequenceLayer> layer = it->second(reader);
  reader.check_all_used();
  if (!layer) fail("layers: the factory of layer '{}' returned null", name);
  return layer;
}

}  // namespace headlab
