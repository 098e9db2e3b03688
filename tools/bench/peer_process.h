// Peer tools run as subprocesses for the benchmark's baselines (peers.cc):
// started as leaders of their own process groups with stdout and stderr
// captured, killed (the whole group) past a deadline, so a hung peer
// cannot hang the benchmark.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace isometry::bench {

using PeerClock = std::chrono::steady_clock;

// A peer step (a compile, a server and client pair, an MPI job) taking longer
// than this has hung.
constexpr std::chrono::seconds kPeerTimeout{60};

struct Command {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // "NAME=value", added to our environment
};

// A started process, leader of its own process group, whose stdout and
// stderr both go to the non-blocking pipe end `fd`.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

struct Outcome {
  bool timed_out = false;
  int status = 0;      // as from waitpid
  std::string output;  // stdout and stderr, interleaved
};

// "NAME=value ... argv..." as a shell would show it.
std::string Describe(const Command& c);
// The end of a peer's output, for an error message.
std::string Tail(const std::string& output);
// `name` found in PATH, as execvp would.
std::optional<std::string> FindInPath(const std::string& name);
// Starts `c`; nullopt with `error` set when it cannot.
std::optional<Child> Spawn(const Command& c, std::string* error);
// Whether `pid` has ended (reaped by this call or before).
bool Exited(pid_t pid);
// Collects `child`'s output until it exits, killing its group at `deadline`.
Outcome Finish(const Child& child, PeerClock::time_point deadline);
// Spawn, then Finish.
std::optional<Outcome> Run(const Command& c, PeerClock::time_point deadline, std::string* error);
// Why an outcome is a failure ("" when it exited 0).
std::string FailureOf(const Outcome& o);

}  // namespace isometry::bench
