// A plugin as a headlab 0.1.0 would have built it: the handshake names another version.
#include "train/plugins/plugin.h"

namespace {
void register_nothing(void*) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) const headlab_plugin_info*
headlab_plugin_entry() {
  static const headlab_plugin_info info = {headlab::kHeadlabPluginMagic, HEADLAB_PLUGIN_ABI,
                                           "0.1.0", HEADLAB_PLUGIN_BUILD, &register_nothing};
  return &info;
}
