#include "channels/channel_workers.h"

#include <utility>

#include "core/thread_nice.h"

namespace isometry {

ChannelWorkers::ChannelWorkers(int threads, Serve serve) : serve_(std::move(serve)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

ChannelWorkers::~ChannelWorkers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

void ChannelWorkers::Push(ChannelRequest request, RequestDone done) {
  {
    absl::MutexLock lock(&mu_);
    // A high-priority copy's request, or a class's that was waiting for its
    // turn, waits only for those running, not for the queue the DMA worker
    // keeps filled. (The keys are read before `request` moves.)
    const uint32_t cls = request.qos_class;
    const uint32_t weight = request.qos_weight;
    const int priority = request.priority;
    const uint64_t bytes = request.program ? request.program->bytes : 0;
    queue_.Push(cls, weight, priority, bytes, Item{std::move(request), std::move(done)});
  }
  cv_.Signal();
}

void ChannelWorkers::SleepUntil(absl::Time deadline, const ChannelRequest& request) {
  absl::MutexLock lock(&mu_);
  while (!stopping_ && !request.Cancelled()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
}

void ChannelWorkers::Run() {
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      // Idle at the daemon's own nice value: the next request may be a
      // foreground one (core/thread_nice.h).
      if (queue_.empty()) SetThreadNice(0);
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      // Outstanding work is finished even while stopping: done() is owed.
      if (queue_.empty()) return;
      item = queue_.Pop();
    }
    SetThreadNice(item.request.qos_nice);
    serve_(item.request, item.done);
  }
}

}  // namespace isometry
