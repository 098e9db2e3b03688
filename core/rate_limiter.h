// Paces a channel or a peer link to a bandwidth cap (operator QoS, and a
// way to make hops behave like different hardware). Reservation based:
// each request books bytes/rate seconds of the sender's time line, so
// several worker threads together stay under the cap.
#pragma once

#include <chrono>
#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace isometry {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(uint64_t bytes_per_s) : bytes_per_s_(bytes_per_s) {}

  // Books `bytes` and returns the time point at which the booking ends; the
  // caller does its work and then sleeps until that point. Idle time is not
  // banked: a request never starts earlier than now.
  Clock::time_point Reserve(uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    if (next_ < now) next_ = now;
    next_ += std::chrono::nanoseconds(
        static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / static_cast<double>(bytes_per_s_)));
    return next_;
  }

 private:
  const uint64_t bytes_per_s_;
  absl::Mutex mu_;
  Clock::time_point next_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace isometry
