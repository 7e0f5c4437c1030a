#pragma once
// Plugins: shared libraries that add layers, tasks, optimizers and schedules to headlab without changing it. A plugin
// is built against the installed package (find_package(headlab CONFIG REQUIRED), a shared
// library linking headlab::headlab) and has one entry point, written with HEADLAB_PLUGIN in one
// of its .cpp files:
//
//   #include <headlab/train/plugins/plugin.h>
//   HEADLAB_PLUGIN(registry) {
//     registry.add_layer("swiglu", headlab::LayerKind::feed_forward, make_swiglu, count_swiglu);
//     registry.add_task("mirror", make_mirror_task);
//     registry.add_op("squareplus", squareplus_op, squareplus_cases);  // autograd/op_registry.h
//     registry.add_optimizer("lion", make_lion, 1, lion_options());
//     registry.add_schedule("linear_decay", make_linear_decay, linear_decay_options());
//   }
//
// `headlab train CONFIG --plugin libmine.so` (or runtime.plugins = ["libmine.so"] in the config)
// loads it before the config is checked, so its names fill the config's slots and task.name.
// The run directory records it (run.json), and eval, analyze and train --resume load it again
// from there. Loading (train/plugins/loader.h) goes:
//
//   1. dlopen; dlsym("headlab_plugin_entry"), which returns a headlab_plugin_info;
//   2. the handshake, read before any C++ type crosses: magic, plugin ABI, the headlab version
//      the plugin was compiled against (must equal this library's: class layouts come from the
//      headers, so a plugin is rebuilt for every headlab version), the fingerprint of the
//      headers it was compiled against (must equal the library's: the same version with an
//      edited header is another ABI) and the C++ ABI of its compiler and standard library;
//   3. register_plugin(registry): the function body of HEADLAB_PLUGIN, which only stages its
//      entries in the PluginRegistry;
//   4. all-or-nothing: if the body throws, or a name is taken (by the library or another
//      plugin), nothing is registered and the library is closed again.
//
// So register in the entry point only: a static LayerRegistrar in a plugin registers at dlopen
// time, outside the transaction (the loader refuses such a plugin), and one that throws there
// cannot be caught.

#include <cstdint>
#include <string>
#include <vector>

#include "core/version.h"
// HEADLAB_HEADERS_FINGERPRINT: the SHA-256 of the public headers' contents, generated at build
// time (cmake/HeadersFingerprint.cmake) and installed beside them; a consumer configured with
// find_package(headlab) gets the value of the headers it really includes as a definition.
#include "autograd/op_registry.h"
#include "headlab_headers_fingerprint.h"
#include "layers/registry.h"
#include "optim/registry.h"
#include "optim/schedule_registry.h"
#include "train/tasks/registry.h"

// The plugin interface's version: the handshake, PluginRegistry and the interfaces a plugin
// implements (Task, the layer factories' LayerOptions) and the structs it hands to the library
// (AttentionOptions). Bumped when any of them changes; 2: tasks draw sentences by global
// position (Task::generate_sentences) and dropout masks come from a SampleRng; 3:
// AttentionOptions can ask self_attention for its weights; 4: MultiHeadAttention, which a plugin
// may subclass, holds one in_proj_weight (and in_proj_bias) instead of the children w_q, w_k, w_v;
// 5: Task has the virtual corrupt (activation patching's corrupted batch), and Module and
// MultiHeadAttention, which a plugin's layers derive from, carry hook points (attach_hooks) and
// the score and pattern transforms; 6: headlab_plugin_info ends with the fingerprint of the
// public headers (HEADLAB_HEADERS_FINGERPRINT), compared in the handshake.
// 7: PluginRegistry registers ops with their gradcheck cases (add_op) and layers with theirs
// (add_layer's LayerCheckCase list).
// 7: PluginRegistry has add_optimizer and add_schedule; Optimizer has parameter groups.
#define HEADLAB_PLUGIN_ABI 7

// The C++ ABI a plugin must share with the library: the compiler's ABI version and libstdc++'s
// string/list ABI (both GCC and clang define these on Linux).
#define HEADLAB_PLUGIN_STRINGIFY_(x) #x
#define HEADLAB_PLUGIN_STRINGIFY(x) HEADLAB_PLUGIN_STRINGIFY_(x)
#define HEADLAB_PLUGIN_BUILD                                                                      \
  "gxx-abi " HEADLAB_PLUGIN_STRINGIFY(__GXX_ABI_VERSION) ", cxx11-abi " HEADLAB_PLUGIN_STRINGIFY( \
      _GLIBCXX_USE_CXX11_ABI)

extern "C" {
// What the entry point returns. Its layout is fixed for good (magic first), so any headlab can
// read a plugin of any version far enough to refuse it with a clear message; fields are only
// ever added at the end, read when abi says they are there.
struct headlab_plugin_info {
  uint32_t magic;                           // kHeadlabPluginMagic
  uint32_t abi;                             // HEADLAB_PLUGIN_ABI
  const char* version;                      // HEADLAB_VERSION
  const char* build;                        // HEADLAB_PLUGIN_BUILD
  void (*register_plugin)(void* registry);  // called with a headlab::PluginRegistry*
  const char* headers;                      // HEADLAB_HEADERS_FINGERPRINT (abi >= 6)
};
}

namespace headlab {

inline constexpr uint32_t kHeadlabPluginMagic = 0x48'4c'50'47;  // "HLPG"
inline constexpr const char* kPluginEntryPoint = "headlab_plugin_entry";

// What a plugin's entry point registers; the loader commits it all or nothing. The add_*
// functions check what they can at once (a name, a factory) and throw headlab::Error otherwise.
class PluginRegistry {
 public:
  struct LayerEntry {
    std::string name;
    LayerKind kind = LayerKind::other;
    LayerFactory factory;
    LayerParameterCount count;
    std::vector<LayerCheckCase> checks;
  };
  struct OpEntry {
    std::string name;
    OpFunction function;
    std::vector<OpCase> cases;
  };
  struct TaskEntry {
    std::string name;
    TaskFactory factory;
  };
  struct OptimizerEntry {
    std::string name;
    OptimizerFactory factory;
    int state_tensors = 2;
    DeclaredOptions options;
  };
  struct ScheduleEntry {
    std::string name;
    ScheduleFactory factory;
    DeclaredOptions options;
  };

  // As register_layer (layers/registry.h) and register_task (train/tasks/registry.h).
  void add_layer(std::string name, LayerKind kind, LayerFactory factory,
                 LayerParameterCount count = {}, std::vector<LayerCheckCase> checks = {});
  void add_task(std::string name, TaskFactory factory);
  // As register_op (autograd/op_registry.h): the op and its gradcheck cases, which
  // `headlab gradcheck --plugin P` runs on every backend.
  void add_op(std::string name, OpFunction function, std::vector<OpCase> cases);

  // As register_optimizer (optim/registry.h) and register_schedule (optim/schedule_registry.h).
  void add_optimizer(std::string name, OptimizerFactory factory, int state_tensors,
                     DeclaredOptions options = {});
  void add_schedule(std::string name, ScheduleFactory factory, DeclaredOptions options = {});

  const std::vector<LayerEntry>& layers() const { return layers_; }
  const std::vector<TaskEntry>& tasks() const { return tasks_; }
  const std::vector<OpEntry>& ops() const { return ops_; }
  const std::vector<OptimizerEntry>& optimizers() const { return optimizers_; }
  const std::vector<ScheduleEntry>& schedules() const { return schedules_; }

 private:
  std::vector<LayerEntry> layers_;
  std::vector<TaskEntry> tasks_;
  std::vector<OpEntry> ops_;
  std::vector<OptimizerEntry> optimizers_;
  std::vector<ScheduleEntry> schedules_;
};

}  // namespace headlab

// Defines the plugin's entry point; the braces that follow are the body of
// void register(headlab::PluginRegistry& name).
#define HEADLAB_PLUGIN(name)                                                   \
  static void headlab_plugin_register(::headlab::PluginRegistry& name);        \
  static void headlab_plugin_register_erased(void* r) {                        \
    headlab_plugin_register(*static_cast<::headlab::PluginRegistry*>(r));      \
  }                                                                            \
  extern "C" __attribute__((visibility("default"))) const headlab_plugin_info* \
  headlab_plugin_entry() {                                                     \
    static const headlab_plugin_info info = {::headlab::kHeadlabPluginMagic,   \
                                             HEADLAB_PLUGIN_ABI,               \
                                             HEADLAB_VERSION,                  \
                                             HEADLAB_PLUGIN_BUILD,             \
                                             &headlab_plugin_register_erased,  \
                                             HEADLAB_HEADERS_FINGERPRINT};     \
    return &info;                                                              \
  }                                                                            \
  static void headlab_plugin_register(::headlab::PluginRegistry& name)
