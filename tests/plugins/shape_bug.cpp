// A plugin feed-forward layer with a shape bug: it builds and counts its parameters like
// feed_forward, but its forward returns [B, T, d_ff] instead of [B, T, d_model]. `train
// --dry-run` must refuse it in one line naming the layer and the slot's contract
// (tests/plugins/test_plugins_cli.cpp).

#include <headlab/layers/feed_forward.h>
#include <headlab/train/plugins/plugin.h>

namespace {

using namespace headlab;

// feed_forward's layer as its child "ffn" (the same parameters), used wrong.
class ShapeBugFfn : public SequenceLayer {
 public:
  explicit ShapeBugFfn(std::shared_ptr<SequenceLayer> inner)
      : ffn_(std::dynamic_pointer_cast<FeedForward>(register_module("ffn", std::move(inner)))) {}
  Var forward(const Var& x) override { return ffn_->w1->forward(x); }  // forgot w2

 private:
  std::shared_ptr<FeedForward> ffn_;
};

std::shared_ptr<SequenceLayer> make_shape_bug(LayerOptions& o) {
  return std::make_shared<ShapeBugFfn>(make_feed_forward_layer(o));
}

}  // namespace

HEADLAB_PLUGIN(registry) {
  registry.add_layer("shape_bug_ffn", LayerKind::feed_forward, make_shape_bug,
                     count_feed_forward_parameters);
}
