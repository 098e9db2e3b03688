#include "daemon/node/watch_state.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "core/strings.h"
#include "core/thread_name.h"

namespace isometry {
namespace {

using active::Effect;
using active::Handler;
using active::LogEntry;
using active::Op;
using active::Piece;
using active::Region;
using Clock = std::chrono::steady_clock;

constexpr uint64_t Pad8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// One piece of an access with a copy of its region (regions may be removed
// while the worker waits for log room).
struct OwnedPiece {
  uint64_t begin = 0, end = 0;
  std::optional<Region> region;
};

Status Errno(const char* what) { return Internal(what, ": ", ErrnoString(errno)); }

Status WriteAll(int fd, const void* data, size_t n, const char* what) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Errno(what);
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

uint64_t HashKey(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

// The seed's hashtable example: the region holds slots of
// {uint64 used, uint64 key, value_bytes value}, open addressing with
// linear probing; a put's data is (uint64 key, value) records.
Status HashInsert(std::byte* region, uint64_t region_bytes, uint32_t value_bytes,
                  std::string_view records, uint64_t& inserted) {
  const uint64_t rec = 8 + uint64_t{value_bytes};
  const uint64_t slot = 16 + uint64_t{value_bytes};
  const uint64_t slots = region_bytes / slot;
  if (slots == 0) {  // Watch refuses such regions; never divide by zero here
    return FailedPrecondition("hash_insert: the region's ", region_bytes, " bytes hold no ", slot,
                              "-byte slot");
  }
  if (records.size() % rec != 0) {
    return InvalidArgument("hash_insert: a put of ", records.size(),
                           " bytes is not a whole number of ", rec, "-byte (key, value) records");
  }
  for (uint64_t at = 0; at < records.size(); at += rec) {
    uint64_t key;
    std::memcpy(&key, records.data() + at, 8);
    const uint64_t home = HashKey(key) % slots;
    bool placed = false;
    for (uint64_t i = 0; i < slots && !placed; ++i) {
      std::byte* s = region + ((home + i) % slots) * slot;
      uint64_t used, k;
      std::memcpy(&used, s, 8);
      std::memcpy(&k, s + 8, 8);
      if (used != 0 && k != key) continue;
      const uint64_t one = 1;
      std::memcpy(s + 8, &key, 8);
      std::memcpy(s + 16, records.data() + at + 8, value_bytes);
      std::memcpy(s, &one, 8);
      placed = true;
    }
    if (!placed) {
      return ResourceExhausted("hash_insert: the hashtable's ", slots, " slots are full (key ", key,
                               " not inserted)");
    }
    ++inserted;
  }
  return OkStatus();
}

}  // namespace

Result<std::shared_ptr<WatchState>> WatchState::Create(uint64_t allocation, uint64_t owner_session,
                                                       std::byte* memory, uint64_t bytes,
                                                       const WatchOptions& options) {
  const uint64_t cap = options.log_bytes;
  if (cap < 4096 || (cap & (cap - 1)) != 0) {
    return InvalidArgument("access log size ", cap, " must be a power of two >= 4096");
  }
  ISO_ASSIGN_OR_RETURN(SharedMemory log,
                       SharedMemory::Create("isometry:access-log", active::LogBytes(cap), false));
  std::shared_ptr<WatchState> s(
      new WatchState(allocation, owner_session, memory, bytes, options, std::move(log)));
  if (!s->event_.valid()) return Errno("eventfd");
  // Detached: the last reference may be dropped on the worker itself.
  if (options.live_workers) options.live_workers->fetch_add(1);
  try {
    std::thread([s] {
      NameThisThread("iso-watch");
      s->Run();
    }).detach();
  } catch (const std::system_error& e) {
    if (options.live_workers) options.live_workers->fetch_sub(1);
    return ResourceExhausted("no thread for the watch of allocation ", allocation, ": ", e.what(),
                             " (the daemon is at its task limit: see TasksMax and "
                             "daemon.max_watch_threads)");
  }
  return s;
}

WatchState::WatchState(uint64_t allocation, uint64_t owner, std::byte* memory, uint64_t bytes,
                       WatchOptions options, SharedMemory log)
    : allocation_(allocation),
      owner_(owner),
      memory_(memory),
      bytes_(bytes),
      options_(std::move(options)),
      log_(std::move(log)),
      event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      writer_(log_.data(), options.log_bytes, allocation) {}

WatchState::~WatchState() = default;

Result<uint64_t> WatchState::AddRegion(RegionSpec spec) {
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::AbortedError(StrCat("the watch on allocation ", allocation_, " has ended"));
  }
  ISO_ASSIGN_OR_RETURN(uint64_t id, table_.Add(spec.region, bytes_, options_.limits));
  RegionState& rs = regions_[id];
  rs.stats.region = *table_.Find(id);
  rs.file = std::move(spec.file);
  if (spec.region.handler == Handler::kDirtyPages) {
    const uint64_t page = options_.limits.page_size;
    rs.dirty.assign((spec.region.end - spec.region.begin + page - 1) / page, false);
  }
  // The new region's pages were not tracked until now.
  ForgetDirtyBaseLocked(StrCat("region ", id, " was watched after it"));
  return id;
}

Status WatchState::RemoveRegion(uint64_t id) {
  absl::MutexLock lock(&mu_);
  ISO_RETURN_IF_ERROR(table_.Remove(id));
  regions_.erase(id);  // with its dirty pages
  ForgetDirtyBaseLocked(StrCat("region ", id, " was unwatched after it"));
  return OkStatus();
}

bool WatchState::empty() const {
  absl::MutexLock lock(&mu_);
  return table_.empty();
}

Status WatchState::CheckAccess(active::Op op,
                               const std::vector<std::pair<uint64_t, uint64_t>>& ranges,
                               bool& watched) {
  absl::MutexLock lock(&mu_);
  watched = false;
  for (const Piece& p : table_.SplitAll(ranges)) {
    if (!p.region) continue;
    watched = true;
    if (active::EffectOf(*p.region, op).deny) {
      ++regions_[p.region->id].stats.denied;
      return PermissionDenied(op == Op::kPut ? "put into" : "get from", " bytes [", p.begin, ", ",
                              p.end, ") of allocation ", allocation_, ": watched region ",
                              p.region->id, " denies it (its owner's action 'deny'); nothing of ",
                              "the copy was applied");
    }
  }
  return OkStatus();
}

bool WatchState::Watches(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) const {
  absl::MutexLock lock(&mu_);
  for (const Piece& p : table_.SplitAll(ranges)) {
    if (p.region) return true;
  }
  return false;
}

void WatchState::Enqueue(ActiveAccess access, std::function<void(Status)> done) {
  Status ended;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      ++pending_;
      jobs_.push_back(Job{std::move(access), std::move(done), {}});
      cv_.Signal();
      return;
    }
    ended = absl::AbortedError(StrCat("the watch on allocation ", allocation_,
                                      " ended before the access was applied: ", close_why_));
  }
  // The worker may have exited: answer here, nothing applied.
  done(std::move(ended));
}

void WatchState::Flush(std::chrono::milliseconds limit, std::function<void(Status)> done) {
  Status ended;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      jobs_.push_back(Job{std::nullopt, std::move(done), Clock::now() + limit});
      cv_.Signal();
      return;
    }
    ended =
        absl::AbortedError(StrCat("the watch on allocation ", allocation_, " ended: ", close_why_));
  }
  done(std::move(ended));
}

void WatchState::Close(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  close_why_ = why;
  cv_.SignalAll();
}

void WatchState::Wake() {
  const uint64_t one = 1;
  // EAGAIN: the counter is saturated, so the owner is awake anyway.
  [[maybe_unused]] const ssize_t n = ::write(event_.get(), &one, sizeof one);
  NotifyReader();
}

void WatchState::FireFlushes(std::vector<std::pair<std::function<void(Status)>, Status>>& out) {
  const uint64_t acked = writer_.Acknowledged();
  acked_ = acked;
  const auto now = Clock::now();
  for (auto it = flushes_.begin(); it != flushes_.end();) {
    if (closed_) {
      out.emplace_back(std::move(it->done),
                       absl::AbortedError(StrCat("the watch on allocation ", allocation_,
                                                 " ended: ", close_why_)));
    } else if (acked >= it->target) {
      out.emplace_back(std::move(it->done), OkStatus());
    } else if (now >= it->deadline) {
      out.emplace_back(std::move(it->done),
                       absl::DeadlineExceededError(StrCat(
                           "active flush of allocation ", allocation_, ": the owner acknowledged ",
                           acked, " of ", it->target, " log bytes in time")));
    } else {
      ++it;
      continue;
    }
    it = flushes_.erase(it);
  }
}

void WatchState::Run() {
  for (;;) {
    std::vector<std::pair<std::function<void(Status)>, Status>> calls;
    std::optional<Job> job;
    bool exit = false;
    {
      absl::MutexLock lock(&mu_);
      if (jobs_.empty() && !closed_) {
        if (flushes_.empty()) {
          cv_.Wait(&mu_);
        } else {
          cv_.WaitWithTimeout(&mu_, absl::Microseconds(200));
        }
      }
      FireFlushes(calls);
      if (!jobs_.empty()) {
        job = std::move(jobs_.front());
        jobs_.pop_front();
      } else if (closed_) {
        exit = true;
      }
    }
    for (auto& [cb, s] : calls) cb(s);
    if (job && job->access) {
      Status s = Apply(*job->access);
      --pending_;
      job->done(std::move(s));
    } else if (job) {
      absl::MutexLock lock(&mu_);
      flushes_.push_back({writer_.published(), job->flush_deadline, std::move(job->done)});
    }
    if (exit) {
      {
        absl::MutexLock lock(&reader_mu_);
        worker_exited_ = true;
      }
      NotifyReader();  // a reader sends what is left, then ends
      if (options_.live_workers) options_.live_workers->fetch_sub(1);
      return;
    }
  }
}

bool WatchState::WaitForRoom(uint64_t need) {
  const auto deadline = Clock::now() + options_.block_limit;
  while (writer_.Room() < need) {
    if (options_.full == LogFullMode::kFail || Clock::now() >= deadline) return false;
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    cv_.WaitWithTimeout(&mu_, absl::Microseconds(200));
  }
  acked_ = writer_.Acknowledged();
  return true;
}

Status WatchState::Append(LogEntry entry, std::string_view data, bool& waited) {
  const uint64_t need = Pad8(sizeof(LogEntry) + data.size());
  if (writer_.Room() < need + writer_.capacity() / 4) {
    // Streaming a log larger than the ring: let the owner read what is
    // there, then wait for room.
    writer_.Publish();
    published_ = writer_.published();
    Wake();
    waited = true;
    if (!WaitForRoom(need + writer_.capacity() / 4)) {
      return absl::DeadlineExceededError(StrCat("access log of allocation ", allocation_,
                                                " stayed full for ", options_.block_limit.count(),
                                                " ms while a copy logged more than the log holds; ",
                                                "entries up to seq ", writer_.next_seq() - 1,
                                                " were logged and the copy's bytes were applied"));
    }
  }
  if (!writer_.TryAppend(entry, data)) return Internal("access log append failed with room");
  ++entries_;
  return OkStatus();
}

Status WatchState::RunBuiltin(RegionState& rs, const Piece& p, const Effect& e,
                              const ActiveAccess& a, std::string_view data) {
  const Region& r = *p.region;
  switch (r.handler) {
    case Handler::kClient:
    case Handler::kCount:
      return OkStatus();
    case Handler::kDirtyPages: {
      if (a.op != Op::kPut || !e.apply) return OkStatus();
      const uint64_t page = options_.limits.page_size;
      for (uint64_t pg = (p.begin - r.begin) / page; pg * page < p.end - r.begin; ++pg) {
        if (!rs.dirty[pg]) ++rs.stats.dirty_pages;
        rs.dirty[pg] = true;
      }
      return OkStatus();
    }
    case Handler::kHashInsert:
      if (a.op != Op::kPut) return OkStatus();
      return HashInsert(memory_ + r.begin, r.end - r.begin, r.value_bytes, data, rs.stats.inserts);
    case Handler::kFileLog: {
      LogEntry entry{};
      entry.record_bytes = static_cast<uint32_t>(sizeof entry + (e.data ? data.size() : 0));
      entry.op =
          static_cast<uint16_t>(a.op == Op::kPut ? active::LogOp::kPut : active::LogOp::kGet);
      entry.flags = static_cast<uint16_t>((e.apply ? active::kLogApplied : 0) |
                                          (e.data ? active::kLogHasData : 0) |
                                          (e.notify ? active::kLogNotify : 0));
      entry.seq = ++rs.stats.entries;
      entry.offset = p.begin;
      entry.size = p.end - p.begin;
      entry.transfer = a.source.transfer;
      entry.region = r.id;
      entry.tag = r.tag;
      entry.source_session = a.source.session;
      entry.source_node = a.source.node;
      entry.data_bytes = e.data ? data.size() : 0;
      ISO_RETURN_IF_ERROR(WriteAll(rs.file.get(), &entry, sizeof entry, "file log write"));
      if (e.data) {
        ISO_RETURN_IF_ERROR(WriteAll(rs.file.get(), data.data(), data.size(), "file log write"));
      }
      return OkStatus();
    }
  }
  return OkStatus();
}

namespace {

// Log bytes the client-handled entries of `pieces` take.
uint64_t LogNeed(const std::vector<OwnedPiece>& pieces, Op op, uint64_t max_data) {
  uint64_t need = 0;
  for (const OwnedPiece& p : pieces) {
    if (!p.region || p.region->handler != Handler::kClient) continue;
    const Effect e = active::EffectOf(*p.region, op);
    if (!e.log) continue;
    if (!e.data) {
      need += Pad8(sizeof(LogEntry));
      continue;
    }
    for (uint64_t at = p.begin; at < p.end; at += max_data) {
      need += Pad8(sizeof(LogEntry) + std::min(max_data, p.end - at));
    }
  }
  return need;
}

}  // namespace

Status WatchState::Apply(ActiveAccess& a) {
  std::vector<OwnedPiece> pieces;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return absl::AbortedError(StrCat("the watch on allocation ", allocation_,
                                       " ended before the copy was applied: ", close_why_));
    }
    for (const Piece& p : table_.SplitAll(a.ranges)) {
      pieces.push_back(
          {p.begin, p.end, p.region ? std::optional<Region>(*p.region) : std::nullopt});
      if (p.region && active::EffectOf(*p.region, a.op).deny) {
        ++regions_[p.region->id].stats.denied;
        return PermissionDenied("bytes [", p.begin, ", ", p.end, ") of allocation ", allocation_,
                                ": watched region ", p.region->id,
                                " denies the access; nothing of the copy was applied");
      }
    }
  }
  const uint64_t cap = writer_.capacity();
  const uint64_t max_data = active::MaxRecordData(cap);
  const uint64_t need = LogNeed(pieces, a.op, max_data);
  const bool stream = need + cap / 4 > cap;
  if (need > 0 && !stream && !WaitForRoom(need + cap / 4)) {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) {
        return absl::AbortedError(StrCat("the watch on allocation ", allocation_, " ended while ",
                                         "the copy waited for log room (", close_why_,
                                         "); nothing of the copy was applied"));
      }
    }
    if (options_.full == LogFullMode::kFail) {
      return ResourceExhausted(
          "access log of allocation ", allocation_, " is full (", writer_.Room(), " of ", cap,
          " bytes free, ", need,
          " needed); the owner has not acknowledged its entries. Nothing of ",
          "the copy was applied (the watch fails copies when its log is full)");
    }
    return absl::DeadlineExceededError(StrCat(
        "access log of allocation ", allocation_, " stayed full for ", options_.block_limit.count(),
        " ms (", need, " bytes needed); nothing of the copy was applied"));
  }
  if (stream && options_.full == LogFullMode::kFail) {
    return ResourceExhausted("the copy would log ", need, " bytes into allocation ", allocation_,
                             "'s ", cap, "-byte access log, more than it can hold at once (the ",
                             "watch fails copies when its log is full); nothing was applied");
  }
  // The memory effect first: a handler woken by an entry finds it applied.
  for (const OwnedPiece& p : pieces) {
    const bool apply = !p.region || active::EffectOf(*p.region, a.op).apply;
    if (a.op == Op::kPut && apply) {
      std::memcpy(memory_ + p.begin, a.scratch.get() + (p.begin - a.scratch_base), p.end - p.begin);
    }
  }
  Status status;
  bool waited = false;
  for (const OwnedPiece& p : pieces) {
    if (!p.region || !status.ok()) continue;
    const Region& r = *p.region;
    const Effect e = active::EffectOf(r, a.op);
    const char* bytes =
        a.op == Op::kPut
            ? reinterpret_cast<const char*>(a.scratch.get() + (p.begin - a.scratch_base))
            : reinterpret_cast<const char*>(memory_ + p.begin);
    const std::string_view data(bytes, p.end - p.begin);
    {
      absl::MutexLock lock(&mu_);
      auto it = regions_.find(r.id);
      if (it != regions_.end()) {
        RegionStats& st = it->second.stats;
        ++(a.op == Op::kPut ? st.puts : st.gets);
        st.bytes += p.end - p.begin;
        const Piece piece{p.begin, p.end, &r};
        status = RunBuiltin(it->second, piece, e, a, data);
      }
    }
    if (r.handler != Handler::kClient || !e.log || !status.ok()) continue;
    LogEntry entry{};
    entry.op = static_cast<uint16_t>(a.op == Op::kPut ? active::LogOp::kPut : active::LogOp::kGet);
    entry.flags = static_cast<uint16_t>((e.apply ? active::kLogApplied : 0) |
                                        (e.data ? active::kLogHasData : 0) |
                                        (e.notify ? active::kLogNotify : 0));
    entry.transfer = a.source.transfer;
    entry.region = r.id;
    entry.tag = r.tag;
    entry.source_session = a.source.session;
    entry.source_node = a.source.node;
    const uint64_t step = e.data ? max_data : p.end - p.begin;
    for (uint64_t at = p.begin; at < p.end && status.ok(); at += step) {
      entry.offset = at;
      entry.size = std::min(step, p.end - at);
      status = Append(entry, e.data ? data.substr(at - p.begin, entry.size) : std::string_view(),
                      waited);
    }
  }
  writer_.Publish();
  published_ = writer_.published();
  if (need > 0) Wake();
  return status;
}

WatchReport WatchState::Report() const {
  WatchReport r;
  r.allocation = allocation_;
  r.owner_session = owner_;
  r.log_bytes = writer_.capacity();
  r.published = published_;
  r.acknowledged = acked_;
  r.entries = entries_;
  r.pending_copies = pending_;
  r.full_mode = options_.full == LogFullMode::kBlock ? "block" : "fail";
  absl::MutexLock lock(&mu_);
  for (const auto& [id, rs] : regions_) r.regions.push_back(rs.stats);
  return r;
}

}  // namespace isometry
