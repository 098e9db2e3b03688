// `isoctl top`: a refreshing view of channels and transfers in flight; the
// full screen (top_screen.h) on a terminal, else frames printed one after
// another.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include "tools/isoctl/commands.h"
#include "tools/isoctl/json.h"
#include "tools/isoctl/render.h"
#include "tools/isoctl/top_screen.h"

namespace isometry::isoctl {

namespace {

using Stub = v1::Isometry::Stub;

// Set from the signal handler; lock-free atomics are async-signal-safe.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void OnStopSignal(int) { g_stop.store(true); }

// SIGINT/SIGTERM end the loop instead of the process, for the duration of
// RunTop.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// Sleeps in short slices so that Ctrl-C ends the wait promptly.
void SleepUnlessStopped(std::chrono::milliseconds total) {
  const auto end = std::chrono::steady_clock::now() + total;
  while (!g_stop.load() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), end - std::chrono::steady_clock::now()));
  }
}

std::string Clock() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

// Now as RFC 3339 in UTC with milliseconds, e.g. 2026-12-02T07:41:03.250Z.
std::string UtcStamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count()));
  return buf;
}

}  // namespace

Status RunTop(DaemonClient& client, const Output& out, const TopArgs& args) {
  StopSignals signals;
  if (!out.json && !args.once && FullScreenPossible()) {
    if (std::optional<Status> s = RunTopScreen(client, args, g_stop)) {
      return *s;
    }
    // curses does not know this terminal: frames, as on a pipe.
  }
  const bool tty = !out.json && !args.once && ::isatty(STDOUT_FILENO);
  const int iterations = args.once ? 1 : args.iterations;
  for (int i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) {
      SleepUnlessStopped(std::chrono::milliseconds(args.interval_ms));
    }
    if (g_stop.load()) {
      break;
    }
    v1::StatusResponse status;
    v1::ListChannelsResponse channels;
    v1::ListTransfersResponse transfers;
    ISO_RETURN_IF_ERROR(client.Call(&Stub::GetStatus, v1::StatusRequest(), &status));
    ISO_RETURN_IF_ERROR(client.Call(&Stub::ListChannels, v1::ListChannelsRequest(), &channels));
    ISO_RETURN_IF_ERROR(client.Call(&Stub::ListTransfers, v1::ListTransfersRequest(), &transfers));
    if (out.json) {
      // One JSON Lines document a frame, stamped, so a consumer can plot it.
      const Json frame = {{"time", UtcStamp()},
                          {"status", ToJsonValue(status)},
                          {"channels", ToJsonValue(channels)["channels"]},
                          {"transfers", ToJsonValue(transfers)["transfers"]}};
      ISO_RETURN_IF_ERROR(PrintJson(frame, JsonStyle::kLine));
      continue;
    }
    // The whole frame is written at once, so a redraw does not flicker.
    std::string frame = tty ? "\x1b[H\x1b[2J" : (i > 0 ? "\n" : "");
    frame += "--- " + Clock() + "  unix:" + client.socket() + "  every " +
             std::to_string(args.interval_ms) + " ms" + (tty ? "  (Ctrl-C to quit)" : "") + "\n";
    frame += RenderStatusLine(status) + "\n";
    frame += RenderChannels(channels) + "\n";
    frame += RenderTransfers(transfers);
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
  }
  return OkStatus();
}

}  // namespace isometry::isoctl
