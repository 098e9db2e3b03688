#include "channels/channel_workers.h"

#include <algorithm>
#include <utility>

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
    // Behind every queued request of its priority or higher, ahead of the
    // lower ones: a high-priority copy's request waits only for those
    // running, not for the queue the DMA worker keeps filled.
    auto at = std::find_if(queue_.begin(), queue_.end(),
                           [&](const Item& i) { return i.request.priority < request.priority; });
    queue_.insert(at, {std::move(request), std::move(done)});
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
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      // Outstanding work is finished even while stopping: done() is owed.
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    serve_(item.request, item.done);
  }
}

}  // namespace isometry
