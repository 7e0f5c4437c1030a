#pragma once
// Signals, as the CLI handles them.
//
// SIGINT, SIGTERM and SIGHUP ask a command to stop: `headlab train` finishes the current step,
// writes a checkpoint, prints one line and exits with 128 + the signal; `headlab sweep` passes
// SIGTERM to its runs, waits for their checkpoints, writes sweep.json and exits the same way.
// The same signal a second time ends the process at once (the default action comes back). Other
// commands end at once: they write files atomically, so nothing is half-written.
//
// SIGPIPE and SIGXFSZ are ignored everywhere, so a closed pipe or a file-size limit makes the
// write fail (EPIPE, EFBIG) and the writer reports it, instead of killing the process between
// two checkpoints.

namespace headlab::cli {

// In main, before anything else: SIGPIPE and SIGXFSZ ignored.
void ignore_write_signals();
// Installs the stop handlers for SIGINT, SIGTERM and SIGHUP.
void install_stop_handlers();
// The first stop signal received, or 0.
int stop_signal();
// "SIGTERM", "SIGINT", ... (or "signal N").
const char* signal_name(int signal);

}  // namespace headlab::cli
