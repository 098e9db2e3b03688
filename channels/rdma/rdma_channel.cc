#include "channels/rdma/rdma_channel.h"

#include <absl/synchronization/mutex.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <variant>
#include <vector>

#include "core/strings.h"
#include "core/thread_name.h"
#include "layout/executor.h"
#include "layout/program_span.h"

namespace isometry::rdma {
namespace {

// Whether the wire side of `p` (its dst when sending, src when
// receiving) is one run from offset 0: the chunk needs no gather/scatter.
bool OneRun(const CopyProgram& p, bool wire_is_dst) {
  if (p.ops.size() != 1 || p.ops[0].num_loops != 0) return false;
  return (wire_is_dst ? p.ops[0].dst_offset : p.ops[0].src_offset) == 0;
}

class RdmaChannelImpl final : public RdmaChannel {
 public:
  RdmaChannelImpl(const ChannelConfig& config, std::unique_ptr<Fabric> fabric, RingShape ring,
                  uint32_t qps, isometry::Channel* fallback,
                  const std::function<void(const Status&)>& on_error)
      : fabric_(std::move(fabric)),
        ring_(ring),
        fallback_(fallback),
        stream_(fabric_.get(), ring, qps, [this, on_error](const Status& s) {
          // The stream reset: every transfer routed now fails with `s`
          // (its requests still to come too) until it is unrouted.
          {
            absl::MutexLock lock(&mu_);
            for (auto& [transfer, route] : routes_) route.broken = s;
          }
          if (on_error) on_error(s);
        }) {
    caps_.name = config.name;
    caps_.kind = ChannelKind::kRemoteMemcpy;
    caps_.memory_kinds = {{MemoryKind::kSys, MemoryKind::kSys}};
    caps_.request_bytes = std::min<uint64_t>(config.request_bytes, ring.slot_bytes);
    caps_.max_in_flight = config.max_in_flight > 0 ? config.max_in_flight : (1 << 20);
    thread_ = std::thread([this] {
      NameThisThread(StrCat("rdma:", caps_.name));
      Run();
    });
  }

  ~RdmaChannelImpl() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  const ChannelCaps& caps() const override { return caps_; }

  Status Route(uint64_t transfer, const RdmaRoute& route) override {
    absl::MutexLock lock(&mu_);
    if (routes_.count(transfer) != 0 || tags_.count({route.tag, route.sending}) != 0) {
      return absl::AlreadyExistsError(StrCat("channel '", caps_.name, "': transfer ", transfer,
                                             " or tag ", route.tag, " is routed already"));
    }
    routes_[transfer] = Routed{route, OkStatus()};
    tags_.insert({route.tag, route.sending});
    inbox_.push_back([route](RdmaStream& s) {
      // Checked above; a failure here is the stream's reset racing it.
      (void)s.Open(route.tag, route.chunks, route.sending);
    });
    return OkStatus();
  }

  void Unroute(uint64_t transfer) override {
    absl::MutexLock lock(&mu_);
    auto it = routes_.find(transfer);
    if (it == routes_.end()) return;
    const RdmaRoute r = it->second.route;
    const bool broken = !it->second.broken.ok();
    routes_.erase(it);
    tags_.erase({r.tag, r.sending});
    if (!broken) inbox_.push_back([r](RdmaStream& s) { s.Close(r.tag, r.sending); });
  }

  void AwaitRoutes() override {
    auto applied = std::make_shared<std::promise<void>>();
    std::future<void> f = applied->get_future();
    Post([applied](RdmaStream&) { applied->set_value(); });
    f.wait();
  }

  void Submit(ChannelRequest request, RequestDone done) override {
    const bool sending = std::holds_alternative<NetHalf>(request.dst);
    Status ok = sending ? EndpointAs<HostBytes>(request.src, caps_.name, "source").status()
                        : EndpointAs<NetHalf>(request.src, caps_.name, "source").status();
    if (ok.ok() && !sending) {
      ok = EndpointAs<HostBytes>(request.dst, caps_.name, "destination").status();
    }
    const NetHalf* half =
        ok.ok() ? std::get_if<NetHalf>(sending ? &request.dst : &request.src) : nullptr;
    std::optional<RdmaRoute> route;
    if (half) {
      absl::MutexLock lock(&mu_);
      if (auto it = routes_.find(half->transfer); it != routes_.end()) {
        route = it->second.route;
        if (ok.ok()) ok = it->second.broken;
      }
    }
    if (ok.ok() && !route) {
      if (fallback_) return fallback_->Submit(std::move(request), std::move(done));
      ok = FailedPrecondition("channel '", caps_.name, "': transfer ", half->transfer,
                              " is not routed over RDMA and there is no fallback");
    }
    if (!ok.ok()) {
      Post([done = std::move(done), ok](RdmaStream&) { done(ok); });
      return;
    }
    if (sending) {
      PostSend(std::move(request), half->transfer, route->tag, half->chunk, std::move(done));
    } else {
      PostExpect(std::move(request), half->transfer, route->tag, half->chunk, std::move(done));
    }
  }

  void AbandonTransfer(uint64_t transfer, const Status& why) override {
    absl::MutexLock lock(&mu_);
    auto it = routes_.find(transfer);
    if (it == routes_.end()) {
      if (fallback_) fallback_->AbandonTransfer(transfer, why);
      return;
    }
    if (!it->second.broken.ok()) return;  // nothing of it is left in the stream
    const RdmaRoute r = it->second.route;
    inbox_.push_back([r, why](RdmaStream& s) { s.Abandon(r.tag, r.sending, why); });
  }

 private:
  void Post(std::function<void(RdmaStream&)> fn) {
    absl::MutexLock lock(&mu_);
    inbox_.push_back(std::move(fn));
  }

  // Why a request of `transfer` posted earlier must not reach the stream
  // now: its route broke (the link failed) or went meanwhile.
  Status RouteStatus(uint64_t transfer) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = routes_.find(transfer);
    if (it == routes_.end()) {
      return absl::CancelledError(
          StrCat("channel '", caps_.name, "': transfer ", transfer, " was unrouted"));
    }
    return it->second.broken;
  }

  void PostSend(ChannelRequest request, uint64_t transfer, uint32_t tag, uint64_t chunk,
                RequestDone done) {
    const CopyProgram& program = *request.program;
    const std::byte* src = std::get<HostBytes>(request.src).base;
    const uint64_t span = ProgramSpan(program, true);
    // Gathered into a buffer of its own unless it is one run already; the
    // buffer lives until the chunk's credit.
    auto staging = std::make_shared<std::vector<std::byte>>();
    const std::byte* data = src + (program.ops.empty() ? 0 : program.ops[0].src_offset);
    if (!OneRun(program, true)) {
      staging->resize(span);
      ExecuteProgram(program, src, staging->data());
      data = staging->data();
    }
    // Shared on the link by class weight, by priority within a class.
    const SendShare share{request.qos_class, request.qos_weight, request.priority};
    Post([this, transfer, tag, chunk, data, span, staging, share,
          done = std::move(done)](RdmaStream& s) mutable {
      if (Status r = RouteStatus(transfer); !r.ok()) return done(r);
      s.Send(
          tag, chunk, data, span, [staging, done = std::move(done)](const Status& st) { done(st); },
          share);
    });
  }

  void PostExpect(ChannelRequest request, uint64_t transfer, uint32_t tag, uint64_t chunk,
                  RequestDone done) {
    auto program = request.program;
    std::byte* dst = std::get<HostBytes>(request.dst).base;
    const uint64_t span = ProgramSpan(*program, false);
    auto land = [program, dst, span, chunk](const std::byte* data, uint64_t bytes) -> Status {
      if (bytes != span) {
        return absl::DataLossError(
            StrCat("RDMA chunk ", chunk, " has ", bytes, " bytes, expected ", span));
      }
      if (OneRun(*program, false)) {
        std::memcpy(dst + program->ops[0].dst_offset, data, bytes);
      } else {
        ExecuteProgram(*program, data, dst);
      }
      return OkStatus();
    };
    Post([this, transfer, tag, chunk, land = std::move(land),
          done = std::move(done)](RdmaStream& s) mutable {
      if (Status r = RouteStatus(transfer); !r.ok()) return done(r);
      s.Expect(tag, chunk, std::move(land),
               [done = std::move(done)](const Status& st) { done(st); });
    });
  }

  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !inbox_.empty(); }

  void Run() {
    std::deque<std::function<void(RdmaStream&)>> work;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stream_.idle()) {
          // Nothing in flight: sleep until there is work.
          mu_.AwaitWithTimeout(absl::Condition(this, &RdmaChannelImpl::ReadyLocked),
                               absl::Milliseconds(50));
        }
        if (stop_) return;
        work.swap(inbox_);
      }
      for (auto& fn : work) fn(stream_);
      work.clear();
      stream_.Progress();
      if (!stream_.idle()) std::this_thread::yield();  // completions come without a wake-up
    }
  }

  ChannelCaps caps_;
  const std::unique_ptr<Fabric> fabric_;
  const RingShape ring_;
  isometry::Channel* const fallback_;
  RdmaStream stream_;  // only on thread_
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void(RdmaStream&)>> inbox_ ABSL_GUARDED_BY(mu_);
  struct Routed {
    RdmaRoute route;
    Status broken;  // the link's error since the stream reset; OK before
  };
  std::map<uint64_t, Routed> routes_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<uint32_t, bool>> tags_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<RdmaChannel>> MakeRdmaChannel(
    const ChannelConfig& config, std::unique_ptr<Fabric> fabric, RingShape ring, uint32_t qps,
    isometry::Channel* fallback, const std::function<void(const Status&)>& on_error) {
  ISO_RETURN_IF_ERROR(ring.Validate());
  if (!fabric) return InvalidArgument("channel '", config.name, "': no RDMA fabric");
  return std::unique_ptr<RdmaChannel>(
      std::make_unique<RdmaChannelImpl>(config, std::move(fabric), ring, qps, fallback, on_error));
}

}  // namespace isometry::rdma
