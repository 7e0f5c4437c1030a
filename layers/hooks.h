#pragma once
// Hook points: named activations of a forward pass that a caller reads (a cache) or replaces
// (an edit), in TransformerLens's vocabulary, so that the head analysis, activation patching
// and user experiments work on any layer that passes its values through them, not on one
// attention class's internals.
//
// The Encoder names its points (layers/encoder.h, "Hook points"):
//   hook_embed                        the embeddings and positions           [B, T, d_model]
//   blocks.L.hook_resid_pre           block L's input                        [B, T, d_model]
//   blocks.L.attn.hook_q / _k / _v    per head, after the projection         [B, T, h, d_k]
//   blocks.L.attn.hook_scores         scaled scores as the softmax sees them [B, h, T, S]
//   blocks.L.attn.hook_pattern        the softmax, before attention dropout  [B, h, T, S]
//   blocks.L.attn.hook_z              each head's output, before W^O         [B, T, h, d_v]
//   blocks.L.hook_resid_mid           after the attention's residual         [B, T, d_model]
//   blocks.L.mlp.hook_post            the feed-forward's hidden activation   [B, T, d_ff]
//   blocks.L.hook_resid_post          block L's output                       [B, T, d_model]
// A layer passes a value through a point with Module::hook("hook_z", value), which returns the
// value to go on with: unchanged, or what an edit returned. Without hooks attached (the default)
// that is one null test: nothing is kept, no op is added, the fused attention stays fused.
//
// Usage (C++):
//   Hooks hooks;
//   hooks.cache("blocks.0.attn.hook_pattern");
//   hooks.edit("blocks.0.attn.hook_z", [](const Var& z) { return zero_head(z, 2); });
//   {
//     HookGuard attached(model, hooks);           // model.attach_hooks(&hooks), undone at scope end
//     model.forward(features, B, T);
//   }
//   const Var& pattern = hooks.cached("blocks.0.attn.hook_pattern");   // [B, h, T, T]
// A cached value is the one that reached the point, before any edit there; under a gradient
// mode it is on the tape, so a backward pass can reach it. hooks.seen() lists every point the
// last forward passed, so a caller can check that a layer provides the points it relies on.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/var.h"

namespace headlab {

class Module;

class Hooks {
 public:
  // Returns the value to continue with, of the same shape (checked: a wrong shape throws naming
  // the point and both shapes).
  using Edit = std::function<Var(const Var& value)>;

  // Keep the value of point `name` at every forward (the last one wins).
  void cache(std::string name);
  // Replace the value of point `name` by edit(value); one edit per point (a second replaces it).
  void edit(std::string name, Edit edit);
  void remove_edit(std::string_view name);
  // Stops caching `name` (its last value is kept until forget()).
  void uncache(std::string_view name);
  // Drops every edit, every cache request and every start.
  void clear();

  // Starts the next forwards at point `name` (TransformerLens's start_at_layer, at a point): the
  // point's value is `value` (its shape checked there), whatever the layers before it compute;
  // an edit at the point applies to it, a cache keeps it. A layer may skip the work whose only
  // use is that value (Module::hook_start): the Encoder skips the embeddings and the blocks
  // before a blocks.L.hook_resid_pre start (and block L too for a blocks.L.hook_resid_post
  // start), MultiHeadAttention its projections and softmax before an attn.hook_z start; a layer
  // that does not skip computes the value and the point replaces it: the same numbers, without
  // the time saved. Points inside skipped work are not passed (seen() omits them, their caches
  // stay empty), and a forward with need_weights is refused while a start is set. The head
  // analysis starts its gated and patched forwards at the clean or corrupted run's values
  // (train/analysis/head_gates.h, activation_patching.h).
  void start_at(std::string name, Tensor value);
  void clear_starts();
  // The value of a start at `name`, or null.
  const Tensor* start(std::string_view name) const;
  bool has_starts() const { return !starts_.empty(); }
  std::vector<std::string> start_names() const;
  // How many points have an edit.
  size_t edit_count() const { return edits_.size(); }

  // Whether a cache or an edit is attached at `name`.
  bool wants(std::string_view name) const;
  bool edits(std::string_view name) const;

  // What a layer's Module::hook calls: records `name` as seen, takes the start's value in place
  // of `computed` when the point has one, keeps that value when cached, and returns the edit's
  // value (or that value).
  Var apply(const std::string& name, const Var& computed);

  // The value cached at `name` by the last forward; throws naming the point and listing the
  // cached ones when it was not cached or not reached.
  const Var& cached(std::string_view name) const;
  bool has_cached(std::string_view name) const;
  // Every point passed since the last forget(), in order (a point passed twice appears twice).
  const std::vector<std::string>& seen() const { return seen_; }
  // Drops the cached values and the seen list (keeps the requests and edits); call before a
  // forward whose values are to be told apart from the last one's.
  void forget();

 private:
  std::map<std::string, bool, std::less<>> cache_requests_;
  std::map<std::string, Edit, std::less<>> edits_;
  std::map<std::string, Var, std::less<>> values_;
  std::map<std::string, Tensor, std::less<>> starts_;
  std::vector<std::string> seen_;
};

// "blocks.<layer>.<point>": the name of a point of encoder block `layer` ("attn.hook_z").
std::string block_hook(int64_t layer, std::string_view point);

// Edits of a per-head point ([B, T, h, d]: hook_q, hook_k, hook_v, hook_z), for where().
// head_mask: [1, 1, heads, 1], 1 at `head`. patch_head: z with head `head`'s slice taken from
// `source` (z's shape; activation patching). zero_head: z with that slice 0 (zero ablation).
// Throw naming the head and the shape when `head` is not one of z's heads.
Tensor head_mask(int64_t heads, int64_t head);
Var patch_head(const Var& z, const Var& source, int64_t head);
Var zero_head(const Var& z, int64_t head);

// Attaches `hooks` to `module` (Module::attach_hooks with the root prefix) for the guard's
// lifetime, then detaches them (and whatever was attached before is attached again).
class HookGuard {
 public:
  HookGuard(Module& module, Hooks& hooks);
  ~HookGuard();
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;

 private:
  Module& module_;
  Hooks* previous_;
};

}  // namespace headlab
