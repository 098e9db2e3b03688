// --watch on listings, and the stop signals `top` shares: a listing is
// printed again every period until SIGINT or SIGTERM.
#pragma once

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <string>

#include "core/status.h"
#include "tools/isoctl/output.h"

namespace isometry::isoctl {

// While one lives, SIGINT and SIGTERM set StopRequested() instead of ending
// the process; the old handlers come back when it dies. One at a time.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// The flag the handlers set (async-signal-safe: lock-free).
std::atomic<bool>& StopFlag();
inline bool StopRequested() { return StopFlag().load(); }

// Sleeps in short slices so that a stop signal ends the wait promptly.
void SleepUnlessStopped(std::chrono::milliseconds total);

// Now as RFC 3339 in UTC with milliseconds, e.g. 2026-12-02T07:41:03.250Z.
std::string UtcStamp();

// Runs `print_once` every out.watch_s seconds until a stop signal, each
// frame with out.time set, and out.header: on a terminal a clear screen
// and a title line, else (after the first frame) a blank line, then a
// "--- TIME" line. A frame that fails ends the watch with its error, except
// `health`'s verdicts (degraded, unhealthy), which are frames like any
// other: the last one is returned when the watch stops, so the exit code
// is the last frame's. OK when stopped after frames that succeeded.
Status RunWatch(Output& out, const std::string& title, const std::function<Status()>& print_once);

}  // namespace isometry::isoctl
