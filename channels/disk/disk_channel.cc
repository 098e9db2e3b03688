// The disk channel: the worker that issues a request's I/O on io_uring and
// completes it. How a request is cut into I/Os is in disk_request.h, the
// staging memory in staging.h, the files' owner in disk_file.h.
//
// 1. I/O is issued in ascending file order (Isometry §3.4: sequential
//    access), requests in arrival order, with up to queue_depth SQEs in
//    flight; a newly started request gets its first SQE before the oldest
//    fills the rest, so a request of millions of tiny I/Os (a layout change
//    forced onto the disk hop) cannot hold a small request back for its
//    whole duration. Short transfers are resubmitted for the remainder (switching
//    to the buffered fd where the remainder is unaligned), -EAGAIN/-EINTR
//    retried, an O_DIRECT -EINVAL retried on the buffered fd, a read that
//    returns 0 early fails as "file shorter than the instance", any other
//    error fails the request. A failed request issues nothing more, waits
//    for what is in flight, frees its staging and then completes.
// 2. A cancelled request (ChannelRequest::cancelled, with Interrupt())
//    ends like a failed one: not started, it completes at once; running,
//    after the I/Os in flight (each at most max_io_bytes) return.
//
// One worker thread owns the ring: it starts requests, prepares and submits
// SQEs, reaps completions and runs `done`. Submit() only queues and writes
// an eventfd that the worker keeps a read armed on, so the worker sleeps in
// io_uring_enter alone.
#include "channels/disk/disk_channel.h"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "channels/disk/direct_io.h"
#include "channels/disk/disk_request.h"
#include "channels/disk/staging.h"
#include "channels/disk/uring.h"
#include "channels/host_pages.h"
#include "core/rate_limiter.h"
#include "core/strings.h"
#include "core/thread_name.h"
#include "core/unique_fd.h"
#include "layout/executor.h"

namespace isometry {

namespace {

using disk::AlignDown;
using disk::Aligned;
using disk::AlignUp;
using disk::FileRun;
using disk::FileSpan;
using disk::Io;
using disk::kAlign;
using disk::Request;
using disk::StagingMemory;

constexpr int kMaxRetries = 1000;        // -EAGAIN / -EINTR per I/O
constexpr size_t kFixedFilesMinIos = 4;  // fewer I/Os: plain fds are cheaper
constexpr uint64_t kWakeTag = 1;         // user_data of the eventfd read
constexpr int kMaxIdlePasses = 4;        // see Run()

class DiskChannel final : public Channel {
 public:
  struct Parts {
    Uring ring;
    StagingMemory staging;
    UniqueFd wake;
    unsigned queue_depth;
    uint64_t max_io_bytes;
    int file_slots;  // fixed-file slot pairs, 0 if none
  };

  DiskChannel(const ChannelConfig& config, const DiskChannelOptions& options, Parts parts)
      : write_(config.kind == ChannelKind::kDiskWrite),
        prefix_(StrCat(ChannelKindName(config.kind), " '", config.name, "'")),
        queue_depth_(parts.queue_depth),
        max_io_bytes_(parts.max_io_bytes),
        hook_(options.io_hook),
        staging_(std::move(parts.staging)),
        wake_(std::move(parts.wake)),
        ring_(std::move(parts.ring)) {
    caps_.name = config.name;
    caps_.kind = config.kind;
    for (MemoryKind host : {MemoryKind::kSys, MemoryKind::kReg, MemoryKind::kZcm}) {
      if (write_) {
        caps_.memory_kinds.emplace_back(host, MemoryKind::kDsk);
      } else {
        caps_.memory_kinds.emplace_back(MemoryKind::kDsk, host);
      }
    }
    caps_.converts_layout = false;
    caps_.request_bytes = config.request_bytes;
    // Enough requests to keep the queue full with a spare one being set up.
    const uint64_t per_request =
        std::max<uint64_t>(1, (config.request_bytes + max_io_bytes_ - 1) / max_io_bytes_);
    caps_.max_in_flight = config.max_in_flight > 0
                              ? config.max_in_flight
                              : static_cast<int>(std::max<uint64_t>(
                                    2, (queue_depth_ + per_request - 1) / per_request + 1));
    caps_.rate_limit_bytes_per_s = config.rate_limit_bytes_per_s;
    if (config.rate_limit_bytes_per_s) {
      limiter_ = std::make_unique<RateLimiter>(config.rate_limit_bytes_per_s);
    }
    for (int i = 0; i < parts.file_slots; ++i) free_slots_.push_back(2 * i);
    description_ =
        StrCat(prefix_, ": ", ring_.info().Describe(), ", queue depth ", queue_depth_, ", max I/O ",
               max_io_bytes_ >> 10, " KiB, staging ", staging_.size() >> 10,
               " KiB (transparent huge pages: ", TransparentHugePageMode(), ")");
    worker_ = std::thread([this] {
      NameThisThread(StrCat("disk:", caps_.name));
      Run();
    });
  }

  ~DiskChannel() override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    Wake();
    worker_.join();
  }

  const ChannelCaps& caps() const override { return caps_; }
  const std::string& description() const { return description_; }

  void Interrupt() override { Wake(); }

  void Submit(ChannelRequest request, RequestDone done) override ABSL_LOCKS_EXCLUDED(mu_) {
    auto r = std::make_unique<Request>();
    r->req = std::move(request);
    r->done = std::move(done);
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(r));
    }
    Wake();
  }

 private:
  using Clock = std::chrono::steady_clock;

  void Wake() {
    const uint64_t one = 1;
    // Cannot fail short of a counter overflow (2^64 - 1 wake-ups).
    [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof one);
  }

  // ---- worker thread only from here on ----

  void ArmWake() {
    io_uring_sqe* sqe = ring_.GetSqe();  // the queue holds queue_depth + 1
    io_uring_prep_read(sqe, wake_.get(), &wake_buf_, sizeof wake_buf_, 0);
    io_uring_sqe_set_data64(sqe, kWakeTag);
  }

  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    ArmWake();
    while (true) {
      bool stopping;
      {
        absl::MutexLock lock(&mu_);
        while (!queue_.empty()) {
          pending_.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        stopping = stopping_;
      }
      // Finishing a request frees staging that a pending request may wait
      // for: go round again before sleeping, or that request sleeps until
      // an unrelated submission wakes the worker (issue #21: a disk read
      // stalled at its last chunk with the daemon idle).
      std::optional<Clock::time_point> wait_until;
      for (int pass = 0;; ++pass) {
        wait_until = StartRequests();
        Issue();
        const bool finished = FinishRequests();
        if (pending_.empty() || wait_until) break;
        if (!finished && in_flight_ > 0) break;  // a completion will wake us
        if (pass >= kMaxIdlePasses) {
          // Nothing in flight holds staging, yet the request cannot start:
          // a bookkeeping bug. Fail it loudly rather than hang.
          FailFront(Internal(prefix_, ": staging memory never became free for a request"));
        }
      }
      // Outstanding work is finished even while stopping: done() is owed.
      if (stopping && pending_.empty() && active_.empty()) return;
      int64_t timeout_ns = 0;
      if (wait_until) {
        timeout_ns = std::max<int64_t>(
            1, std::chrono::duration_cast<std::chrono::nanoseconds>(*wait_until - Clock::now())
                   .count());
      }
      if (Status s = ring_.SubmitAndWait(1, timeout_ns); !s.ok()) {
        // EBUSY/EAGAIN (kernel short of resources): reap, then try again.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      Reap();
    }
  }

  // Moves the front pending request to active with `why` and no I/O.
  void FailFront(Status why) {
    pending_.front()->status = std::move(why);
    active_.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }

  Status CancelledStatus() const {
    return absl::CancelledError(StrCat(prefix_, ": request cancelled"));
  }

  // Moves pending requests to active in arrival order. Returns when the
  // next may start under the rate limit, if that is what holds it back.
  std::optional<Clock::time_point> StartRequests() {
    // Cancelled requests leave the queue first: one waiting for staging
    // memory or the rate limit must not hold them back.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if ((*it)->req.Cancelled()) {
        (*it)->status = CancelledStatus();
        active_.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    while (!pending_.empty()) {
      Request& r = *pending_.front();
      if (limiter_ && Clock::now() < next_start_) return next_start_;
      if (!Prepare(r)) return std::nullopt;  // waits for staging memory
      if (limiter_ && r.req.program) next_start_ = limiter_->Reserve(r.req.program->bytes);
      active_.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    return std::nullopt;
  }

  // Validates `r` and cuts it into I/Os. Returns false only when it must
  // wait for staging memory; an invalid request gets its status and no I/O.
  bool Prepare(Request& r) {
    if (!ResolveEnds(r)) return true;
    const CopyProgram& p = *r.req.program;
    if (p.bytes == 0 || p.ops.empty()) return true;
    if (r.host == nullptr) {
      r.status =
          InvalidArgument(prefix_, ": request without a host ", write_ ? "source" : "destination");
      return true;
    }
    const std::optional<FileSpan> span = disk::FileSideSpan(p, write_);
    if (!span) return true;  // only empty ops
    if (span->lo < 0 || span->hi + r.file->offset > std::numeric_limits<int64_t>::max()) {
      r.status = InvalidArgument(
          prefix_, ": ", r.file->path, ": the request reaches ",
          span->lo < 0 ? "before the instance's first byte" : "past the largest file offset");
      return true;
    }
    const auto lo = static_cast<uint64_t>(span->lo);
    const auto bytes = static_cast<uint64_t>(span->hi - span->lo);
    const uint64_t file_lo = r.file->offset + lo;
    const uint64_t avg_run = p.bytes / std::max<uint64_t>(1, p.runs);
    // Reads may read the gaps of a nearly dense range; writes must cover
    // their range exactly (each byte once, so span == bytes means no gap).
    const bool dense = write_ ? bytes == p.bytes : bytes <= 2 * p.bytes;
    const uint64_t staged_bytes = AlignUp(file_lo + bytes) - AlignDown(file_lo);
    if (p.runs > 1 && avg_run < disk::kSmallRun && dense && staged_bytes <= staging_.size()) {
      if (!PrepareStaged(r, lo, file_lo, bytes, staged_bytes)) return false;
    } else if (!PrepareListed(r)) {
      return true;
    }
    AttachFixedFiles(r);
    return true;
  }

  // Sets r.file and r.host from the request's ends; false (with r.status
  // set) when they are not what this channel takes.
  bool ResolveEnds(Request& r) {
    if (!r.req.program) {
      r.status = InvalidArgument(prefix_, ": request without a program");
      return false;
    }
    const Endpoint& file_end = write_ ? r.req.dst : r.req.src;
    const Endpoint& host_end = write_ ? r.req.src : r.req.dst;
    const char* file_side = write_ ? "destination" : "source";
    const char* host_side = write_ ? "source" : "destination";
    auto file = EndpointAs<FileRange>(file_end, prefix_, file_side);
    auto host_bytes = EndpointAs<HostBytes>(host_end, prefix_, host_side);
    if (!file.ok() || !host_bytes.ok()) {
      r.status = file.ok() ? host_bytes.status() : file.status();
      return false;
    }
    r.file = *file;
    r.host = (*host_bytes)->base;  // never written for DiskWrite
    if (r.file->fd < 0) {
      r.status = FailedPrecondition(prefix_, ": request without an open ", file_side, " file",
                                    r.file->path.empty() ? "" : " ('" + r.file->path + "')");
      return false;
    }
    return true;
  }

  // A small-run program over a dense file range: the file bytes
  // [file_lo, file_lo + bytes) go through one piece of staging memory (`lo`
  // is file_lo relative to the instance). False while no piece is free.
  bool PrepareStaged(Request& r, uint64_t lo, uint64_t file_lo, uint64_t bytes,
                     uint64_t staged_bytes) {
    if (bounce_waiting_) return false;  // let bounced I/O get staging first
    const std::optional<uint64_t> off = staging_.Take(staged_bytes);
    if (!off) return false;
    r.staged = true;
    r.staging_offset = *off;
    r.staging_bytes = staged_bytes;
    r.staging_base = staging_.data() + *off + file_lo % kAlign;
    r.shifted = *r.req.program;
    for (CopyOp& op : r.shifted.ops) (write_ ? op.dst_offset : op.src_offset) -= lo;
    if (write_) ExecuteProgram(r.shifted, r.host, r.staging_base);
    disk::CutRun(r, {file_lo, r.staging_base, bytes}, /*in_staging=*/true, max_io_bytes_);
    return true;
  }

  // Large runs: I/O straight to host memory. False (with r.status set) when
  // the program is refused or the request is cancelled meanwhile.
  bool PrepareListed(Request& r) {
    const CopyProgram& p = *r.req.program;
    if (p.runs > disk::kMaxListedRuns) {
      r.status = InvalidArgument(prefix_, ": ", r.file->path, ": a program of ", p.runs,
                                 " small runs over a sparse file range; split the request");
      return false;
    }
    // Millions of runs take a while to list: a cancel is looked at
    // every kCancelCheckRuns of them (the latency promised in channel.h).
    std::optional<std::vector<FileRun>> runs =
        disk::ListRuns(p, write_, r.file->offset, r.host, r.req);
    if (!runs) {
      r.status = CancelledStatus();
      return false;
    }
    for (size_t i = 0; i < runs->size(); ++i) {
      if (i % disk::kCancelCheckRuns == disk::kCancelCheckRuns - 1 && r.req.Cancelled()) {
        r.ios.clear();
        r.status = CancelledStatus();
        return false;
      }
      disk::CutRun(r, (*runs)[i], /*in_staging=*/false, max_io_bytes_);
    }
    return true;
  }

  void AttachFixedFiles(Request& r) {
    if (r.ios.size() < kFixedFilesMinIos || free_slots_.empty()) return;
    const int slot = free_slots_.back();
    const int fds[2] = {r.file->fd, r.file->direct_fd};
    if (!ring_.UpdateFiles(static_cast<unsigned>(slot), fds, 2).ok()) return;
    free_slots_.pop_back();
    r.file_slot = slot;
  }

  void DetachFixedFiles(Request& r) {
    if (r.file_slot < 0) return;
    const int none[2] = {-1, -1};
    // Clearing drops the ring's reference to the file, so the caller's
    // close() really closes it (and a file system can be unmounted).
    if (ring_.UpdateFiles(static_cast<unsigned>(r.file_slot), none, 2).ok()) {
      free_slots_.push_back(r.file_slot);
    }
    r.file_slot = -1;
  }

  // Fills the queue from active requests, each in file order: first one
  // SQE for every request that has issued none yet (so a small request
  // never waits for another's whole request: one of millions of tiny I/Os
  // takes minutes), then the oldest first (sequential order for the rest).
  void Issue() {
    bounce_waiting_ = false;
    for (auto& rp : active_) {
      if (rp->next == 0) IssueFrom(*rp, 1);
    }
    for (auto& rp : active_) IssueFrom(*rp, queue_depth_);
  }

  // Queues up to `most` more SQEs of `r` while the ring has room.
  void IssueFrom(Request& r, unsigned most) {
    if (!r.failed() && r.req.Cancelled()) r.status = CancelledStatus();
    for (unsigned n = 0;
         n < most && !r.failed() && r.next < r.ios.size() && in_flight_ < queue_depth_; ++n) {
      Io& io = r.ios[r.next];
      if (io.bounce && io.mem == nullptr) {
        const std::optional<uint64_t> off = staging_.Take(io.length);
        if (!off) {
          bounce_waiting_ = true;
          return;  // later requests may still go: staging frees as they finish
        }
        io.staging_offset = *off;
        io.mem = staging_.data() + *off;
        io.in_staging = true;
        if (write_) std::memcpy(io.mem, io.host, io.length);
      }
      ++r.next;
      Queue(io);
    }
  }

  // Prepares an SQE for what is left of `io`.
  void Queue(Io& io) {
    Request& r = *io.owner;
    ++r.in_flight;
    ++in_flight_;
    const uint64_t off = io.file_offset + io.done;
    const uint64_t len = io.length - io.done;
    std::byte* mem = io.mem + io.done;
    if (io.direct && !(Aligned(off) && Aligned(len) && Aligned(mem))) io.direct = false;
    int fd = io.direct ? r.file->direct_fd : r.file->fd;
    if (r.file_slot >= 0) fd = r.file_slot + (io.direct ? 1 : 0);
    const bool fixed_buffer = io.in_staging && ring_.info().registered_buffer;
    io_uring_sqe* sqe = ring_.GetSqe();  // the queue holds queue_depth_ + 1
    if (sqe == nullptr) {                // only if a submit failed earlier
      (void)ring_.SubmitAndWait(0);
      sqe = ring_.GetSqe();
      if (sqe == nullptr) std::abort();  // an accounting bug, not a runtime condition
    }
    const auto n = static_cast<unsigned>(len);
    if (write_) {
      if (fixed_buffer) {
        io_uring_prep_write_fixed(sqe, fd, mem, n, off, 0);
      } else {
        io_uring_prep_write(sqe, fd, mem, n, off);
      }
    } else {
      if (fixed_buffer) {
        io_uring_prep_read_fixed(sqe, fd, mem, n, off, 0);
      } else {
        io_uring_prep_read(sqe, fd, mem, n, off);
      }
    }
    if (r.file_slot >= 0) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data(sqe, &io);
  }

  void Reap() {
    while (io_uring_cqe* cqe = ring_.PeekCqe()) {
      const uint64_t tag = cqe->user_data;
      Io* const io = static_cast<Io*>(io_uring_cqe_get_data(cqe));  // when not the wake tag
      const int res = cqe->res;
      ring_.MarkSeen(cqe);
      if (tag == kWakeTag) {
        ArmWake();
      } else {
        Complete(*io, res);
      }
    }
  }

  void Complete(Io& io, int res) {
    Request& r = *io.owner;
    --r.in_flight;
    --in_flight_;
    const uint64_t off = io.file_offset + io.done;
    const uint64_t len = io.length - io.done;
    if (hook_) {
      res = hook_({sequence_, write_, io.direct, off, len, &r.file->path, res});
    }
    ++sequence_;
    if (!r.failed()) {
      if ((res == -EAGAIN || res == -EINTR) && ++io.retries <= kMaxRetries) return Queue(io);
      if (res == -EINVAL && io.direct) {  // O_DIRECT refused after all: buffered
        io.direct = false;
        return Queue(io);
      }
      if (res < 0) {
        r.status = Status(absl::ErrnoToStatusCode(-res), Where(r, off, len, ErrnoString(-res)));
      } else if (res == 0) {
        r.status = write_
                       ? Internal(Where(r, off, len, "the write made no progress"))
                       : OutOfRange(Where(r, off, len,
                                          "end of file (the file is shorter than the instance)"));
      } else {
        io.done += std::min<uint64_t>(static_cast<uint64_t>(res), len);
        if (io.done < io.length) return Queue(io);  // short: the rest
        if (io.bounce && !write_) std::memcpy(io.host, io.mem, io.length);
      }
    }
    if (io.bounce && io.mem) {
      staging_.GiveBack(io.staging_offset, io.length);
      io.mem = nullptr;
    }
  }

  std::string Where(const Request& r, uint64_t off, uint64_t len, const std::string& cause) const {
    const std::string name = r.file->path.empty() ? StrCat("fd ", r.file->fd) : r.file->path;
    return StrCat(prefix_, ": ", name, " at offset ", off, " (+", len, "): ", cause);
  }

  // Completes finished requests; true if there was one.
  bool FinishRequests() {
    bool any = false;
    for (auto it = active_.begin(); it != active_.end();) {
      Request& r = **it;
      if (!r.finished()) {
        ++it;
        continue;
      }
      if (r.staged) {
        if (!write_ && !r.failed()) ExecuteProgram(r.shifted, r.staging_base, r.host);
        staging_.GiveBack(r.staging_offset, r.staging_bytes);
      }
      DetachFixedFiles(r);
      std::unique_ptr<Request> finished = std::move(*it);
      it = active_.erase(it);
      finished->done(std::move(finished->status));
      any = true;
    }
    return any;
  }

  // Constant after construction.
  ChannelCaps caps_;
  const bool write_;
  const std::string prefix_;  // "disk_read 'dsk0'"
  const unsigned queue_depth_;
  const uint64_t max_io_bytes_;
  const DiskIoHook hook_;
  std::string description_;
  std::unique_ptr<RateLimiter> limiter_;

  // The kernel may still touch these while the ring lives: declared before
  // ring_, so they are released after it.
  StagingMemory staging_;
  UniqueFd wake_;
  uint64_t wake_buf_ = 0;
  Uring ring_;

  absl::Mutex mu_;
  std::deque<std::unique_ptr<Request>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Worker thread only.
  std::deque<std::unique_ptr<Request>> pending_;
  std::list<std::unique_ptr<Request>> active_;
  std::vector<int> free_slots_;  // first slot of each free fixed-file pair
  unsigned in_flight_ = 0;       // SQEs, the eventfd read not counted
  uint64_t sequence_ = 0;
  bool bounce_waiting_ = false;
  Clock::time_point next_start_{};

  std::thread worker_;  // last: starts after everything above is built
};

}  // namespace

Result<std::unique_ptr<Channel>> MakeDiskChannel(const ChannelConfig& config) {
  return MakeDiskChannel(config, DiskChannelOptions{});
}

Result<std::unique_ptr<Channel>> MakeDiskChannel(const ChannelConfig& config,
                                                 const DiskChannelOptions& options) {
  if (config.kind != ChannelKind::kDiskRead && config.kind != ChannelKind::kDiskWrite) {
    return InvalidArgument("channel '", config.name, "' is not a disk channel");
  }
  const unsigned depth = options.queue_depth ? options.queue_depth : kDefaultQueueDepth;
  if (depth > 4096) {
    return InvalidArgument("channel '", config.name, "': queue depth ", depth, " is above 4096");
  }
  const uint64_t max_io = AlignDown(std::min<uint64_t>(options.max_io_bytes, 1ull << 30));
  if (max_io == 0) {
    return InvalidArgument("channel '", config.name, "': max_io_bytes must be at least 4096");
  }
  uint64_t staging = options.staging_bytes
                         ? options.staging_bytes
                         : std::max<uint64_t>(8ull << 20, 2 * config.request_bytes);
  staging = AlignUp(std::max(staging, 2 * max_io));

  ISO_ASSIGN_OR_RETURN(Uring ring, Uring::Create({.entries = depth + 1}));
  Result<StagingMemory> mapping = StagingMemory::Map(staging);
  if (!mapping.ok()) {
    return ResourceExhausted("channel '", config.name,
                             "': staging memory: ", mapping.status().message());
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC));  // blocking: io_uring polls it
  if (wake.get() < 0) {
    return Internal("channel '", config.name, "': eventfd: ", ErrnoString(errno));
  }
  // Registrations are optimisations: a refusal is noted in the description.
  if (options.register_buffers) (void)ring.RegisterBuffer(mapping->data(), mapping->size());
  int slot_pairs = 0;
  if (options.register_files) {
    const int requests = config.max_in_flight > 0 ? config.max_in_flight : 64;
    if (ring.RegisterFileTable(static_cast<unsigned>(2 * requests)).ok()) slot_pairs = requests;
  }
  DiskChannel::Parts parts{std::move(ring), *std::move(mapping), std::move(wake), depth,
                           max_io,          slot_pairs};
  return std::unique_ptr<Channel>(new DiskChannel(config, options, std::move(parts)));
}

std::string DescribeDiskChannel(const Channel& channel) {
  const auto* disk = dynamic_cast<const DiskChannel*>(&channel);
  return disk ? disk->description() : std::string();
}

}  // namespace isometry
