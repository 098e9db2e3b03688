#include "channels/request_stream.h"

#include <algorithm>

#include "absl/synchronization/mutex.h"

namespace isometry {

Result<uint64_t> StreamRequests(Channel& channel,
                                const std::function<ChannelRequest(uint64_t)>& make,
                                const std::function<bool(uint64_t)>& more) {
  const int depth = std::max(1, channel.caps().max_in_flight);
  // Shared with the completions, which run on the channel's threads.
  struct InFlight {
    absl::Mutex mu;
    absl::CondVar cv;
    int count ABSL_GUARDED_BY(mu) = 0;
    uint64_t done ABSL_GUARDED_BY(mu) = 0;
    Status failure ABSL_GUARDED_BY(mu);
  } f;
  absl::MutexLock lock(&f.mu);
  for (uint64_t k = 0; f.failure.ok() && more(k); ++k) {
    while (f.count >= depth) {
      f.cv.Wait(&f.mu);
    }
    ++f.count;
    f.mu.Unlock();  // Submit may complete at once, on another thread
    channel.Submit(make(k), [&f](const Status& s) {
      absl::MutexLock l(&f.mu);
      --f.count;
      ++f.done;
      if (!s.ok() && f.failure.ok()) {
        f.failure = s;
      }
      f.cv.SignalAll();
    });
    f.mu.Lock();
  }
  while (f.count > 0) {
    f.cv.Wait(&f.mu);
  }
  if (!f.failure.ok()) {
    return f.failure;
  }
  return f.done;
}

}  // namespace isometry
