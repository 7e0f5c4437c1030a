#pragma once
// Agreeing across ranks: the failures every rank sees alike, and the work only rank 0 does.
//
// A distributed job must fail as one: when rank 0 finds the run directory unusable, or the ranks
// were started with different configs, every rank stops with the same message, which the CLI
// prints once. These helpers turn such outcomes into a CollectiveError thrown on every rank.
// With one rank they change nothing: exceptions pass through as they are.

#include <functional>
#include <string>

#include "core/error.h"
#include "train/distributed/comm.h"

namespace headlab {

// Thrown on every rank with the same message (the CLI prints it once, from rank 0, and every
// rank exits with code 2).
class CollectiveError : public Error {
 public:
  using Error::Error;
};

// Runs f on rank 0 only. With several ranks, every rank then learns the outcome: if f threw,
// every rank throws CollectiveError with its message. Alone, f's exception passes unchanged.
void on_root(Comm& comm, const std::function<void()>& f);

// Runs f on every rank. With several ranks, if any rank's f threw, every rank throws
// CollectiveError: the message, when every failing rank said the same, or "rank R: message" of
// the first rank that failed. Alone, f's exception passes unchanged.
void on_every_rank(Comm& comm, const std::function<void()>& f);

// Whether `flag` is true on any rank (the agreed decision to stop after a step).
bool any_rank(Comm& comm, bool flag);

// Throws CollectiveError on every rank when some rank's `text` differs from rank 0's: "rank R
// differs from rank 0 in <what>: <first differing line of each>". Used at start-up with the
// resolved config, the build and the registered layers and tasks.
void check_same_on_every_rank(Comm& comm, const std::string& what, const std::string& text);

}  // namespace headlab
