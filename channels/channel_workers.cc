#include "channels/channel_workers.h"

#include <optional>
#include <utility>

#include "core/cpu_claims.h"
#include "core/strings.h"
#include "core/thread_name.h"
#include "core/thread_nice.h"
#include "core/thread_slice.h"

namespace isometry {

ChannelWorkers::ChannelWorkers(std::string_view name, int threads, Serve serve)
    : serve_(std::move(serve)) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, n = StrCat("ch:", name)] {
      NameThisThread(n);
      Run(false);
    });
  }
  threads_.emplace_back([this, n = StrCat("chx:", name)] {
    NameThisThread(n);
    RequestShortSlice();
    Run(true);
  });
}

ChannelWorkers::~ChannelWorkers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  express_cv_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

void ChannelWorkers::Push(ChannelRequest request, RequestDone done) {
  bool express = false;
  bool wake_express = false;
  {
    absl::MutexLock lock(&mu_);
    // A high-priority copy's request, or a class's that was waiting for its
    // turn, waits only for those running, not for the queue the DMA worker
    // keeps filled. (The keys are read before `request` moves.)
    const uint32_t cls = request.qos_class;
    const uint32_t weight = request.qos_weight;
    const int priority = request.priority;
    const uint64_t bytes = request.program ? request.program->bytes : 0;
    express = bytes <= kExpressRequestBytes;
    wake_express = express && !express_busy_;
    (express ? express_ : queue_)
        .Push(cls, weight, priority, bytes, Item{std::move(request), std::move(done)});
  }
  // A small request while the express thread is busy: an idle thread may
  // take it.
  (wake_express ? express_cv_ : cv_).Signal();
}

void ChannelWorkers::SleepUntil(absl::Time deadline, const ChannelRequest& request) {
  // Called from serve_, which holds a claim unless it runs under
  // SCHED_IDLE (Run): that claim, if any, sleeps.
  std::optional<CpuClaim::Paused> asleep;
  if (!ThreadRunsIdle()) asleep.emplace();
  absl::MutexLock lock(&mu_);
  while (!stopping_ && !request.Cancelled()) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
}

void ChannelWorkers::Run(bool express) {
  absl::CondVar& cv = express ? express_cv_ : cv_;
  while (true) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      if (express) express_busy_ = false;
      while (!stopping_ && !HasWorkLocked(express)) cv.Wait(&mu_);
      // Outstanding work is finished even while stopping: done() is owed.
      if (!HasWorkLocked(express)) return;
      // The others take their own queue first: bulk requests keep going,
      // and the express thread is there for the small ones.
      item = !express && !queue_.empty() ? queue_.Pop() : express_.Pop();
      if (express) express_busy_ = true;
    }
    SetThreadNice(item.request.qos_nice);
    // Work under SCHED_IDLE holds no CPU: any thread that wakes takes it,
    // so the ring thread may keep polling beside it (core/cpu_claims.h).
    std::optional<CpuClaim> claim;
    if (!ThreadRunsIdle()) claim.emplace();
    // The class's value for the bytes only: reporting them done takes the
    // runtime's locks, which no thread holds at a lowered value
    // (core/thread_nice.h).
    RequestDone done = [&item](Status s) {
      SetThreadNice(0);
      item.done(std::move(s));
    };
    serve_(item.request, done);
    SetThreadNice(0);  // a `serve` that handed `done` on
  }
}

}  // namespace isometry
