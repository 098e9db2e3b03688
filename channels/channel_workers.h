// The request queue of a channel that runs requests on threads of its own
// (memcpy, cma), one per free thread: shared by weight between QoS classes
// and by priority within a class, in submission order among equals
// (core/fair_queue.h). The DMA worker issues by the same rule; this queue
// lets a request issued later pass those already queued, so a
// foreground class's request waits only for the ones running.
//
// The express lane: a request of at most kExpressRequestBytes waits in a
// queue of its own, which one more thread serves (and the others once
// their own queue is empty), so a small copy does not wait for a bulk
// request to end on a busy channel; the runtime issues one such request
// beyond max_in_flight (ChannelCaps::express).
//
// Shutdown: the destructor lets the threads finish every queued request
// (each owes its `done`), then joins them. A channel declares its
// ChannelWorkers last, so the threads stop before anything `serve` uses is
// destroyed.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "channels/channel.h"
#include "core/fair_queue.h"

namespace isometry {

class ChannelWorkers {
 public:
  // Runs `serve(request, done)` for each request, on one of `threads`
  // threads (or the express thread); `serve` must call `done` exactly once.
  using Serve = std::function<void(ChannelRequest&, RequestDone&)>;
  // `name` (the channel's) names the threads: "ch:NAME", "chx:NAME" for
  // the express one.
  ChannelWorkers(std::string_view name, int threads, Serve serve);
  ~ChannelWorkers();
  ChannelWorkers(const ChannelWorkers&) = delete;
  ChannelWorkers& operator=(const ChannelWorkers&) = delete;

  void Push(ChannelRequest request, RequestDone done) ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes every SleepUntil (a request's `cancelled` flag was set).
  void Interrupt() {
    cv_.SignalAll();
    express_cv_.SignalAll();
  }
  // For `serve`: waits until `deadline`, returning early when the channel
  // stops or `request` is cancelled (a paced copy's wait).
  void SleepUntil(absl::Time deadline, const ChannelRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Item {
    ChannelRequest request;
    RequestDone done;
  };
  // `express`: the express thread, which serves express_ only.
  void Run(bool express) ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWorkLocked(bool express) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !express_.empty() || (!express && !queue_.empty());
  }

  const Serve serve_;
  absl::Mutex mu_;
  absl::CondVar cv_;          // the threads (and SleepUntil)
  absl::CondVar express_cv_;  // the express thread
  FairQueue<Item> queue_ ABSL_GUARDED_BY(mu_);
  FairQueue<Item> express_ ABSL_GUARDED_BY(mu_);
  bool express_busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // last: started once the rest exists
};

}  // namespace isometry
