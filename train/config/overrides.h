#pragma once
// --set values as people type them (internal to train/config): the text of an override turned
// into the TOML the loader parses.

#include <string>

namespace headlab {

// `text` as TOML for `key`: a bare string where the schema (or the task) says string
// (model.norm=post -> "post"), a,b,c where it says array (optim.betas=0.9,0.98 -> [0.9,0.98];
// task.relations=PREV,HEAD -> ["PREV","HEAD"]), a bare word for a key whose type only its layer
// knows (model.attention_options.init=xavier_uniform); TOML syntax is kept as it is.
std::string override_as_toml(const std::string& key, const std::string& text);

}  // namespace headlab
