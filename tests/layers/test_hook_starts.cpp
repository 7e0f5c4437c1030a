// Forwards that start at a hook point (Hooks::start_at): the same logits as the whole forward,
// bit for bit, where the work before the point is skipped (the Encoder's blocks, the attention's
// projections and softmax) and where a layer computes the value and the point replaces it; the
// skipped points are not passed; bad starts are one line naming the point.

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "tests/layers/hook_test_model.h"

using namespace headlab;
using namespace headlab::hook_test;

namespace {

bool passed(const Hooks& hooks, const std::string& point) {
  return std::find(hooks.seen().begin(), hooks.seen().end(), point) != hooks.seen().end();
}

// A three-block encoder in eval mode, its batch, and hooks attached, under no gradient.
struct Started {
  explicit Started(NormPosition norm, uint64_t seed)
      : o(options(norm, 3)), rng(seed), model(o, rng), x(ids(o)), attached(model, hooks) {
    model.eval();
  }
  EncoderOptions o;
  Rng rng;
  Encoder model;
  Ids x;
  NoGradGuard no_grad;
  Hooks hooks;
  HookGuard attached;
};

}  // namespace

TEST_CASE(
    "hooks: a forward started at a block's input and its heads' outputs gives the whole "
    "forward's logits bit for bit, and skips the points before them") {
  for (NormPosition norm : {NormPosition::pre, NormPosition::post}) {
    CAPTURE(norm == NormPosition::pre);
    Started started(norm, 11);
    Encoder& model = started.model;
    const Ids& x = started.x;
    Hooks& hooks = started.hooks;
    // The edit every run below makes: head 1 of block 1 zeroed (a gate's ablation).
    hooks.edit(block_hook(1, "attn.hook_z"), [](const Var& z) { return zero_head(z, 1); });
    hooks.cache(block_hook(1, "hook_resid_pre"));
    hooks.cache(block_hook(1, "attn.hook_z"));
    const Tensor whole = x.logits(model);
    const Tensor input = hooks.cached(block_hook(1, "hook_resid_pre")).value().clone();
    const Tensor z = hooks.cached(block_hook(1, "attn.hook_z")).value().clone();
    CHECK(passed(hooks, "hook_embed"));

    hooks.forget();
    hooks.start_at(block_hook(1, "hook_resid_pre"), input);
    CHECK(same_bits(whole, x.logits(model)));
    CHECK_FALSE(passed(hooks, "hook_embed"));
    CHECK_FALSE(passed(hooks, block_hook(0, "hook_resid_post")));
    CHECK(passed(hooks, block_hook(1, "hook_resid_pre")));

    hooks.forget();
    hooks.clear_starts();  // the heads' outputs alone
    hooks.start_at(block_hook(1, "attn.hook_z"), z);
    hooks.cache(block_hook(1, "attn.hook_q"));  // passed whenever the projections run
    CHECK(same_bits(whole, x.logits(model)));
    CHECK(passed(hooks, block_hook(1, "attn.hook_z")));
    CHECK_FALSE(passed(hooks, block_hook(1, "attn.hook_q")));
    CHECK(passed(hooks, block_hook(0, "attn.hook_z")));  // block 0 still runs: no start there
    hooks.uncache(block_hook(1, "attn.hook_q"));
    // The cache at a start keeps the start's value, before the edit.
    CHECK(same_bits(hooks.cached(block_hook(1, "attn.hook_z")).value(), z));

    // At the last block's output: only the final norm and the classifier run, and an edit
    // there applies to the start.
    hooks.cache(block_hook(2, "hook_resid_post"));
    hooks.clear_starts();
    hooks.forget();
    x.logits(model);
    const Tensor output = hooks.cached(block_hook(2, "hook_resid_post")).value().clone();
    hooks.forget();
    hooks.start_at(block_hook(2, "hook_resid_post"), output);
    CHECK(same_bits(whole, x.logits(model)));
    CHECK_FALSE(passed(hooks, block_hook(2, "attn.hook_z")));
    CHECK(passed(hooks, block_hook(2, "hook_resid_post")));
    hooks.edit(block_hook(2, "hook_resid_post"), [](const Var& r) { return scale(r, 2.0f); });
    const Tensor doubled = x.logits(model);
    hooks.clear_starts();
    CHECK(same_bits(doubled, x.logits(model)));
    CHECK_FALSE(same_bits(doubled, whole));
    hooks.remove_edit(block_hook(2, "hook_resid_post"));

    // A start changes the run: another value at hook_z gives other logits.
    hooks.start_at(block_hook(1, "attn.hook_z"), Tensor::zeros(z.shape()));
    CHECK_FALSE(same_bits(whole, x.logits(model)));
    hooks.clear_starts();
    CHECK(same_bits(whole, x.logits(model)));
  }
}

TEST_CASE("hooks: a start where no layer skips replaces the computed value, as an edit would") {
  Started started(NormPosition::pre, 12);
  Encoder& model = started.model;
  const Ids& x = started.x;
  Hooks& hooks = started.hooks;
  const std::string point = block_hook(2, "mlp.hook_post");
  hooks.cache(point);
  x.logits(model);
  Tensor value = hooks.cached(point).value().clone();
  for (int64_t i = 0; i < value.numel(); i += 3) value[i] = 0.5f;
  hooks.edit(point, [value](const Var&) { return Var(value); });
  const Tensor edited = x.logits(model);
  hooks.remove_edit(point);
  hooks.start_at(point, value);
  CHECK(same_bits(edited, x.logits(model)));
  CHECK(passed(hooks, block_hook(0, "attn.hook_z")));  // computed as usual before it
}

TEST_CASE("hooks: a start of the wrong shape, or with need_weights, is one line naming it") {
  Started started(NormPosition::pre, 13);
  Encoder& model = started.model;
  const Ids& x = started.x;
  Hooks& hooks = started.hooks;
  hooks.start_at(block_hook(1, "hook_resid_pre"), Tensor::zeros({3, 4, 8}));
  CHECK_THROWS_WITH_AS(x.logits(model),
                       doctest::Contains("encoder: the start at blocks.1.hook_resid_pre is "
                                         "[3, 4, 8] but the batch is [3, 5, 8]"),
                       Error);
  hooks.clear_starts();
  hooks.start_at(block_hook(0, "attn.hook_z"), Tensor::zeros({3, 5, 4, 2}));
  CHECK_THROWS_WITH_AS(x.logits(model), doctest::Contains("the start at hook_z"), Error);
  hooks.clear_starts();
  hooks.start_at(block_hook(0, "hook_resid_mid"), Tensor::zeros({3, 5, 7}));
  CHECK_THROWS_WITH_AS(x.logits(model),
                       doctest::Contains("hooks: the start at 'blocks.0.hook_resid_mid' has shape "
                                         "[3, 5, 7] but the point's value is [3, 5, 8]"),
                       Error);
  hooks.clear_starts();
  hooks.start_at(block_hook(0, "attn.hook_z"), Tensor::zeros({3, 5, 2, 4}));
  CHECK_THROWS_WITH_AS(x.logits(model, true), doctest::Contains("need_weights"), Error);
  hooks.clear();
  CHECK_FALSE(hooks.has_starts());
  CHECK_NOTHROW(x.logits(model, true));
}
