#include "channels/channel_workers.h"

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
    queue_.push_back({std::move(request), std::move(done)});
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
