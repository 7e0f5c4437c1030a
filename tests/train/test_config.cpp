// Config loading: every kind of mistake gives one message naming the dotted key and its
// file:line:col (or the --set argument); --set overrides; the resolved config round-trips;
// the hash and the shape comparison; configs/README.md documents every key.

#include <doctest/doctest.h>
#include <array>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/config/schema.h"

using namespace headlab;

namespace {

const std::string kTask = "[task]\nname = \"dependency\"\n";

// The message of the Error that parsing `text` (as "t.toml") with `sets` throws; fails the test
// if nothing is thrown.
std::string error_of(const std::string& text, std::vector<std::string> sets = {}) {
  try {
    parse_config(text, "t.toml", sets);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected an error for:\n" << text);
  return {};
}

bool has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

#define CHECK_HAS(message, part) CHECK_MESSAGE(has(message, part), (message))

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("train: config defaults fill every key but task.name, which is required") {
  const Config c = parse_config(kTask, "t.toml");
  const Config defaults;
  CHECK(c.task.name == "dependency");
  for (const auto& key : config_keys()) {
    if (key.required) continue;
    CHECK_MESSAGE(format_value(key.get(c)) == format_value(key.get(defaults)), key.key);
  }
  // The task's own keys, defaults filled by the task, in the order it reads them.
  std::vector<std::string> task_keys;
  for (const auto& [key, value] : c.task.options)
    task_keys.push_back(key + " = " + format_value(value));
  CHECK(task_keys == std::vector<std::string>{"colours = 4",
                                              "relations = [\"PREV\", \"HEAD\", \"SEM\"]",
                                              "embedding = \"factored\""});
  const std::string e = error_of("[model]\nheads = 4\n");
  CHECK_HAS(e, "t.toml");
  CHECK_HAS(e, "task.name is required");
}

TEST_CASE("train: config unknown key names position and suggests the closest key") {
  const std::string e = error_of(kTask + "[model]\nhaeds = 4\n");
  CHECK_HAS(e, "t.toml:4:1:");
  CHECK_HAS(e, "unknown key model.haeds");
  CHECK_HAS(e, "did you mean model.heads?");

  const std::string moved = error_of(kTask + "[train]\nlr = 0.1\n");
  CHECK_HAS(moved, "t.toml:4:1:");
  CHECK_HAS(moved, "did you mean optim.lr?");

  const std::string table = error_of(kTask + "[modle]\nheads = 4\n");
  CHECK_HAS(table, "t.toml:3:2:");
  CHECK_HAS(table, "unknown table [modle] (did you mean [model]?)");

  const std::string top = error_of("heads = 4\n" + kTask);
  CHECK_HAS(top, "t.toml:1:1:");
  CHECK_HAS(top, "did you mean model.heads");
}

TEST_CASE("train: config wrong type names key, position, actual and expected type") {
  const std::string e = error_of(kTask + "[model]\nd_model = \"64\"\n");
  CHECK_HAS(e, "t.toml:4:11:");
  CHECK_HAS(e, "model.d_model has type string but expected an integer in [1, 8192]");

  const std::string f = error_of(kTask + "[model]\nheads = 4.0\n");
  CHECK_HAS(f, "t.toml:4:9:");
  CHECK_HAS(f, "model.heads has type float");

  const std::string arr = error_of(kTask + "[optim]\nbetas = [0.9, \"x\"]\n");
  CHECK_HAS(arr, "t.toml:4:9:");
  CHECK_HAS(arr, "optim.betas has type string at element 1");

  const std::string b = error_of(kTask + "[model]\nattn_dropout = true\n");
  CHECK_HAS(b, "model.attn_dropout has type boolean but expected a number in [0.0, 1.0)");

  const std::string s = error_of(kTask + "[model]\nnorm = \"postt\"\n");
  CHECK_HAS(s, "t.toml:4:8:");
  CHECK_HAS(s, "model.norm = \"postt\" is not one of \"pre\", \"post\" (did you mean \"post\"?)");
}

TEST_CASE("train: config values out of range name key, position, value and bounds") {
  struct Case {
    std::string table, line, key, bounds;
  };
  const std::vector<Case> cases = {
      {"model", "d_model = 0", "model.d_model = 0", "[1, 8192]"},
      {"model", "d_model = 8193", "model.d_model = 8193", "[1, 8192]"},
      {"model", "heads = 257", "model.heads = 257", "[1, 256]"},
      {"model", "layers = 257", "model.layers = 257", "[1, 256]"},
      {"model", "d_ff = 65537", "model.d_ff = 65537", "[0, 65536]"},
      {"model", "dropout = 1.0", "model.dropout = 1.0", "[0.0, 1.0)"},
      {"model", "attn_dropout = -0.1", "model.attn_dropout = -0.1", "[0.0, 1.0)"},
      {"train", "batch_size = 65537", "train.batch_size = 65537", "[1, 65536]"},
      {"train", "steps = 1000000001", "train.steps = 1000000001", "[1, 1000000000]"},
      {"train", "steps = 0", "train.steps = 0", "[1, 1000000000]"},
      {"optim", "lr = 0", "optim.lr = 0.0", "> 0.0"},
      {"optim", "lr = -1e-3", "optim.lr = -0.001", "> 0.0"},
      {"optim", "betas = [0.9, 1.0]", "optim.betas = [0.9, 1.0]", "[0.0, 1.0)"},
      {"task", "relations = [\"PREV\", \"PREV\"]", "task.relations", "distinct"},
  };
  for (const Case& c : cases) {
    const std::string text = c.table == "task" ? "[task]\nname = \"dependency\"\n" + c.line + "\n"
                                               : kTask + "[" + c.table + "]\n" + c.line + "\n";
    const std::string e = error_of(text);
    CHECK_HAS(e, c.table == "task" ? "t.toml:3:" : "t.toml:4:");
    CHECK_HAS(e, c.key);
    CHECK_HAS(e, c.bounds);
  }
}

TEST_CASE("train: config NaN and Inf are rejected in every numeric option") {
  for (const std::string line : {"lr = nan", "lr = inf", "eps = -inf", "clip_norm = nan"}) {
    const std::string e = error_of(kTask + "[optim]\n" + line + "\n");
    CHECK_HAS(e, "t.toml:4:");
    CHECK_HAS(e, "optim." + line.substr(0, line.find(' ')));
    CHECK_HAS(e, "not a finite number");
  }
  const std::string p = error_of(kTask + "[model]\nattn_dropout = nan\n");
  CHECK_HAS(p, "model.attn_dropout = nan is not a finite number");
  const std::string a = error_of(kTask + "[optim]\nbetas = [nan, 0.9]\n");
  CHECK_HAS(a, "optim.betas");
  CHECK_HAS(a, "t.toml:4:9:");
}

TEST_CASE("train: config heads must divide d_model unless head_dim is given") {
  const std::string e = error_of(kTask + "[model]\nd_model = 64\nheads = 5\n");
  CHECK_HAS(e, "t.toml:5:9:");
  CHECK_HAS(e, "model.heads = 5 does not divide model.d_model = 64");
  const Config c = parse_config(kTask + "[model]\nd_model = 64\nheads = 5\nhead_dim = 16\n", "t");
  CHECK(c.model.heads == 5);
  CHECK(c.model.head_dim == 16);
}

TEST_CASE("train: config cross-field checks name the key and position") {
  const std::string lr = error_of(kTask + "[optim]\nlr = 1e-3\n[schedule]\nmin_lr = 1e-2\n");
  CHECK_HAS(lr, "t.toml:6:10:");
  CHECK_HAS(lr, "schedule.min_lr");
  const std::string m = error_of(kTask + "[optim]\nmomentum = 0.9\n");
  CHECK_HAS(m, "t.toml:4:12:");
  CHECK_HAS(m, "optim.momentum applies to sgd only");
  const std::string w = error_of(kTask + "[train]\nsteps = 50\n[schedule]\nwarmup_steps = 50\n");
  CHECK_HAS(w, "t.toml:6:16:");
  CHECK_HAS(w, "schedule.warmup_steps = 50 must be below train.steps = 50");
  const std::string layer = error_of(kTask + "[model]\nnorm_layer = \"layer_nrom\"\n");
  CHECK_HAS(layer, "t.toml:4:14:");
  CHECK_HAS(layer, "did you mean \"layer_norm\"?");
}

TEST_CASE(
    "train: config memory estimate above runtime.max_memory_gb is refused before allocating") {
  const std::string big = kTask +
                          "[model]\nd_model = 4096\nheads = 16\nd_ff = 16384\n"
                          "[train]\nbatch_size = 65536\n";
  const std::string e = error_of(big);
  CHECK_HAS(e, "t.toml:8:14:");
  CHECK_HAS(e, "train.batch_size");
  CHECK_HAS(e, "estimated memory");
  CHECK_HAS(e, "exceeds runtime.max_memory_gb = 8");

  const std::string small = error_of(kTask + "[runtime]\nmax_memory_gb = 0.001\n");
  CHECK_HAS(small, "t.toml:4:17:");
  CHECK_HAS(small, "runtime.max_memory_gb");

  // The flagship's estimate is small and grows with the batch.
  const Config c = parse_config(kTask, "t.toml");
  const MemoryEstimate m = estimate_memory(c);
  CHECK(m.parameters > 30000);
  CHECK(m.parameters < 60000);
  Config bigger = c;
  bigger.train.batch_size *= 64;
  CHECK(estimate_memory(bigger).activation_bytes > m.activation_bytes);
}

TEST_CASE("train: config syntax errors and unreadable files are one clear line") {
  const std::string e = error_of(kTask + "[model\nheads = 4\n");
  CHECK_HAS(e, "t.toml:3:");
  CHECK_HAS(e, "invalid TOML");
  try {
    load_config("no/such/config.toml");
    FAIL("no error");
  } catch (const Error& err) {
    CHECK_HAS(std::string(err.what()), "no/such/config.toml: cannot read the config file");
  }
}

TEST_CASE("train: config --set overrides with TOML values, arrays included, before validation") {
  const Config c = parse_config(
      kTask, "t.toml",
      std::vector<std::string>{"model.heads=8", "optim.betas=[0.8, 0.95]", "model.norm=\"post\"",
                               "task.relations=[\"PREV\",\"SEM\",\"NEXT\"]", "optim.lr=1e-2",
                               "optim.lr=2e-2", "model.norm_options.eps=1e-6"});
  CHECK(c.model.heads == 8);
  CHECK(c.optim.betas == std::array<double, 2>{0.8, 0.95});
  CHECK(c.model.norm == "post");
  CHECK(format_value(*c.task.options.find("relations")) == "[\"PREV\", \"SEM\", \"NEXT\"]");
  CHECK(c.where("task.relations") == "--set task.relations=[\"PREV\",\"SEM\",\"NEXT\"]");
  CHECK(c.optim.lr == 2e-2);  // the later --set wins
  CHECK(c.where("model.heads") == "--set model.heads=8");
  REQUIRE(c.model.norm_options.contains("eps"));
  CHECK(has(to_toml(c), "[model.norm_options]\neps = 1e-06\n"));

  // Applied before validation: the override repairs what the file alone gets wrong.
  const Config fixed = parse_config(kTask + "[model]\nheads = 5\nd_model = 0\n", "t.toml",
                                    std::vector<std::string>{"model.heads=4", "model.d_model=32"});
  CHECK(fixed.model.heads == 4);
  CHECK(fixed.model.d_model == 32);
}

TEST_CASE("train: config --set mistakes name the --set argument") {
  using V = std::vector<std::string>;
  CHECK_HAS(error_of(kTask, V{"model.heads"}), "--set model.heads: expected key=value");
  const std::string unknown = error_of(kTask, V{"model.haeds=4"});
  CHECK_HAS(unknown, "--set model.haeds=4: unknown key model.haeds (did you mean model.heads?)");
  const std::string value = error_of(kTask, V{"model.heads=four"});
  CHECK_HAS(value, "--set model.heads=four: the value is not valid TOML");
  const std::string choice = error_of(kTask, V{"model.norm=postt"});
  CHECK_HAS(choice, "--set model.norm=postt: model.norm = \"postt\" is not one of");
  const std::string type = error_of(kTask, V{"model.heads=4.5"});
  CHECK_HAS(type, "--set model.heads=4.5: model.heads has type float but expected an integer");
  const std::string range = error_of(kTask, V{"optim.betas=[0.9]"});
  CHECK_HAS(range, "--set optim.betas=[0.9]: optim.betas = [0.9] has 1 elements");
  const std::string table = error_of(kTask, V{"model={heads=4}"});
  CHECK_HAS(table, "--set model={heads=4}: model is a table");
  const std::string two = error_of(kTask, V{"model.heads=4\nx=1"});
  CHECK_HAS(two, "single TOML value");
  const std::string cross = error_of(kTask, V{"model.heads=3"});
  CHECK_HAS(cross, "--set model.heads=3: model.heads = 3 does not divide model.d_model = 64");
}

TEST_CASE("train: config --set takes values as people type them") {
  using V = std::vector<std::string>;
  const Config c =
      parse_config(kTask, "t.toml",
                   V{"model.norm=post", "optim.betas=0.8, 0.9", "task.relations=PREV,SEM",
                     "model.attention_options.init=xavier_uniform", "model.activation=\"gelu\"",
                     "schedule.name='constant'"});
  CHECK(c.model.norm == "post");
  CHECK(c.optim.betas == std::array<double, 2>{0.8, 0.9});
  CHECK(c.model.activation == "gelu");
  CHECK(c.schedule.name == "constant");
  CHECK(format_value(*c.task.options.find("relations")) == "[\"PREV\", \"SEM\"]");
  CHECK(format_value(*c.model.attention_options.find("init")) == "\"xavier_uniform\"");
  // TOML still works, and a bare value for a number is still a number.
  const Config t = parse_config(kTask, "t.toml", V{"optim.betas=[0.7,0.8]", "model.heads=8"});
  CHECK(t.optim.betas == std::array<double, 2>{0.7, 0.8});
  CHECK(t.model.heads == 8);
  // Every override is recorded in the resolved config.
  const std::string text = to_toml(c);
  CHECK(has(text, "# override: --set model.norm=post\n"));
  CHECK(has(text, "# override: --set task.relations=PREV,SEM\n"));
  CHECK(parse_config(text, "resolved.toml").model.norm == "post");
}

TEST_CASE("train: config --set of a whole options table or of another layer replaces the table") {
  using V = std::vector<std::string>;
  const std::string file = kTask + "[model.norm_options]\neps = 1e-3\n";
  CHECK(parse_config(file, "t.toml").model.norm_options.contains("eps"));
  // Switching the slot's layer drops the file's table (it was layer_norm's); keeping it does not.
  CHECK(parse_config(file, "t.toml", V{"model.norm_layer=rms_norm"}).model.norm_options.empty());
  CHECK(parse_config(file, "t.toml", V{"model.norm_layer=layer_norm"})
            .model.norm_options.contains("eps"));
  const Config switched =
      parse_config(file, "t.toml", V{"model.norm_layer=rms_norm", "model.norm_options.eps=1e-5"});
  REQUIRE(switched.model.norm_options.size() == 1);
  CHECK(format_value(*switched.model.norm_options.find("eps")) == "1e-05");
  // The whole table: {} clears it, an inline table replaces it, and later single options apply
  // on top.
  CHECK(parse_config(file, "t.toml", V{"model.norm_options={}"}).model.norm_options.empty());
  const Config replaced = parse_config(file, "t.toml", V{"model.norm_options={eps=1e-4}"});
  REQUIRE(replaced.model.norm_options.size() == 1);
  CHECK(format_value(*replaced.model.norm_options.find("eps")) == "0.0001");
  CHECK(replaced.where("model.norm_options") == "--set model.norm_options={eps=1e-4}");
  const Config both =
      parse_config(file, "t.toml", V{"model.norm_options={}", "model.norm_options.eps=2e-3"});
  CHECK(format_value(*both.model.norm_options.find("eps")) == "0.002");
  CHECK_HAS(error_of(file, V{"model.norm_options=1"}),
            "--set model.norm_options=1: model.norm_options is a table of layer options: give an "
            "inline table");
}

TEST_CASE("train: config resolved TOML round-trips with the same hash") {
  const Config c = parse_config(
      kTask + "[model]\nheads = 2\nnorm = \"post\"\n[model.norm_options]\neps = 1e-6\n", "t.toml",
      std::vector<std::string>{"optim.betas=[0.8,0.9]", "train.seed=7"});
  const std::string text = to_toml(c);
  for (const auto& key : config_keys()) {
    const std::string leaf = key.key.substr(key.key.find('.') + 1);
    CHECK_MESSAGE(has(text, "\n" + leaf + " = "), key.key);
  }
  CHECK(has(text,
            "[task]\nname = \"dependency\"\ncolours = 4\nrelations = [\"PREV\", \"HEAD\", "
            "\"SEM\"]\nembedding = \"factored\"\n"));
  // The overrides are recorded in comments above the values.
  const std::string comments =
      "# override: --set optim.betas=[0.8,0.9]\n# override: --set train.seed=7\n";
  CHECK(has(text, comments));
  const Config back = parse_config(text, "resolved.toml");
  std::string values = text;
  values.erase(values.find(comments), comments.size());
  CHECK(to_toml(back) == values);
  CHECK(config_hash(back) == config_hash(c));
  CHECK(config_hash(c).size() == 16);
  CHECK(config_differences(c, back).empty());
  Config changed = back;
  changed.optim.lr *= 2;
  CHECK(config_hash(changed) != config_hash(c));
}

TEST_CASE("train: config layer options become an OptionMap that remembers every position") {
  const Config c = parse_config(kTask + "[model.norm_options]\neps = 1e-6\naffine = true\n",
                                "t.toml", std::vector<std::string>{"model.norm_options.x=[1, 2]"});
  const OptionMap& o = c.model.norm_options;
  REQUIRE(o.size() == 3);
  CHECK(o.begin()->first == "affine");  // ordered by name, as the resolved config writes them
  CHECK(o.find("eps")->where == "t.toml:4:7");
  CHECK(o.find("eps")->key_where == "t.toml:4:1");
  REQUIRE(o.find("x")->get_if<OptionArray>());
  CHECK(o.find("x")->get_if<OptionArray>()->size() == 2);
  CHECK(o.find("x")->where.empty());  // the trainer names the --set argument instead
  // The layer's own messages carry the positions (a type error is found while the memory
  // estimate counts the parameters; an unknown option when the model is built).
  CHECK(error_of(kTask + "[model.norm_options]\neps = \"small\"\n") ==
        "t.toml:3:8: [model.norm_options]: layers: option 'eps' of layer 'layer_norm' is a "
        "string but expected a number (t.toml:4:7)");
  Rng rng(1);
  CHECK_THROWS_WITH_AS(make_layer("layer_norm", o, OptionMap{{"d_model", 8}}, rng),
                       "layers: unknown option 'x' for layer 'layer_norm' (known: d_model, eps, "
                       "affine)",
                       Error);
  CHECK_HAS(error_of(kTask + "[model.norm_options]\nx = {a = 1}\n"),
            "t.toml:4:5: model.norm_options.x is a table, but layer options are plain values");
}

TEST_CASE("train: config shape differences list what a checkpoint cannot load into") {
  const Config a = parse_config(kTask, "a.toml");
  const Config lr = parse_config(kTask, "b.toml", std::vector<std::string>{"optim.lr=0.1"});
  CHECK(shape_differences(a, lr).empty());
  CHECK(config_differences(a, lr).size() == 1);
  const Config heads = parse_config(kTask, "c.toml", std::vector<std::string>{"model.heads=8"});
  const std::vector<std::string> d = shape_differences(a, heads);
  REQUIRE(d.size() == 1);
  CHECK(d[0] == "model.heads: 4 (checkpoint) vs 8 (config)");
  const Config opts =
      parse_config(kTask, "d.toml", std::vector<std::string>{"model.norm_options.affine=false"});
  CHECK(shape_differences(a, opts).size() == 1);
}

TEST_CASE("train: config the flagship file holds docs/task.md's settings") {
  const Config c = load_config(std::string(HEADLAB_SOURCE_DIR) + "/configs/dependency.toml");
  CHECK(c.model.layers == 1);
  CHECK(c.model.d_model == 64);
  CHECK(c.model.heads == 4);
  CHECK(c.model.d_ff == 128);
  CHECK(c.model.activation == "relu");
  CHECK(c.model.norm == "pre");
  CHECK(format_value(*c.task.options.find("embedding")) == "\"factored\"");
  CHECK(c.model.embed_init_std == 1.0);
  CHECK(c.model.pos_init_std == 0.85);
  CHECK(c.model.attn_dropout == 0.15);
  CHECK(c.model.dropout == 0.0);
  CHECK(c.model.dropout_steps == 600);
  CHECK(c.optim.name == "adam");
  CHECK(c.optim.lr == 6e-3);
  CHECK(c.optim.betas == std::array<double, 2>{0.9, 0.98});
  CHECK(c.optim.eps == 1e-8);
  CHECK(c.optim.weight_decay == 0.0);
  CHECK(c.optim.clip_norm == 1.0);
  CHECK(c.schedule.name == "warmup_cosine");
  CHECK(c.schedule.warmup_steps == 100);
  CHECK(c.schedule.min_lr == 0.0);
  CHECK(c.train.batch_size == 32);
  CHECK(c.train.steps == 1000);
  CHECK(c.train.eval_batches == 8);
  CHECK(c.train.eval_batch_size == 256);
  // tiny.toml loads too (the tests train it).
  CHECK(load_config(std::string(HEADLAB_SOURCE_DIR) + "/configs/tiny.toml").train.steps > 0);
}

TEST_CASE("train: config README documents every key with its default") {
  const std::string readme = read_text(std::string(HEADLAB_SOURCE_DIR) + "/configs/README.md");
  const std::string begin = "<!-- keys:begin -->\n", end = "<!-- keys:end -->";
  const size_t b = readme.find(begin), e = readme.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string table = readme.substr(b + begin.size(), e - b - begin.size());
  // On a mismatch the message is the table to paste between the markers.
  CHECK_MESSAGE(table == config_reference_markdown(), config_reference_markdown());
}
