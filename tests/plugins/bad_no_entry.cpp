// A shared library that is not a headlab plugin: it has no headlab_plugin_entry.
extern "C" int not_a_headlab_plugin() {
  return 0;
}
