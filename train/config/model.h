#pragma once
// From a config to the options of what it describes, in one place: the EncoderOptions a run's
// model builds its Encoder from (and the memory estimate counts, layers/encoder.h
// Encoder::parameter_count) and the schedule's options over the run's length; the optimizer's
// options are the config's own [optim] (Config::optim). Also the position a layer's own error
// message lacks.

#include "core/error.h"
#include "layers/encoder.h"
#include "train/config/config.h"

namespace headlab {

class Task;

// The [model] keys, the task's features (one embedding each), sequence length and classes, and
// the three slots with their option tables. dropout_seed is left at 0 (the trainer derives it
// from train.seed).
EncoderOptions encoder_options(const Config& config, const Task& task);

// [schedule] with total_steps = train.steps (warmup_cosine ends at the run's last step).
ScheduleOptions schedule_options(const Config& config);

// A layer's error names the layer ('layer_norm') but not where its options came from: throws
// `e` again prefixed with the position of an override into the slot's options table, of the
// table, or of the slot's layer name (else the config's file name).
[[noreturn]] void rethrow_with_position(const Error& e, const Config& config);

}  // namespace headlab
