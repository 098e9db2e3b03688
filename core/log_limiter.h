// Rate limit for log lines a client can trigger again and again.
//
// A client that keeps closing connections badly or keeps writing a ring
// tail ahead of its head would otherwise write one warning per attempt: a
// flood that hides everyone else's lines. LogLimiter lets at most
// `lines_per_interval` lines per key (a client: its uid, pid or name)
// through in each interval and counts the rest; the first line let through
// after a suppressed stretch carries that count, so the log says how many
// similar lines were dropped:
//
//   if (const LogLimiter::Verdict v = limiter.Allow(key); v.log) {
//     if (v.suppressed) spdlog::warn("client {}: suppressed {} similar lines", key, v.suppressed);
//     spdlog::warn(...);
//   }
//
// Thread-safe. Memory is bounded: at most `max_keys` keys are tracked; when
// more clients than that warn within one interval, the newcomers share one
// overflow key (they are limited together, never unlimited).
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace isometry {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  struct Verdict {
    bool log = false;         // write this line
    uint64_t suppressed = 0;  // lines of this key dropped before it (when log)
  };

  LogLimiter(size_t lines_per_interval, Clock::duration interval, size_t max_keys = 1024);

  // Counts one line for `key` at `now`.
  Verdict Allow(std::string_view key, Clock::time_point now = Clock::now())
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Window {
    Clock::time_point start;
    size_t lines = 0;         // let through in this window
    uint64_t suppressed = 0;  // dropped since the last line let through
  };

  const size_t lines_per_interval_;
  const Clock::duration interval_;
  const size_t max_keys_;
  absl::Mutex mu_;
  std::unordered_map<std::string, Window> windows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry
