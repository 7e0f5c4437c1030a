// A distributed sweep's run directories between hosts (gather_runs.h).

#include "train/sweep/gather_runs.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/distributed/agree.h"
#include "train/run/run_dir.h"
#include "train/sweep/run_copy.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace headlab {

namespace {

// Run i's copy goes from rank `from` to rank `to`.
struct Move {
  size_t run = 0;
  int from = 0, to = 0;
};

size_t trainer_of(size_t run, const Comm& comm) {
  return run % static_cast<size_t>(comm.size());
}

// "rank 1 (hostB)", or "rank 1" where the hosts are unknown.
std::string rank_name(const Comm& comm, int r) {
  const std::vector<std::string> hosts = comm.hosts();
  return r < static_cast<int>(hosts.size()) && !hosts[r].empty()
             ? fmt::format("rank {} ({})", r, hosts[r])
             : fmt::format("rank {}", r);
}

// Every rank's run.json text of each run it trains, by rank: {"run index": text}.
std::vector<json> trainers_copies(Comm& comm, const std::vector<SweepRun>& runs) {
  json mine = json::object();
  on_every_rank(comm, [&] {
    for (size_t i = 0; i < runs.size(); ++i)
      if (trainer_of(i, comm) == static_cast<size_t>(comm.rank()))
        mine[std::to_string(i)] = run_json_text(runs[i].dir);
  });
  std::vector<json> out;
  for (const std::string& text : allgather_strings(comm, mine.dump()))
    out.push_back(json::parse(text));
  return out;
}

// Before a copy replaces a directory there: it must be a run directory of headlab's, and not in
// use (check_run_dir's one-line error otherwise).
void check_replaceable(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec))) check_run_dir(dir, RunDirUse::write);
}

// Rank 0's decision (a list of moves) on every rank.
std::vector<Move> agree_on_moves(Comm& comm, const std::function<std::vector<Move>()>& decide) {
  std::vector<Move> moves;
  on_root(comm, [&] { moves = decide(); });
  json list = json::array();
  for (const Move& m : moves) list.push_back({m.run, m.from, m.to});
  moves.clear();
  for (const json& m : json::parse(broadcast_string(comm, 0, list.dump())))
    moves.push_back({m[0].get<size_t>(), m[1].get<int>(), m[2].get<int>()});
  return moves;
}

// Carries out `moves` in their order (the same on every rank): each sender packs all of its
// copies first (one it cannot read fails on every rank before a byte is sent); then one message
// pair per move (its size, then its bytes); each receiver places its copies only once all have
// arrived, so no sender is left waiting on a receiver that failed. Returns how many this rank
// placed.
int carry_out(Comm& comm, const std::vector<SweepRun>& runs, const std::vector<Move>& moves) {
  const int me = comm.rank();
  std::vector<std::string> packed(moves.size());
  on_every_rank(comm, [&] {
    for (size_t k = 0; k < moves.size(); ++k)
      if (moves[k].from == me) packed[k] = pack_tree(runs[moves[k].run].dir);
  });
  for (size_t k = 0; k < moves.size(); ++k) {
    uint64_t size = packed[k].size();
    if (moves[k].from == me) {
      comm.send(moves[k].to, std::as_bytes(std::span(&size, 1)));
      comm.send(moves[k].to, std::as_bytes(std::span(packed[k].data(), packed[k].size())));
      packed[k].clear();
    } else if (moves[k].to == me) {
      comm.recv(moves[k].from, std::as_writable_bytes(std::span(&size, 1)));
      packed[k].assign(size, '\0');
      comm.recv(moves[k].from,
                std::as_writable_bytes(std::span(packed[k].data(), packed[k].size())));
    }
  }
  int placed = 0;
  on_every_rank(comm, [&] {
    for (size_t k = 0; k < moves.size(); ++k) {
      if (moves[k].to != me) continue;
      const fs::path dir = runs[moves[k].run].dir;
      check_replaceable(dir);
      place_tree(packed[k], dir);
      ++placed;
    }
  });
  return placed;
}

}  // namespace

int gather_run_dirs(Comm& comm, const std::vector<SweepRun>& runs) {
  if (comm.size() == 1) return 0;
  const std::vector<json> told = trainers_copies(comm, runs);
  const std::vector<Move> moves = agree_on_moves(comm, [&] {
    std::vector<Move> wanted;  // in run order
    for (size_t i = 0; i < runs.size(); ++i) {
      const int r = static_cast<int>(trainer_of(i, comm));
      if (r == 0) continue;
      const std::string theirs = told[r].at(std::to_string(i)).get<std::string>();
      if (theirs.empty()) continue;  // nothing trained there to bring
      switch (compare_copies(run_json_text(runs[i].dir), theirs)) {
        case CopyOrder::same:  // a shared filesystem, or nothing trained since it came
          break;
        case CopyOrder::newer:
          wanted.push_back({i, r, 0});
          break;
        case CopyOrder::older:
          fail(
              "sweep: '{}' on rank 0's host has sessions that the copy {} trained lacks (trained "
              "on rank 0's host meanwhile?); move one of them away",
              runs[i].dir.string(), rank_name(comm, r));
        case CopyOrder::unrelated:
          fail(
              "sweep: '{}' on rank 0's host holds another run than the one {} trained there "
              "(neither run.json continues the other); move it away, or give the sweep a shared "
              "directory",
              runs[i].dir.string(), rank_name(comm, r));
      }
    }
    return wanted;
  });
  return carry_out(comm, runs, moves);
}

int send_run_dirs_to_trainers(Comm& comm, const std::vector<SweepRun>& runs) {
  if (comm.size() == 1) return 0;
  const std::vector<json> told = trainers_copies(comm, runs);
  const std::vector<Move> moves = agree_on_moves(comm, [&] {
    std::vector<Move> sent;
    for (size_t i = 0; i < runs.size(); ++i) {
      const int r = static_cast<int>(trainer_of(i, comm));
      if (r == 0) continue;
      const std::string theirs = told[r].at(std::to_string(i)).get<std::string>();
      switch (compare_copies(theirs, run_json_text(runs[i].dir))) {
        case CopyOrder::same:
        case CopyOrder::older:  // the trainer's own copy is the newer: it resumes that
          break;
        case CopyOrder::newer:
          sent.push_back({i, 0, r});
          break;
        case CopyOrder::unrelated:
          fail(
              "sweep: --resume: the copies of '{}' on rank 0's host and on {}'s went their own "
              "ways (neither run.json continues the other); keep the one to continue and move "
              "the other away",
              runs[i].dir.string(), rank_name(comm, r));
      }
    }
    return sent;
  });
  carry_out(comm, runs, moves);
  return comm.is_root() ? static_cast<int>(moves.size()) : 0;
}

}  // namespace headlab
