// Runs callbacks at deadlines on one thread (gRPC Wait timeouts). A
// callback must be quick; it never runs after the Timer is destroyed.
#pragma once

#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "core/thread_name.h"

namespace isometry {

class Timer {
 public:
  using Clock = std::chrono::steady_clock;
  Timer()
      : thread_([this] {
          NameThisThread("iso-timer");
          Run();
        }) {}
  ~Timer() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  void At(Clock::time_point when, std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      queue_.emplace(when, std::move(fn));
    }
    cv_.SignalAll();
  }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    while (std::function<void()> fn = NextDue()) fn();
  }

  // Blocks until a callback is due (returned, taken off the queue) or the
  // Timer stops (empty).
  std::function<void()> NextDue() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      if (queue_.empty()) {
        cv_.Wait(&mu_);
        continue;
      }
      auto first = queue_.begin();
      if (Clock::now() < first->first) {
        cv_.WaitWithTimeout(&mu_, absl::FromChrono(first->first - Clock::now()));
        continue;
      }
      std::function<void()> fn = std::move(first->second);
      queue_.erase(first);
      return fn;
    }
    return nullptr;
  }

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::multimap<Clock::time_point, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace isometry
