#include "channels/memcpy/memcpy_channel.h"

#include <sched.h>

#include <memory>

#include "channels/channel_workers.h"
#include "core/rate_limiter.h"
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
    caps_.streams_stores = true;
    caps_.request_bytes = config.request_bytes;
    // Default: two requests per thread, so a thread that finishes one finds
    // the next queued instead of idling until the DMA worker (another
    // thread, on a machine with few cores maybe not running) hands it one.
    // A high-priority request then waits behind at most one more request
    // per thread.
    caps_.max_in_flight = config.max_in_flight > 0 ? config.max_in_flight : 2 * config.threads;
    caps_.threads = config.threads;
    caps_.express = true;      // ChannelWorkers
    caps_.queues_only = true;  // Submit: ChannelWorkers::Push
    caps_.rate_limit_bytes_per_s = config.rate_limit_bytes_per_s;
    caps_.runs_inline = config.rate_limit_bytes_per_s == 0;  // a cap must pace every byte
    if (config.rate_limit_bytes_per_s) {
      limiter_ = std::make_unique<RateLimiter>(config.rate_limit_bytes_per_s);
    }
    workers_ = std::make_unique<ChannelWorkers>(
        caps_.name, config.threads,
        [this](ChannelRequest& r, RequestDone& done) { Serve(r, done); });
  }

  const ChannelCaps& caps() const override { return caps_; }

  Status RunInline(const ChannelRequest& request) override {
    if (!caps_.runs_inline) return Channel::RunInline(request);
    return Copy(request);
  }

  void Interrupt() override { workers_->Interrupt(); }

  void Submit(ChannelRequest request, RequestDone done) override {
    workers_->Push(std::move(request), std::move(done));
  }

 private:
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

  // One request, on a worker thread.
  void Serve(const ChannelRequest& request, const RequestDone& done) {
    if (request.Cancelled()) {
      done(absl::CancelledError(StrCat("memcpy '", caps_.name, "': request cancelled")));
      return;
    }
    RateLimiter::Clock::time_point until{};
    if (limiter_) until = limiter_->Reserve(request.program->bytes);
    Status copied = Copy(request);
    const bool large = request.program->bytes >= kYieldAfterBytes;
    if (limiter_ && copied.ok()) {
      // Paced: the bytes are copied; the wait that follows ends early
      // when the request is cancelled (Interrupt) or the channel stops.
      workers_->SleepUntil(absl::Now() + absl::FromChrono(until - RateLimiter::Clock::now()),
                           request);
    }
    done(std::move(copied));
    // After a large request, the core goes to whoever else is runnable
    // before the next one: under EEVDF a thread woken on a core where copy
    // threads run waits for the running one's slice to end, and with no
    // other event that is the next scheduler tick (up to 4 ms at HZ 250).
    // With more copy threads than cores, a thread waiting for a
    // high-priority copy then wakes a tick late. A yield keeps this
    // thread's share over time (EEVDF only moves its deadline) and returns
    // at once when nobody waits; it costs far less than a 1 MiB copy
    // (figures: docs/benchmarks/design-measurements.md, "Memcpy channel").
    if (large) sched_yield();
  }

  static constexpr uint64_t kYieldAfterBytes = 1ull << 20;

  ChannelCaps caps_;  // constant after construction
  std::unique_ptr<RateLimiter> limiter_;
  std::unique_ptr<ChannelWorkers> workers_;  // last: its threads stop first
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
