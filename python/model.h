#pragma once
// Internal to python/model*.cpp: a trained model as Python holds it (headlab.Model), and the
// conversion of its batches between NumPy and headlab::Batch.
//
// A batch in Python is a dict:
//   "features"  {feature name: int32 [B, T]}, in the task's feature order (what the forward reads)
//   "labels"    int32 [B, T], kIgnoreIndex (-100) where a token has none   (eval batches)
//   "partners"  {relation: int32 [B, T]}, -1 where a token has none           (eval batches)
//   "tokens"    [[str] * T] * B: each token as the task writes it (Task::token_string)
// Every sequence has the task's length T (tasks pad their own sentences: task.h).

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "train/run/model.h"
#include "train/tasks/task.h"

namespace headlab::python {

struct LoadedModel {
  std::unique_ptr<RunModel> run;
  std::filesystem::path run_dir;
  std::filesystem::path checkpoint;  // the checkpoint directory loaded
  int64_t step = 0;
  std::string resolved_config;           // config.resolved.toml of the checkpoint
  std::vector<std::string> hook_points;  // found at the first hook_points()
  // Token string -> feature ids, the inverse of Task::token_string (model_batch.cpp), built at
  // the first encode of sentences.
  std::map<std::string, std::vector<int32_t>> token_ids;
  bool token_ids_built = false;
};

// Loads a run's checkpoint: `plugins` first, then the run's own (run.json), the checkpoint and
// the config saved in it, the model in eval mode. Throws headlab::Error as `headlab eval` does.
std::unique_ptr<LoadedModel> load_model(const std::string& run_dir, const std::string& checkpoint,
                                        const std::vector<std::string>& plugins);

// batch -> Python dict (see the top).
pybind11::dict batch_to_dict(const Task& task, const Batch& batch);
// Python dict (or what encode takes) -> batch; throws headlab::Error naming what is wrong.
Batch dict_to_batch(const Task& task, const pybind11::dict& batch);
// encode: sentences (str, or lists of token strings) or ids (int array [B, T] for a one-feature
// task, [F, B, T], or {feature: [B, T]}).
pybind11::dict encode(LoadedModel& model, const pybind11::object& input);
// Whatever run_with_cache takes as a batch: a batch dict, or what encode takes.
Batch to_batch(LoadedModel& model, const pybind11::object& input);

}  // namespace headlab::python
