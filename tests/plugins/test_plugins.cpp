// The plugin loader in-process (this binary links libheadlab.so, as the CLI does): each way a
// plugin is refused leaves nothing registered and the library unloaded; the example plugin's
// names arrive, loading it again is a no-op, a copy of it is a duplicate; its layers pass
// gradcheck and alibi_attention equals the per-head formula with its bias.

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/op_registry.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/kernels/kernels.h"
#include "core/version.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "layers/layer_checks.h"
#include "layers/multi_head_attention.h"
#include "layers/registry.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "tests/layers/reference.h"
#include "tests/temp_dir.h"
#include "train/analysis/analysis.h"
#include "train/config/config.h"
#include "train/io/sha256.h"
#include "train/plugins/loader.h"
#include "train/run/trainer.h"
#include "train/tasks/registry.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

fs::path plugin(const std::string& name) {
  return fs::path(HEADLAB_TEST_PLUGIN_DIR) / ("libheadlab_" + name + ".so");
}

std::string error_of(const fs::path& path, std::string_view sha = {}) {
  try {
    load_plugin(path, sha);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Whether the dynamic loader still has the library mapped.
bool mapped(const fs::path& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

bool loaded(const fs::path& path) {
  for (const LoadedPlugin& p : loaded_plugins())
    if (p.path == path) return true;
  return false;
}

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("headlab-plugins-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
};

}  // namespace

TEST_CASE("plugins: each refusal names the plugin and its cause, and keeps nothing") {
  struct Bad {
    const char* plugin;
    const char* cause;
    const char* leftover;  // a name it staged or registered, which must not stay
  };
  for (const Bad& b :
       {Bad{"bad_no_entry", "has no entry point headlab_plugin_entry", ""},
        Bad{"bad_throws",
            "registration failed: the plugin failed on purpose; nothing it registered was kept",
            "test_half_registered"},
        Bad{"bad_duplicate",
            "registers layer 'layer_norm', which is already registered (built in); nothing it "
            "registered was kept",
            "test_fresh_layer"},
        Bad{"bad_version",
            "was built against headlab 0.1.0 (plugin ABI 7), but this is headlab " HEADLAB_VERSION
            " (plugin ABI 7): rebuild it against this headlab",
            ""},
        Bad{"bad_headers",
            "was built against other headers than this headlab's, though both say "
            "headlab " HEADLAB_VERSION " (header fingerprint 000000000000..., this headlab's ",
            "test_edited_headers_layer"},
        Bad{"bad_optim",
            "registers schedule 'warmup_cosine', which is already registered (built in); nothing "
            "it registered was kept",
            ""},
        Bad{"bad_static",
            "registers layer 'test_static_layer' at load time, outside its entry point",
            "test_static_layer"},
        Bad{"bad_op_builtin",
            "registers op 'softmax', which is already registered (built in); nothing it "
            "registered was kept",
            "test_fresh_op"},
        Bad{"bad_op_cases",
            "registration failed: register_op: op 'test_twin_cases' has two gradcheck cases named "
            "'plain'; nothing it registered was kept",
            "test_layer_before_op"}}) {
    CAPTURE(b.plugin);
    const fs::path path = plugin(b.plugin);
    const std::string error = error_of(path);
    CHECK(error.find("plugin '" + path.string() + "': " + b.cause) == 0);
    CHECK(error.find('\n') == std::string::npos);
    if (std::string_view(b.plugin) == "bad_headers")
      CHECK(error.ends_with("...): rebuild it against this headlab"));
    if (*b.leftover) CHECK_FALSE(has_layer(b.leftover));
    if (*b.leftover) CHECK_FALSE(has_op(b.leftover));
    CHECK_FALSE(has_op("test_twin_cases"));
    CHECK_FALSE(has_optimizer("test_fresh_optimizer"));  // bad_optim's, staged before the refusal
    CHECK_FALSE(loaded(path));
    CHECK_FALSE(mapped(path));       // closed again
    CHECK(error_of(path) == error);  // and refused the same way a second time
  }
  Scratch s;
  std::ofstream(s.dir / "notes.txt") << "not a library\n";
  CHECK(error_of(s.dir / "notes.txt").find("': cannot be loaded as a shared library: ") !=
        std::string::npos);
  CHECK(error_of(s.dir) == "plugin '" + s.dir.string() +
                               "': is a directory, not a shared "
                               "library file");
  CHECK(error_of(s.dir / "gone.so") ==
        "plugin '" + (s.dir / "gone.so").string() + "': no such file");
}

TEST_CASE("plugins: the example plugin registers its layers and task once") {
  const fs::path path = plugin("example_plugin");
  const LoadedPlugin p = load_plugin(path);
  CHECK(p.path == path);
  CHECK(p.sha256 == sha256_file(path));
  REQUIRE(p.registered.size() == 7);
  CHECK(p.registered[0].describe() == "layer swiglu (feed_forward)");
  CHECK(p.registered[1].describe() == "layer alibi_attention (attention)");
  CHECK(p.registered[2].describe() == "layer talking_heads_attention (attention)");
  CHECK(p.registered[3].describe() == "task mirror");
  CHECK(p.registered[4].describe() == "op squareplus (3 gradcheck cases)");
  CHECK(has_op("squareplus"));
  CHECK(p.registered[5].describe() == "optimizer lion");
  CHECK(p.registered[6].describe() == "schedule linear_decay");
  CHECK(has_optimizer("lion"));
  CHECK(has_schedule("linear_decay"));
  CHECK(optimizer_state_tensors({.name = "lion"}) == 1);
  CHECK(layer_kind("alibi_attention") == LayerKind::attention);
  CHECK(has_task("mirror"));
  // Again, through a symbolic link, or with its digest: a no-op.
  Scratch s;
  fs::create_symlink(path, s.dir / "link.so");
  const size_t count = loaded_plugins().size();
  load_plugin(path);
  load_plugin(s.dir / "link.so");
  load_plugin(path, p.sha256);
  CHECK(loaded_plugins().size() == count);
  // A changed digest is refused; a copy elsewhere is another library with the same names.
  CHECK(error_of(path, std::string(64, '0')).find("has changed since the run recorded it") !=
        std::string::npos);
  fs::copy_file(path, s.dir / "copy.so");
  CHECK(error_of(s.dir / "copy.so") == "plugin '" + (s.dir / "copy.so").string() +
                                           "': registers layer 'swiglu', which is "
                                           "already registered (by plugin '" +
                                           path.string() + "'); nothing it registered was kept");
}

TEST_CASE(
    "plugins: the example plugin's op and layers pass their gradcheck cases on every backend") {
  load_plugin(plugin("example_plugin"));
  int checked = 0;
  for (const GradcheckCase& c : registry_gradcheck_cases()) {
    if (c.name != "swiglu" && c.name != "alibi_attention" && c.name != "talking_heads_attention")
      continue;
    for (Backend backend : {Backend::reference, Backend::blas, Backend::onednn}) {
      set_backend(backend);
      const GradcheckResult r = c.run(3);
      CHECK_MESSAGE(r.pass, c.name << " on " << backend_name(backend) << ": " << r.worst);
      ++checked;
    }
  }
  // Its op, with the cases it registered: three shapes and values of b.
  for (const GradcheckCase& c : registered_op_gradcheck_cases()) {
    if (c.name != "squareplus") continue;
    CHECK(c.kind == "op");
    for (Backend backend : {Backend::reference, Backend::blas, Backend::onednn}) {
      set_backend(backend);
      const GradcheckResult r = c.run(3);
      CHECK_MESSAGE(r.pass, c.variant << " on " << backend_name(backend) << ": " << r.worst);
      CHECK(r.checked > 0);
      ++checked;
    }
  }
  set_backend(Backend::reference);
  CHECK(checked == 12 + 9);  // swiglu, talking heads and alibi's two cases; squareplus's three
  // Learned slopes get their gradient through the bias.
  Rng rng(5);
  auto alibi = make_layer("alibi_attention", OptionMap{{"learn_slopes", true}},
                          OptionMap{{"d_model", 4}, {"heads", 2}}, rng);
  // MultiHeadAttention's own parameters first (registered in its constructor), then the slopes.
  const NamedParameters named = alibi->named_parameters();
  REQUIRE(named.size() == 5);
  CHECK(named[0].name == "in_proj_weight");
  CHECK(named[2].name == "slopes");
  const GradcheckResult r = gradcheck_sequence_layer(*alibi, 4, 7);
  CHECK_MESSAGE(r.pass, r.worst);
}

TEST_CASE("plugins: alibi_attention is attention with -m_i |t - s| added to head i's scores") {
  load_plugin(plugin("example_plugin"));
  Rng rng(9);
  const int64_t h = 2, t = 4;
  auto layer =
      make_layer("alibi_attention", OptionMap{}, OptionMap{{"d_model", 8}, {"heads", h}}, rng);
  auto* mha = dynamic_cast<MultiHeadAttention*>(layer.get());
  REQUIRE(mha != nullptr);
  Tensor bias = Tensor::empty({h, t, t});
  for (int64_t i = 0; i < h; ++i)
    for (int64_t q = 0; q < t; ++q)
      for (int64_t k = 0; k < t; ++k)
        bias[(i * t + q) * t + k] = -std::exp2(-8.0f * (i + 1) / h) * std::abs(q - k);
  const Tensor x = testing::randn({2, t, 8}, rng);
  mha->set_head_mask(std::vector<float>{1.0f, 0.0f});  // the gate works on it too
  const AttentionOutput out = mha->forward(Var(x), Var(x), Var(x), nullptr, nullptr, true);
  const testing::RefAttention ref =
      testing::ref_attention(*mha, x, x, x, nullptr, nullptr, {1.0, 0.0}, &bias);
  CHECK(testing::max_abs_diff(out.output.value(), ref.output) < 1e-4);
  CHECK(testing::max_abs_diff(out.weights.value(), ref.weights) < 1e-5);
}

TEST_CASE("plugins: talking_heads_attention mixes the heads' logits, and its gradients check") {
  load_plugin(plugin("example_plugin"));
  const int64_t h = 2, t = 4, d = 8;
  Rng rng(11), same(11);
  auto talking = make_layer("talking_heads_attention", OptionMap{},
                            OptionMap{{"d_model", d}, {"heads", h}}, rng);
  auto plain = make_layer("multi_head_attention", OptionMap{},
                          OptionMap{{"d_model", d}, {"heads", h}}, same);
  // The base class's parameters are drawn first and the same: with the logits mix a swap of the
  // two heads, head 0's pattern is plain attention's head 1's. (Own parameters are listed before
  // the child w_o.)
  const NamedParameters named = talking->named_parameters();
  REQUIRE(named.size() == 6);
  REQUIRE(named[2].name == "logits_mix");
  REQUIRE(named[3].name == "weights_mix");
  Tensor& mix = named[2].var.value();
  mix.fill_(0.0f);
  mix[1] = mix[2] = 1.0f;
  const Tensor x = testing::randn({2, t, d}, rng);
  auto* a = dynamic_cast<MultiHeadAttention*>(talking.get());
  auto* b = dynamic_cast<MultiHeadAttention*>(plain.get());
  const Tensor pa = a->forward(Var(x), Var(x), Var(x), nullptr, nullptr, true).weights.value();
  const Tensor pb = b->forward(Var(x), Var(x), Var(x), nullptr, nullptr, true).weights.value();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < t * t; ++k) {
      CHECK(pa[(n * h + 0) * t * t + k] ==
            doctest::Approx(pb[(n * h + 1) * t * t + k]).epsilon(1e-5));
      CHECK(pa[(n * h + 1) * t * t + k] ==
            doctest::Approx(pb[(n * h + 0) * t * t + k]).epsilon(1e-5));
    }
  // Both mixes get their gradients (finite differences, off the identity).
  named[3].var.value()[1] = 0.3f;
  const GradcheckResult r = gradcheck_sequence_layer(*talking, d, 3);
  CHECK_MESSAGE(r.pass, r.worst);
}

TEST_CASE(
    "plugins: the analysis ablates a talking-heads layer's heads as a hand-written hook does") {
  load_plugin(plugin("example_plugin"));
  const std::string toml = R"toml(
[model]
d_model = 16
heads = 4
layers = 1
d_ff = 32
attention_layer = "talking_heads_attention"
[task]
name = "dependency"
[schedule]
warmup_steps = 1
[train]
steps = 2
batch_size = 8
eval_batches = 2
eval_batch_size = 32
)toml";
  const Config config = parse_config(toml, "talking.toml");
  testing::TempDir dir("headlab-talking-heads");
  Trainer trainer(config, dir.path / "run");
  Encoder& model = trainer.model();
  // Off the identity, so every head's output depends on every head's logits.
  for (const NamedParameter& p : model.named_parameters())
    if (p.name.find("_mix") != std::string::npos)
      for (int64_t k = 0; k < p.var.numel(); ++k)
        p.var.value()[k] += 0.2f * static_cast<float>(k % 3);
  const AnalysisResult r = analyze(model, trainer.task(), config);
  model.eval();
  for (int64_t head = 0; head < 4; ++head) {
    CAPTURE(head);
    Hooks hooks;
    hooks.edit(block_hook(0, "attn.hook_z"), [head](const Var& z) { return zero_head(z, head); });
    HookGuard attached(model, hooks);
    NoGradGuard no_grad;
    int64_t right = 0, counted = 0;
    Batch batch;
    std::vector<std::span<const int32_t>> features;
    for (int64_t k = 0; k < config.train.eval_batches; ++k) {
      trainer.task().generate(static_cast<uint64_t>(config.train.eval_seed), k,
                              config.train.eval_batch_size, batch);
      batch.feature_spans(features);
      const Tensor logits = model.forward(features, batch.batch_size, batch.seq_len).logits.value();
      const int64_t C = logits.shape().back();
      for (int64_t i = 0; i < batch.tokens(); ++i) {
        if (batch.labels[i] == kIgnoreIndex) continue;
        int64_t best = 0;
        for (int64_t c = 1; c < C; ++c)
          if (logits[i * C + c] > logits[i * C + best]) best = c;
        right += best == batch.labels[i];
        ++counted;
      }
    }
    CHECK(r.at(0, static_cast<int>(head)).ablation_accuracy ==
          doctest::Approx(static_cast<double>(right) / counted));
  }
}
