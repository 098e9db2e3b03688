#include "core/log_limiter.h"

namespace isometry {

namespace {
// Shared by keys that arrive while the table is full of live windows.
constexpr std::string_view kOverflowKey = "\x01overflow";
}  // namespace

LogLimiter::LogLimiter(size_t lines_per_interval, Clock::duration interval, size_t max_keys)
    : lines_per_interval_(lines_per_interval),
      interval_(interval),
      max_keys_(max_keys < 1 ? 1 : max_keys) {}

LogLimiter::Verdict LogLimiter::Allow(std::string_view key, Clock::time_point now) {
  absl::MutexLock lock(&mu_);
  auto it = windows_.find(std::string(key));
  if (it == windows_.end()) {
    if (windows_.size() >= max_keys_) {
      // Forget windows that ended with nothing left to report.
      for (auto w = windows_.begin(); w != windows_.end();) {
        const bool idle = now - w->second.start >= interval_ && w->second.suppressed == 0;
        w = idle ? windows_.erase(w) : std::next(w);
      }
    }
    const std::string_view slot = windows_.size() < max_keys_ ? key : kOverflowKey;
    it = windows_.try_emplace(std::string(slot), Window{now}).first;
  }
  Window& w = it->second;
  if (now - w.start >= interval_) {
    w.start = now;
    w.lines = 0;
  }
  if (w.lines >= lines_per_interval_) {
    ++w.suppressed;
    return {};
  }
  ++w.lines;
  Verdict v{true, w.suppressed};
  w.suppressed = 0;
  return v;
}

}  // namespace isometry
