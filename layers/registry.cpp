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

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

struct LayerKind {
  LayerFactory make;
  LayerParameterCount count;  // may be empty
};
using Registry = std::map<std::string, LayerKind, std::less<>>;

int64_t no_parameters(LayerOptions&) { return 0; }

// The counters of the layers whose files keep only their factory; they read the same keys as
// make_linear_layer and make_multi_head_attention_layer (tests/layers/test_parameter_count.cpp
// compares every built-in counter with the built layer).
int64_t count_linear_parameters(LayerOptions& o) {
  const int64_t d_model = o.get_int("d_model", 0);
  const int64_t in = o.get_int("in_features", d_model), out = o.get_int("out_features", d_model);
  return in * out + (o.get_bool("bias", true) ? out : 0);
}

int64_t count_multi_head_attention_parameters(LayerOptions& o) {
  const int64_t d = o.require_int("d_model"), heads = o.get_int("heads", 1);
  const int64_t head_dim = o.get_int("head_dim", 0);
  const int64_t inner = head_dim > 0 ? heads * head_dim : d;  // heads divide d_model otherwise
  const bool bias = o.get_bool("bias", true);
  return 4 * d * inner + (bias ? 3 * inner + d : 0);  // W_q, W_k, W_v [inner, d]; W_o [d, inner]
}

// Built-ins are registered here, when the registry is first used, rather than by static
// registrars in each layer's file: a static library drops object files nobody references, and
// their registrars with them.
Registry& registry() {
  static Registry r = {
      {"dropout", {make_dropout_layer, no_parameters}},
      {"feed_forward", {make_feed_forward_layer, count_feed_forward_parameters}},
      {"layer_norm", {make_layer_norm_layer, count_layer_norm_parameters}},
      {"linear", {make_linear_layer, count_linear_parameters}},
      {"multi_head_attention",
       {make_multi_head_attention_layer, count_multi_head_attention_parameters}},
      {"positional_encoding",
       {make_positional_encoding_layer, count_positional_encoding_parameters}},
      {"softmax", {make_softmax_layer, no_parameters}},
  };
  return r;
}

const LayerKind& find_kind(std::string_view name) {
  auto it = registry().find(name);
  if (it == registry().end())
    fail("layers: unknown layer '{}' (known: {})", name, join(registered_layers()));
  return it->second;
}

}  // namespace

LayerOptions::LayerOptions(std::string layer, const OptionMap& own, const OptionMap& inherited,
                           Rng& init_rng, std::shared_ptr<SampleRng> dropout_rng)
    : layer_(std::move(layer)),
      own_(own),
      inherited_(inherited),
      init_rng_(init_rng),
      dropout_rng_(std::move(dropout_rng)) {}

std::shared_ptr<SampleRng> LayerOptions::dropout_rng() {
  if (!dropout_rng_) dropout_rng_ = std::make_shared<SampleRng>(init_rng_.next_u64());
  return dropout_rng_;
}

const OptionValue* LayerOptions::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  if (const OptionValue* v = own_.find(key)) return v;
  return inherited_.find(key);
}

void LayerOptions::type_error(std::string_view key, const OptionValue& v,
                              const char* expected) const {
  fail("layers: option '{}' of layer '{}' is {} but expected {}{}", key, layer_,
       v.type_article(), expected, v.where.empty() ? "" : " (" + v.where + ")");
}

int64_t LayerOptions::get_int(std::string_view key, int64_t fallback) {
  const OptionValue* v = find(key);
  if (!v) return fallback;
  if (const int64_t* n = v->get_if<int64_t>()) return *n;
  type_error(key, *v, "an integer");
}

int64_t LayerOptions::require_int(std::string_view key) {
  if (!find(key)) fail("layers: layer '{}' needs option '{}' (an integer)", layer_, key);
  return get_int(key, 0);
}

float LayerOptions::get_float(std::string_view key, float fallback) {
  const OptionValue* v = find(key);
  if (!v) return fallback;
  if (const double* f = v->get_if<double>()) return static_cast<float>(*f);
  if (const int64_t* n = v->get_if<int64_t>()) return static_cast<float>(*n);
  type_error(key, *v, "a number");
}

bool LayerOptions::get_bool(std::string_view key, bool fallback) {
  const OptionValue* v = find(key);
  if (!v) return fallback;
  if (const bool* b = v->get_if<bool>()) return *b;
  type_error(key, *v, "a boolean");
}

std::string LayerOptions::get_string(std::string_view key, std::string_view fallback) {
  const OptionValue* v = find(key);
  if (!v) return std::string(fallback);
  if (const std::string* s = v->get_if<std::string>()) return *s;
  type_error(key, *v, "a string");
}

void LayerOptions::check_all_used() const {
  std::vector<std::string> unknown;
  std::string first_where;
  for (const auto& [key, value] : own_) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    if (unknown.empty()) {
      const std::string& w = value.key_where.empty() ? value.where : value.key_where;
      if (!w.empty()) first_where = " (" + w + ")";
    }
    unknown.push_back(fmt::format("'{}'", key));
  }
  if (unknown.empty()) return;
  fail("layers: unknown option{} {} for layer '{}'{} (known: {})", unknown.size() > 1 ? "s" : "",
       join(unknown), layer_, first_where, known_.empty() ? "none" : join(known_));
}

void register_layer(std::string name, LayerFactory factory, LayerParameterCount count) {
  if (name.empty()) fail("register_layer: the name is empty");
  if (!factory) fail("register_layer: the factory for '{}' is empty", name);
  auto [it, inserted] = registry().emplace(name, LayerKind{std::move(factory), std::move(count)});
  if (!inserted) fail("register_layer: a layer named '{}' is already registered", name);
}

LayerRegistrar::LayerRegistrar(std::string name, LayerFactory factory, LayerParameterCount count) {
  register_layer(std::move(name), std::move(factory), std::move(count));
}

bool has_layer(std::string_view name) { return registry().find(name) != registry().end(); }

std::vector<std::string> registered_layers() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

std::shared_ptr<SequenceLayer> make_layer(std::string_view name, const OptionMap& options,
                                          const OptionMap& inherited, Rng& init_rng,
                                          std::shared_ptr<SampleRng> dropout_rng) {
  const LayerKind& kind = find_kind(name);
  LayerOptions reader(std::string(name), options, inherited, init_rng, std::move(dropout_rng));
  std::shared_ptr<SequenceLayer> layer = kind.make(reader);
  reader.check_all_used();
  if (!layer) fail("layers: the factory of layer '{}' returned null", name);
  return layer;
}

int64_t layer_parameter_count(const LayerSpec& spec, const OptionMap& inherited) {
  const LayerKind& kind = find_kind(spec.name);
  Rng rng(0);  // a counter draws nothing; a built layer is thrown away
  if (kind.count) {
    LayerOptions reader(spec.name, spec.options, inherited, rng);
    return kind.count(reader);
  }
  int64_t n = 0;
  for (const NamedParameter& p : make_layer(spec, inherited, rng)->named_parameters())
    n += p.var.numel();
  return n;
}

}  // namespace headlab
