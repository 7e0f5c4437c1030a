#pragma once
// Signals, as the CLI handles them.
//
// SIGINT, SIGTERM and SIGHUP ask a command to stop (and SIGUSR1, which mpirun forwards to every
// rank, where Ctrl-C on mpirun ends the job at once): `headlab train` finishes the current step,
// writes a checkpoint, prints one line and exits with 128 + the signal; `headlab sweep` passes
// SIGTERM to its runs, waits for their checkpoints, writes sweep.json and exits the same way.
// Further stop signals change nothing: the first one's checkpoint and line still come (two
// Ctrl-C a few milliseconds apart used to end the process between its writes). To end at
// once, SIGKILL or SIGQUIT (Ctrl-\): the run resumes from its last checkpoint. Other commands
// end at once: they write files atomically, so nothing is half-written.
//
// SIGPIPE and SIGXFSZ are ignored everywhere, so a closed pipe or a file-size limit makes the
// write fail (EPIPE, EFBIG) and the writer reports it, instead of killing the process between
// two checkpoints.

namespace headlab::cli {

// In main, before anything else: SIGPIPE and SIGXFSZ ignored (and wait_for_sigterm's semaphore
// made).
void ignore_write_signals();
// Installs the stop handlers for SIGINT, SIGTERM, SIGHUP and SIGUSR1.
void install_stop_handlers();
// The first stop signal received, or 0.
int stop_signal();
// Blocks until a SIGTERM reaches the stop handlers (for main.cpp's thread that then asks which
// ranks of the job are still there).
void wait_for_sigterm();
// "SIGTERM", "SIGINT", ... (or "signal N").
const char* signal_name(int signal);

}  // namespace headlab::cli
