// headlab.Model (python/model.h): a trained model's hook points from Python. run_with_cache reads
// them (Hooks::cache), run_with_hooks replaces them by what a Python function returns
// (Hooks::edit with an edit that calls into Python), both around one forward in eval mode
// without gradients, with the GIL released except inside the Python functions. Both take
// start_at, {name: array}: the points' values the forward starts with (Hooks::start_at).

#include <pybind11/stl.h>

#include <algorithm>

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "core/elementwise.h"
#include "core/error.h"
#include "layers/encoder.h"
#include "layers/hooks.h"
#include "python/bindings.h"
#include "python/model.h"
#include "train/eval/evaluation.h"

namespace py = pybind11;

namespace headlab::python {
namespace {

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

FloatArray to_numpy(const Tensor& t) {
  std::vector<py::ssize_t> shape;
  for (int d = 0; d < t.rank(); ++d) shape.push_back(t.size(d));
  FloatArray a(shape);
  std::copy(t.data(), t.data() + t.numel(), a.mutable_data());
  return a;
}

std::string shape_text(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) s += fmt::format("{}{}", d ? ", " : "", a.shape(d));
  return s + "]";
}

// An edit at `point` that hands the value to `fn` (a Python callable, kept alive by the caller)
// and continues with what it returns, checked to be an array of the value's shape.
Hooks::Edit python_edit(const std::string& point, py::handle fn) {
  return [point, fn](const Var& value) {
    py::gil_scoped_acquire gil;
    const py::object returned = fn(to_numpy(value.value()));
    const FloatArray out = FloatArray::ensure(returned);
    if (!out) {
      PyErr_Clear();
      fail(
          "run_with_hooks: the function at '{}' returned a {}, not an array of the point's "
          "shape {}",
          point, std::string(py::str(py::type::of(returned))), value.shape().str());
    }
    const Shape& want = value.shape();
    bool same = out.ndim() == want.rank();
    for (int d = 0; same && d < want.rank(); ++d) same = out.shape(d) == want[d];
    if (!same)
      fail("run_with_hooks: the function at '{}' returned shape {} but the point's value is {}",
           point, shape_text(out), want.str());
    Tensor t = Tensor::empty(want);
    std::copy(out.data(), out.data() + t.numel(), t.data());
    return Var(std::move(t));
  };
}

// The starts of a run (Hooks::start_at): {name: array} -> each array as the point's value.
void add_starts(Hooks& hooks, const py::object& starts) {
  if (starts.is_none()) return;
  for (const auto& [key, value] : starts.cast<py::dict>()) {
    const std::string name = py::str(key);
    const FloatArray a = FloatArray::ensure(value);
    if (!a) {
      PyErr_Clear();
      fail("start_at: the value for '{}' is a {}, not an array", name,
           std::string(py::str(py::type::of(value))));
    }
    Tensor t = Tensor::empty(Shape(a.shape(), a.shape() + a.ndim()));
    std::copy(a.data(), a.data() + t.numel(), t.data());
    hooks.start_at(name, std::move(t));
  }
}

// One forward of `batch` with `hooks` attached, the GIL released meanwhile (the caller holds it):
// the logits [B, T, C].
Tensor run_forward(LoadedModel& model, const Batch& batch, Hooks& hooks) {
  py::gil_scoped_release release;
  NoGradGuard no_grad;
  Encoder& encoder = model.run->encoder();
  std::vector<std::span<const int32_t>> features;
  batch.feature_spans(features);
  HookGuard attached(encoder, hooks);
  return encoder.forward(features, batch.batch_size, batch.seq_len).logits.value();
}

// run_forward with `names` cached: {name: its value}, "logits" [B, T, C] and "predictions"
// [B, T] (the first maximum, as the evaluation counts them).
py::dict forward(LoadedModel& model, const Batch& batch, Hooks& hooks,
                 const std::vector<std::string>& names) {
  for (const std::string& name : names) hooks.cache(name);
  const Tensor logits = run_forward(model, batch, hooks);
  const auto passed = [&](const std::string& name) {
    return std::find(hooks.seen().begin(), hooks.seen().end(), name) != hooks.seen().end();
  };
  for (const std::string& name : hooks.start_names())
    if (!passed(name))
      fail("start_at: the forward passed no hook point '{}' (model.hook_points() lists them)",
           name);
  py::dict out;
  for (const std::string& name : names) {
    if (!hooks.has_cached(name)) {
      std::string known;
      for (const std::string& p : hooks.seen())
        if (known.find("'" + p + "'") == std::string::npos)
          known += (known.empty() ? "'" : ", '") + p + "'";
      fail(
          "run_with_cache: the forward passed no hook point '{}' (it passed {}; "
          "model.hook_points() lists them)",
          name, known);
    }
    out[name.c_str()] = to_numpy(hooks.cached(name).value());
  }
  const int64_t rows = logits.numel() / logits.size(-1);
  py::array_t<int32_t> predicted({batch.batch_size, batch.seq_len});
  ew::argmax_rows(logits.data(), rows, logits.size(-1), predicted.mutable_data());
  out["logits"] = to_numpy(logits);
  out["predictions"] = predicted;
  return out;
}

const std::vector<std::string>& hook_points(LoadedModel& model) {
  if (!model.hook_points.empty()) return model.hook_points;
  Batch batch;
  const Task& task = model.run->task();
  eval_stream(task, 1, 1, 0).batch(task, 0, batch);
  // A layer may pass some points only when they are asked for (the fused attention skips its
  // per-head values): the first pass finds the points of the fast path, the second asks for
  // those and for the per-head points of every attention found, in hooks.h's vocabulary.
  std::vector<std::string> ask;
  for (int pass = 0; pass < 2; ++pass) {
    Hooks hooks;
    for (const std::string& name : ask) hooks.cache(name);
    run_forward(model, batch, hooks);
    std::vector<std::string> seen;
    for (const std::string& p : hooks.seen())
      if (std::find(seen.begin(), seen.end(), p) == seen.end()) seen.push_back(p);
    ask = seen;
    for (const std::string& p : seen) {
      const std::string z = "attn.hook_z";
      if (p.size() < z.size() || p.compare(p.size() - z.size(), z.size(), z) != 0) continue;
      const std::string prefix = p.substr(0, p.size() - std::string("hook_z").size());
      for (const char* q : {"hook_q", "hook_k", "hook_v", "hook_scores", "hook_pattern"})
        if (std::find(ask.begin(), ask.end(), prefix + q) == ask.end()) ask.push_back(prefix + q);
    }
    model.hook_points = seen;
  }
  return model.hook_points;
}

std::vector<std::string> requested(LoadedModel& model, const py::object& names) {
  if (names.is_none()) return hook_points(model);
  if (py::isinstance<py::str>(names)) return {names.cast<std::string>()};
  return names.cast<std::vector<std::string>>();
}

// The evaluation's counts of `logits` (a run's result dict or [B, T, C]) against batch's labels.
py::dict score(LoadedModel& model, const py::object& batch_in, const py::object& result) {
  const Batch batch = to_batch(model, batch_in);
  const py::object logits_in =
      py::isinstance<py::dict>(result) ? result.cast<py::dict>()["logits"] : result;
  const FloatArray logits = FloatArray::ensure(logits_in);
  const Task& task = model.run->task();
  if (!logits || logits.ndim() != 3 || logits.shape(0) != batch.batch_size ||
      logits.shape(1) != batch.seq_len || logits.shape(2) != task.num_classes())
    fail("score: expected logits [{}, {}, {}] for this batch", batch.batch_size, batch.seq_len,
         task.num_classes());
  Tensor t = Tensor::empty({batch.batch_size, batch.seq_len, task.num_classes()});
  std::copy(logits.data(), logits.data() + t.numel(), t.data());
  EvalCounts counts;
  counts.relation_correct.resize(task.relations().size(), 0);
  count_predictions(t, batch.labels, &task, counts);
  py::dict relation_correct, component;
  const std::vector<double> accuracy = counts.relation_accuracy();
  for (size_t r = 0; r < task.relations().size(); ++r) {
    relation_correct[task.relations()[r].c_str()] = counts.relation_correct[r];
    component[task.relations()[r].c_str()] = accuracy[r];
  }
  py::dict out;
  out["tokens"] = counts.tokens;
  out["correct"] = counts.correct;
  out["relation_correct"] = relation_correct;
  out["accuracy"] = counts.accuracy();
  out["component_accuracy"] = component;
  return out;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<LoadedModel>(m, "Model", "A trained model of a run (headlab.load_model)")
      .def_property_readonly("run_dir", [](const LoadedModel& x) { return x.run_dir.string(); })
      .def_property_readonly("checkpoint",
                             [](const LoadedModel& x) { return x.checkpoint.string(); })
      .def_property_readonly("step", [](const LoadedModel& x) { return x.step; })
      .def_property_readonly("config_toml", [](const LoadedModel& x) { return x.resolved_config; })
      .def_property_readonly("task", [](const LoadedModel& x) { return x.run->task().name(); })
      .def_property_readonly("relations",
                             [](const LoadedModel& x) { return x.run->task().relations(); })
      .def_property_readonly("features",
                             [](const LoadedModel& x) {
                               std::vector<std::string> names;
                               for (const FeatureSpec& f : x.run->task().features())
                                 names.push_back(f.name);
                               return names;
                             })
      .def_property_readonly("seq_len",
                             [](const LoadedModel& x) { return x.run->task().seq_len(); })
      .def_property_readonly("num_classes",
                             [](const LoadedModel& x) { return x.run->task().num_classes(); })
      .def_property_readonly("layers",
                             [](LoadedModel& x) { return x.run->encoder().options().layers; })
      .def_property_readonly("heads",
                             [](LoadedModel& x) { return x.run->encoder().options().heads; })
      .def_property_readonly("eval_batches",
                             [](const LoadedModel& x) {
                               const TrainConfig& t = x.run->config().train;
                               return eval_stream(x.run->task(), t.eval_batches, t.eval_batch_size,
                                                  static_cast<uint64_t>(t.eval_seed))
                                   .batches;
                             })
      .def(
          "eval_batch",
          [](const LoadedModel& x, int64_t i) {
            const TrainConfig& t = x.run->config().train;
            const EvalStream stream = eval_stream(x.run->task(), t.eval_batches, t.eval_batch_size,
                                                  static_cast<uint64_t>(t.eval_seed));
            if (i < 0 || i >= stream.batches)
              fail("eval_batch: batch {} of {} evaluation batches", i, stream.batches);
            Batch batch;
            stream.batch(x.run->task(), i, batch);
            return batch_to_dict(x.run->task(), batch);
          },
          py::arg("index"))
      .def("encode", &encode, py::arg("input"))
      .def("hook_points", &hook_points)
      .def(
          "run_with_cache",
          [](LoadedModel& x, const py::object& batch, const py::object& names,
             const py::object& start_at) {
            Hooks hooks;
            add_starts(hooks, start_at);
            return forward(x, to_batch(x, batch), hooks, requested(x, names));
          },
          py::arg("batch"), py::arg("names") = py::none(), py::arg("start_at") = py::none())
      .def(
          "run_with_hooks",
          [](LoadedModel& x, const py::object& batch, const py::dict& edits,
             const py::object& names, const py::object& start_at) {
            Hooks hooks;
            add_starts(hooks, start_at);
            for (const auto& [key, fn] : edits) {
              if (!PyCallable_Check(fn.ptr()))
                fail("run_with_hooks: the value for '{}' is not callable",
                     std::string(py::str(key)));
              hooks.edit(py::str(key), python_edit(py::str(key), fn));  // `edits` keeps fn
            }
            const std::vector<std::string> cached =
                names.is_none() ? std::vector<std::string>{} : requested(x, names);
            return forward(x, to_batch(x, batch), hooks, cached);
          },
          py::arg("batch"), py::arg("hooks"), py::arg("names") = py::none(),
          py::arg("start_at") = py::none())
      .def("score", &score, py::arg("batch"), py::arg("result"))
      .def("__repr__", [](const LoadedModel& x) {
        return fmt::format("<headlab.Model of '{}' at step {} (task '{}')>", x.run_dir.string(),
                           x.step, x.run->task().name());
      });
  m.def(
      "load_model",
      [](const std::string& run_dir, const std::string& checkpoint,
         const std::vector<std::string>& plugins) {
        py::gil_scoped_release release;
        return load_model(run_dir, checkpoint, plugins);
      },
      py::arg("run_dir"), py::arg("checkpoint") = "latest",
      py::arg("plugins") = std::vector<std::string>{});
}

}  // namespace headlab::python
