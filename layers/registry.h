#pragma once
// The layer registry: one map from the names used in config files ("layer_norm",
// "feed_forward", "multi_head_attention", ...) to factories that build the layer from its
// options (an OptionMap, layers/options.h; train/config fills it from the config file). The
// encoder fills its norm, ffn and attention slots through it, so a layer registered by a user
// can be selected from a config without editing the library.
//
// Every layer has a kind, what it is for: the encoder's slots take layers of their kind only
// (attention_layer: attention, ffn_layer: feed_forward, norm_layer: norm, positions_layer:
// positions); building blocks that fill no slot (linear, dropout, softmax) are "other". An
// attention layer must also be a MultiHeadAttention (or a subclass), so that per-head weights,
// gates and the head analysis work on it.
//
// Registering a layer from outside the library is one line, at namespace scope in any .cpp of
// the executable:
//     static headlab::LayerRegistrar rms_norm_registrar("rms_norm", headlab::LayerKind::norm,
//                                                       make_rms_norm, count_rms_norm_parameters);
// or, equivalently, a call `headlab::register_layer("rms_norm", LayerKind::norm, ...);` in main.
// A plugin registers through its entry point instead (train/plugins/plugin.h), which makes its
// registrations all-or-nothing.
// The counter (optional) gives the layer's parameter count from the same options without
// building it, for the memory estimate that runs before anything is allocated; without one,
// the estimate builds the layer once to count.
//
// A factory reads its options through LayerOptions. Keys come from the layer's own table (e.g.
// [model.norm_options]) or, when absent there, from values the enclosing model passes down
// (d_model, heads, head_dim, d_ff, activation, attn_dropout and init to the attention, ffn and
// norm slots; d_model, max_len, kind and init_std to the positions slot), else from the
// factory's default. Every key of the own table must be read: after the factory returns, any
// key it never asked for is an error listing the keys it did ask for. So a factory should ask
// for all of its keys unconditionally.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "core/sample_rng.h"
#include "layers/module.h"
#include "layers/options.h"

namespace headlab {

class LayerOptions {
 public:
  // `own`: the layer's table (checked for unknown keys). `inherited`: values from the model
  // (never checked). `dropout_rng`: shared generator for dropout masks, keyed by sample
  // (core/sample_rng.h; pass it to dropout(x, p, rng, training) with x's leading dim the batch);
  // when null, one is created on first request, seeded from init_rng.
  LayerOptions(std::string layer, const OptionMap& own, const OptionMap& inherited, Rng& init_rng,
               std::shared_ptr<SampleRng> dropout_rng = nullptr);

  // Typed reads. Throw headlab::Error naming the layer, key, expected and actual type, and the
  // file:line:col when the value carries one (OptionValue::where). Integers are accepted where a
  // float is expected; floats are not accepted where an integer is.
  int64_t get_int(std::string_view key, int64_t fallback);
  float get_float(std::string_view key, float fallback);
  bool get_bool(std::string_view key, bool fallback);
  std::string get_string(std::string_view key, std::string_view fallback);
  // As get_int, but the key must be present (own or inherited); throws otherwise.
  int64_t require_int(std::string_view key);

  const std::string& layer() const { return layer_; }
  Rng& init_rng() const { return init_rng_; }
  std::shared_ptr<SampleRng> dropout_rng();

  // Every key asked for with the value it got (the own table's, the inherited one or the
  // fallback), in order.
  const OptionMap& resolved() const { return resolved_; }
  // Throws "layers: unknown option 'epss' for layer 'layer_norm' (known: d_model, eps, ...)"
  // for every key of the own table that was never asked for.
  void check_all_used() const;

 private:
  const OptionValue* find(std::string_view key);
  [[noreturn]] void type_error(std::string_view key, const OptionValue& v,
                               const char* expected) const;

  std::string layer_;
  const OptionMap& own_;
  const OptionMap& inherited_;
  Rng& init_rng_;
  std::shared_ptr<SampleRng> dropout_rng_;
  std::vector<std::string> known_;
  OptionMap resolved_;
};

// A registry name plus that layer's own options: what a config slot holds, e.g.
// norm_layer = "rms_norm" with [model.norm_options] eps = 1e-6.
struct LayerSpec {
  std::string name;
  OptionMap options;
};

// What a layer is for (see the top).
enum class LayerKind { attention, feed_forward, norm, positions, other };
// "attention", "feed_forward", "norm", "positions", "other".
const char* layer_kind_name(LayerKind kind);

using LayerFactory = std::function<std::shared_ptr<SequenceLayer>(LayerOptions&)>;
// The number of parameter values the factory's layer would have, read from the same options
// (only the keys that decide shapes need to be asked for). Allocates nothing.
using LayerParameterCount = std::function<int64_t(LayerOptions&)>;

// One gradcheck situation of a registered layer: what it covers and the layer's own options
// table, over the small model values gradcheck passes down (d_model 4, heads 2, d_ff 6,
// max_len 5, activation gelu), on inputs [2, 3, 4] in training mode. Declare one per option that
// changes the backward (no bias, other heads counts, another kind); `headlab gradcheck` names
// each "registry: <variant>". A layer that declares none is checked once with its defaults
// (variant "from the registry").
struct LayerCheckCase {
  std::string variant;  // "1 head, no bias"
  OptionMap options;    // {{"heads", 1}, {"bias", false}}
};

// Adds a factory (and optionally its counter and gradcheck cases) under `name`. Throws if the
// name is empty or already registered, or two cases share a variant.
void register_layer(std::string name, LayerKind kind, LayerFactory factory,
                    LayerParameterCount count = {}, std::vector<LayerCheckCase> checks = {});
// Registers at static-initialisation time: `static LayerRegistrar r("name", kind, factory);`.
struct LayerRegistrar {
  LayerRegistrar(std::string name, LayerKind kind, LayerFactory factory,
                 LayerParameterCount count = {}, std::vector<LayerCheckCase> checks = {});
};
// The gradcheck cases a registered layer declared, or the one default case when it declared
// none; throws the unknown-layer error of make_layer for an unknown name.
std::vector<LayerCheckCase> layer_check_cases(std::string_view name);
// Removes a layer that register_layer added (the plugin loader undoes a failed plugin's
// registrations with it). Throws for a built-in layer; an unknown name is a no-op.
void unregister_layer(std::string_view name);

bool has_layer(std::string_view name);
// The kind of a registered layer; throws the unknown-layer error of make_layer otherwise.
LayerKind layer_kind(std::string_view name);
// Every registered name, sorted (the built-ins and any user layers); or those of one kind.
std::vector<std::string> registered_layers();
std::vector<std::string> registered_layers(LayerKind kind);
// Throws "layer 'dropout' is of kind other, but the norm slot takes layers of kind norm:
// layer_norm, rms_norm" (prefixed by `where` when given) unless `name` is registered with
// `kind`. `slot` names the slot ("norm"); an unknown name is the unknown-layer error.
void check_layer_kind(std::string_view name, LayerKind kind, std::string_view slot,
                      const std::string& where = "");

// Builds layer `name` from its options table. Throws "layers: unknown layer 'rms_nrom'
// (known: dropout, feed_forward, ...)" for an unknown name, and the LayerOptions errors for
// unknown keys or wrong types.
std::shared_ptr<SequenceLayer> make_layer(std::string_view name, const OptionMap& options,
                                          const OptionMap& inherited, Rng& init_rng,
                                          std::shared_ptr<SampleRng> dropout_rng = nullptr);
inline std::shared_ptr<SequenceLayer> make_layer(std::string_view name, const OptionMap& options,
                                                 Rng& init_rng) {
  return make_layer(name, options, OptionMap{}, init_rng);
}

inline std::shared_ptr<SequenceLayer> make_layer(const LayerSpec& spec, const OptionMap& inherited,
                                                 Rng& init_rng,
                                                 std::shared_ptr<SampleRng> dropout_rng = nullptr) {
  return make_layer(spec.name, spec.options, inherited, init_rng, std::move(dropout_rng));
}

// Every option the layer make_layer(spec, inherited, ...) reads, with the value it uses (its own,
// inherited or its default), sorted by name: the layer is built once from a throwaway
// generator. Two specs that differ only in spelled-out defaults give equal maps. Throws what
// make_layer throws.
OptionMap resolved_layer_options(const LayerSpec& spec, const OptionMap& inherited);

// The parameter count of the layer make_layer(spec, inherited, ...) would build: from the
// layer's counter when it has one (nothing allocated), else by building it once. Throws what
// make_layer throws for an unknown name, and the counter's LayerOptions errors.
int64_t layer_parameter_count(const LayerSpec& spec, const OptionMap& inherited);

}  // namespace headlab
