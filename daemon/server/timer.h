// Runs callbacks at deadlines on one thread (gRPC Wait timeouts). A
// callback must be quick; it never runs after the Timer is destroyed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace isometry {

class Timer {
 public:
  using Clock = std::chrono::steady_clock;
  Timer() : thread_([this] { Run(); }) {}
  ~Timer() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void At(Clock::time_point when, std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      queue_.emplace(when, std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = queue_.begin();
      if (Clock::now() < first->first) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      std::function<void()> fn = std::move(first->second);
      queue_.erase(first);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                                          // guarded by mu_
  std::thread thread_;
};

}  // namespace isometry
