#include "tools/isoctl/watch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <thread>

#include "tools/isoctl/exit_codes.h"

namespace isometry::isoctl {

namespace {

std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void OnIsoctlStopSignal(int) { g_stop_requested.store(true); }

// "every 2 s", "every 0.5 s".
std::string Period(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "every %g s", seconds);
  return buf;
}

// health's verdicts are what a watched health shows, not why it stops.
bool IsVerdict(const Status& s) {
  const ExitCode code = ExitCodeOf(s);
  return code == kExitDegraded || code == kExitUnhealthy;
}

}  // namespace

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnIsoctlStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

std::atomic<bool>& StopFlag() { return g_stop_requested; }

void SleepUnlessStopped(std::chrono::milliseconds total) {
  const auto end = std::chrono::steady_clock::now() + total;
  while (!StopRequested() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), end - std::chrono::steady_clock::now()));
  }
}

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

Status RunWatch(Output& out, const std::string& title, const std::function<Status()>& print_once) {
  StopSignals signals;
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  const bool table = out.format == Format::kTable || out.format == Format::kWide;
  const auto period = std::chrono::milliseconds(static_cast<int64_t>(out.watch_s * 1000));
  Status last = OkStatus();
  for (int frame = 0; !StopRequested(); ++frame) {
    if (frame > 0) {
      SleepUnlessStopped(period);
      if (StopRequested()) break;
    }
    out.time = UtcStamp();
    if (table && tty) {
      // Home and clear, then the title, as watch(1) does.
      out.header = "\x1b[H\x1b[2J" + Period(out.watch_s) + ": " + title + "  " + out.time +
                   "  (Ctrl-C to quit)\n\n";
    } else if (table) {
      out.header = (frame > 0 ? "\n--- " : "--- ") + out.time + "\n";
    }
    last = print_once();
    if (!last.ok() && !IsVerdict(last)) {
      return last;
    }
  }
  return last;
}

}  // namespace isometry::isoctl
