#include "layers/registry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

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

struct Entry {
  LayerKind kind;
  LayerFactory make;
  LayerParameterCount count;  // may be empty
  bool builtin = false;
  std::vector<LayerCheckCase> checks;  // empty: the one default case
};
using Registry = std::map<std::string, Entry, std::less<>>;

int64_t no_parameters(LayerOptions&) {
  return 0;
}

// The counter of Linear, whose file keeps only its factory; it reads the same keys as
// make_linear_layer (tests/layers/test_parameter_count.cpp compares every built-in counter with
// the built layer).
int64_t count_linear_parameters(LayerOptions& o) {
  const int64_t d_model = o.get_int("d_model", 0);
  const int64_t in = o.get_int("in_features", d_model), out = o.get_int("out_features", d_model);
  return in * out + (o.get_bool("bias", true) ? out : 0);
}

// Built-ins are registered here, when the registry is first used, rather than by static
// registrars in each layer's file: a static library drops object files nobody references, and
// their registrars with them.
Registry& registry() {
  using K = LayerKind;
  static Registry r = {
      {"dropout", {K::other, make_dropout_layer, no_parameters, true, {}}},
      {"feed_forward",
       {K::feed_forward,
        make_feed_forward_layer,
        count_feed_forward_parameters,
        true,
        {{"gelu, bias", {}}, {"no bias, d_ff 3", {{"bias", false}, {"d_ff", 3}}}}}},
      {"layer_norm",
       {K::norm,
        make_layer_norm_layer,
        count_layer_norm_parameters,
        true,
        {{"affine", {}}, {"no affine, eps 1e-3", {{"affine", false}, {"eps", 1e-3}}}}}},
      {"linear",
       {K::other,
        make_linear_layer,
        count_linear_parameters,
        true,
        {{"d_model to d_model", {}}, {"no bias, 4 to 3", {{"bias", false}, {"out_features", 3}}}}}},
      {"multi_head_attention",
       {K::attention,
        make_multi_head_attention_layer,
        count_multi_head_attention_parameters,
        true,
        {{"2 heads, bias", {}},
         {"1 head, no bias", {{"heads", 1}, {"bias", false}}},
         {"4 heads of head_dim 3", {{"heads", 4}, {"head_dim", 3}}}}}},
      {"positional_encoding",
       {K::positions,
        make_positional_encoding_layer,
        count_positional_encoding_parameters,
        true,
        {{"learned", {}}, {"sinusoidal", {{"kind", "sinusoidal"}}}}}},
      {"softmax", {K::other, make_softmax_layer, no_parameters, true, {}}},
  };
  return r;
}

const Entry& find_entry(std::string_view name) {
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
  fail("layers: option '{}' of layer '{}' is {} but expected {}{}", key, layer_, v.type_article(),
       expected, v.where.empty() ? "" : " (" + v.where + ")");
}

int64_t LayerOptions::get_int(std::string_view key, int64_t fallback) {
  const OptionValue* v = find(key);
  const int64_t* n = v ? v->get_if<int64_t>() : &fallback;
  if (!n) type_error(key, *v, "an integer");
  resolved_.set(std::string(key), OptionValue(*n));
  return *n;
}

int64_t LayerOptions::require_int(std::string_view key) {
  if (!find(key)) fail("layers: layer '{}' needs option '{}' (an integer)", layer_, key);
  return get_int(key, 0);
}

float LayerOptions::get_float(std::string_view key, float fallback) {
  const OptionValue* v = find(key);
  double value = fallback;
  if (v) {
    if (const double* f = v->get_if<double>())
      value = *f;
    else if (const int64_t* n = v->get_if<int64_t>())
      value = static_cast<double>(*n);
    else
      type_error(key, *v, "a number");
  }
  // The layer computes in fp32: a number that becomes 0, a denormal or infinity there would
  // silently be another value (an eps of 1e-46 is 0).
  const float f = static_cast<float>(value);
  if (value != 0 && (f == 0 || std::fpclassify(f) == FP_SUBNORMAL || !std::isfinite(f)))
    fail("layers: option '{}' of layer '{}' is {} which is {} in fp32{}", key, layer_, value,
         std::isfinite(f) ? "0 or a denormal" : "infinite",
         v && !v->where.empty() ? " (" + v->where + ")" : "");
  // Recorded as the double nearest the float's shortest decimal form (1e-05, not
  // 9.99999974737875e-06): the value the layer uses, spelled as people write it.
  resolved_.set(std::string(key), OptionValue(std::stod(fmt::format("{}", f))));
  return f;
}

bool LayerOptions::get_bool(std::string_view key, bool fallback) {
  const OptionValue* v = find(key);
  const bool* b = v ? v->get_if<bool>() : &fallback;
  if (!b) type_error(key, *v, "a boolean");
  resolved_.set(std::string(key), OptionValue(*b));
  return *b;
}

std::string LayerOptions::get_string(std::string_view key, std::string_view fallback) {
  const OptionValue* v = find(key);
  const std::string fallback_text(fallback);
  const std::string* s = v ? v->get_if<std::string>() : &fallback_text;
  if (!s) type_error(key, *v, "a string");
  resolved_.set(std::string(key), OptionValue(*s));
  return *s;
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

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::attention:
      return "attention";
    case LayerKind::feed_forward:
      return "feed_forward";
    case LayerKind::norm:
      return "norm";
    case LayerKind::positions:
      return "positions";
    case LayerKind::other:
      return "other";
  }
  return "other";
}

void register_layer(std::string name, LayerKind kind, LayerFactory factory,
                    LayerParameterCount count, std::vector<LayerCheckCase> checks) {
  if (name.empty()) fail("register_layer: the name is empty");
  if (!factory) fail("register_layer: the factory for '{}' is empty", name);
  for (size_t i = 0; i < checks.size(); ++i) {
    if (checks[i].variant.empty())
      fail("register_layer: a gradcheck case of layer '{}' has no variant", name);
    for (size_t j = 0; j < i; ++j)
      if (checks[j].variant == checks[i].variant)
        fail("register_layer: layer '{}' has two gradcheck cases named '{}'", name,
             checks[i].variant);
  }
  auto [it, inserted] = registry().emplace(
      name, Entry{kind, std::move(factory), std::move(count), false, std::move(checks)});
  if (!inserted) fail("register_layer: a layer named '{}' is already registered", name);
}

LayerRegistrar::LayerRegistrar(std::string name, LayerKind kind, LayerFactory factory,
                               LayerParameterCount count, std::vector<LayerCheckCase> checks) {
  register_layer(std::move(name), kind, std::move(factory), std::move(count), std::move(checks));
}

std::vector<LayerCheckCase> layer_check_cases(std::string_view name) {
  const Entry& entry = find_entry(name);
  if (entry.checks.empty()) return {LayerCheckCase{"from the registry", OptionMap{}}};
  return entry.checks;
}

void unregister_layer(std::string_view name) {
  auto it = registry().find(name);
  if (it == registry().end()) return;
  if (it->second.builtin) fail("unregister_layer: '{}' is a built-in layer", name);
  registry().erase(it);
}

bool has_layer(std::string_view name) {
  return registry().find(name) != registry().end();
}

LayerKind layer_kind(std::string_view name) {
  return find_entry(name).kind;
}

std::vector<std::string> registered_layers() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

std::vector<std::string> registered_layers(LayerKind kind) {
  std::vector<std::string> names;
  for (const auto& [name, entry] : registry())
    if (entry.kind == kind) names.push_back(name);
  return names;
}

void check_layer_kind(std::string_view name, LayerKind kind, std::string_view slot,
                      const std::string& where) {
  const LayerKind actual = layer_kind(name);
  if (actual == kind) return;
  const std::vector<std::string> fit = registered_layers(kind);
  fail("{}layer '{}' is of kind {}, but the {} slot takes layers of kind {}: {}",
       where.empty() ? "" : where + ": ", name, layer_kind_name(actual), slot,
       layer_kind_name(kind), fit.empty() ? "none registered" : join(fit));
}

std::shared_ptr<SequenceLayer> make_layer(std::string_view name, const OptionMap& options,
                                          const OptionMap& inherited, Rng& init_rng,
                                          std::shared_ptr<SampleRng> dropout_rng) {
  const Entry& entry = find_entry(name);
  LayerOptions reader(std::string(name), options, inherited, init_rng, std::move(dropout_rng));
  std::shared_ptr<SequenceLayer> layer = entry.make(reader);
  reader.check_all_used();
  if (!layer) fail("layers: the factory of layer '{}' returned null", name);
  return layer;
}

OptionMap resolved_layer_options(const LayerSpec& spec, const OptionMap& inherited) {
  const Entry& entry = find_entry(spec.name);
  Rng throwaway(0);
  LayerOptions reader(spec.name, spec.options, inherited, throwaway);
  entry.make(reader);
  reader.check_all_used();
  OptionMap out = reader.resolved();
  out.sort();
  return out;
}

int64_t layer_parameter_count(const LayerSpec& spec, const OptionMap& inherited) {
  const Entry& entry = find_entry(spec.name);
  Rng rng(0);  // a counter draws nothing; a built layer is thrown away
  if (entry.count) {
    LayerOptions reader(spec.name, spec.options, inherited, rng);
    return entry.count(reader);
  }
  int64_t n = 0;
  for (const NamedParameter& p : make_layer(spec, inherited, rng)->named_parameters())
    n += p.var.numel();
  return n;
}

}  // namespace headlab
