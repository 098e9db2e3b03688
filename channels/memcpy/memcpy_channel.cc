#include "channels/memcpy/memcpy_channel.h"

#include <deque>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "channels/rate_limiter.h"
#include "layout/executor.h"

namespace isometry {

namespace {

class MemcpyChannel final : public Channel {
 public:
  explicit MemcpyChannel(const ChannelConfig& config) {
    caps_.name = config.name;
    caps_.kind = ChannelKind::kMemcpy;
    for (MemoryKind a : {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm}) {
      for (MemoryKind b : {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm}) {
        caps_.memory_kinds.emplace_back(a, b);
      }
    }
    caps_.converts_layout = true;
    caps_.request_bytes = config.request_bytes;
    // Default: two requests per thread, so a thread that finishes one finds
    // the next queued instead of idling until the DMA worker (another
    // thread, on a machine with few cores maybe not running) hands it one.
    // A high-priority request then waits behind at most one more request
    // per thread.
    caps_.max_in_flight = config.max_in_flight > 0 ? config.max_in_flight : 2 * config.threads;
    caps_.rate_limit_bytes_per_s = config.rate_limit_bytes_per_s;
    caps_.runs_inline = config.rate_limit_bytes_per_s == 0;  // a cap must pace every byte
    if (config.rate_limit_bytes_per_s) {
      limiter_ = std::make_unique<RateLimiter>(config.rate_limit_bytes_per_s);
    }
    for (int i = 0; i < config.threads; ++i) threads_.emplace_back([this] { Run(); });
  }

  ~MemcpyChannel() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    for (std::thread& t : threads_) t.join();
  }

  const ChannelCaps& caps() const override { return caps_; }

  Status RunInline(const ChannelRequest& request) override {
    if (!caps_.runs_inline) return Channel::RunInline(request);
    return Copy(request);
  }

  void Interrupt() override { cv_.SignalAll(); }

  void Submit(ChannelRequest request, RequestDone done) override {
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back({std::move(request), std::move(done)});
    }
    cv_.Signal();
  }

 private:
  struct Item {
    ChannelRequest request;
    RequestDone done;
  };

  // Host memory to host memory, nothing else.
  Status Copy(const ChannelRequest& request) const {
    ISO_ASSIGN_OR_RETURN(const HostBytes* src,
                         EndpointAs<HostBytes>(request.src, caps_.name, "source"));
    ISO_ASSIGN_OR_RETURN(const HostBytes* dst,
                         EndpointAs<HostBytes>(request.dst, caps_.name, "destination"));
    ExecuteProgram(*request.program, src->base, dst->base,
                   request.stream_stores ? Stores::kStreaming : Stores::kCached);
    return OkStatus();
  }

  void Run() {
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
      if (item.request.Cancelled()) {
        item.done(absl::CancelledError(StrCat("memcpy '", caps_.name, "': request cancelled")));
        continue;
      }
      RateLimiter::Clock::time_point until{};
      if (limiter_) until = limiter_->Reserve(item.request.program->bytes);
      Status copied = Copy(item.request);
      if (limiter_ && copied.ok()) {
        // Paced: the bytes are copied; the wait that follows ends early
        // when the request is cancelled (Interrupt) or the channel stops.
        const absl::Time deadline =
            absl::Now() + absl::FromChrono(until - RateLimiter::Clock::now());
        absl::MutexLock lock(&mu_);
        while (!stopping_ && !item.request.Cancelled()) {
          if (cv_.WaitWithDeadline(&mu_, deadline)) break;
        }
      }
      item.done(std::move(copied));
    }
  }

  ChannelCaps caps_;  // constant after construction
  std::unique_ptr<RateLimiter> limiter_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace

Result<std::unique_ptr<Channel>> MakeMemcpyChannel(const ChannelConfig& config) {
  if (config.kind != ChannelKind::kMemcpy) {
    return InvalidArgument("channel '", config.name, "' is not a memcpy channel");
  }
  if (config.threads < 1) {
    return InvalidArgument("channel '", config.name, "' needs at least one thread");
  }
  return std::unique_ptr<Channel>(new MemcpyChannel(config));
}

}  // namespace isometry
