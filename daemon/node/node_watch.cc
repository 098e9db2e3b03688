// Active Access (issue #19, seed 004): the node's side. Owners watch
// regions of their pool allocations; copies whose destination (put) or
// source (get) touches one are finished by the allocation's WatchState
// (daemon/node/watch_state.h) before they complete.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/synchronization/notification.h"
#include "core/checked.h"
#include "core/log_escape.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/runtime/beneath.h"
#include "daemon/runtime/disk_endpoint.h"
#include "daemon/runtime/disk_memory.h"
#include "layout/datatype_form.h"

namespace isometry {
namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

// Past this many runs an end's touched bytes are taken as its whole
// storage (the scratch buffer then starts as a copy of it).
constexpr uint64_t kMaxExactRuns = uint64_t{1} << 16;

// What a put's scratch buffer is, for a refusal's message.
std::string ScratchWhat(const WatchState& w) {
  return StrCat("a put into watched allocation ", w.allocation(),
                " (its bytes wait in a scratch buffer until the watch applies them)");
}

void ExpandPiece(const FormPiece& p, int64_t base, Ranges& out) {
  const size_t depth = p.loops.size();
  std::vector<int64_t> idx(depth, 0);
  for (;;) {
    int64_t off = base + p.offset;
    for (size_t l = 0; l < depth; ++l) off += idx[l] * p.loops[l].stride;
    if (p.body.empty()) {
      out.emplace_back(static_cast<uint64_t>(off), static_cast<uint64_t>(off + p.run));
    } else {
      for (const FormPiece& b : p.body) ExpandPiece(b, off, out);
    }
    size_t l = depth;
    while (l > 0) {
      --l;
      if (++idx[l] < p.loops[l].count) break;
      idx[l] = 0;
      if (l == 0) return;
    }
    if (depth == 0) return;
  }
}

// The allocation bytes a copy end touches: its form's runs, exactly when
// there are few, else all of its storage (`exact` false). `box` is a
// layout end's; a form end moves its whole stream and ignores it.
Ranges TouchedRanges(const InstanceRef& ref, uint64_t instance_offset,
                     const std::optional<Box>& box, bool& exact) {
  exact = false;
  const uint64_t total = StorageBytes(ref);
  Ranges whole{{instance_offset, instance_offset + total}};
  // A layout end described by chunk has no form of its own: its box's.
  Result<CanonicalForm> form = !ref.form ? LayoutForm(ref.shape, box.value_or(ref.shape.bounds))
                               : ref.form->layout
                                   ? LayoutForm(ref.form->layout->shape, ref.form->layout->box)
                                   : Result<CanonicalForm>(ref.form->form);
  if (!form.ok() || form->runs() > kMaxExactRuns) return whole;
  Ranges out;
  for (const FormPiece& p : form->pieces) {
    ExpandPiece(p, static_cast<int64_t>(instance_offset), out);
  }
  exact = true;
  return active::MergeRanges(std::move(out));
}

}  // namespace

void ActiveCopy::Completed(Status s) {
  {
    absl::MutexLock lock(&mu_);
    completed_ = true;
    status_ = std::move(s);
    if (!registered_) return;
  }
  Start();
}

void ActiveCopy::Registered(uint64_t transfer) {
  get.source.transfer = transfer;
  put.source.transfer = transfer;
  {
    absl::MutexLock lock(&mu_);
    registered_ = true;
    if (!completed_) return;
  }
  Start();
}

void ActiveCopy::Start() {
  Status s;
  {
    absl::MutexLock lock(&mu_);
    s = status_;
  }
  if (!s.ok()) {
    finish(std::move(s));
    return;
  }
  if (!get_watch) {
    StartPut();
    return;
  }
  auto self = shared_from_this();
  get_watch->Enqueue(std::move(get), [self](Status gs) {
    if (!gs.ok()) {
      self->finish(std::move(gs));
    } else {
      self->StartPut();
    }
  });
}

void ActiveCopy::StartPut() {
  if (!put_watch) {
    finish(OkStatus());
    return;
  }
  auto self = shared_from_this();
  put_watch->Enqueue(std::move(put), [self](Status s) { self->finish(std::move(s)); });
}

Result<bool> RunActiveBytes(WatchState& w, active::Op op, uint64_t session, uint64_t offset,
                            std::string_view data, uint64_t length,
                            std::vector<std::shared_ptr<ByteBudget>> budgets) {
  const Ranges ranges{{offset, offset + length}};
  bool watched = false;
  ISO_RETURN_IF_ERROR(w.CheckAccess(op, ranges, watched));
  if (!watched) return false;
  ActiveAccess acc;
  acc.op = op;
  acc.ranges = ranges;
  acc.source.session = session;
  if (op == active::Op::kPut) {
    ISO_ASSIGN_OR_RETURN(acc.scratch_charge,
                         ByteBudget::Take(std::move(budgets), data.size(), ScratchWhat(w)));
    acc.scratch = std::make_unique<std::byte[]>(data.size());
    std::memcpy(acc.scratch.get(), data.data(), data.size());
    acc.scratch_base = offset;
  }
  absl::Notification done;
  Status status;
  w.Enqueue(std::move(acc), [&](Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  ISO_RETURN_IF_ERROR(status);
  return true;
}

namespace {

// A cross-node copy's watched end: the half's bytes go through the watch
// once its runtime copy has ended (a put's were landed in the access's
// scratch buffer).
class WatchedEnd final : public ActiveEnd {
 public:
  WatchedEnd(std::shared_ptr<WatchState> watch, ActiveAccess access)
      : watch_(std::move(watch)), access_(std::move(access)) {}
  void Finish(Status s, std::function<void(Status)> done) override {
    if (!s.ok()) {  // nothing is applied; the scratch buffer goes with us
      done(std::move(s));
      return;
    }
    watch_->Enqueue(std::move(access_), std::move(done));
  }

 private:
  std::shared_ptr<WatchState> watch_;
  ActiveAccess access_;
};

}  // namespace

Result<std::shared_ptr<ActiveEnd>> PrepareActiveEnd(
    const std::shared_ptr<WatchState>& watch, active::Op op, InstanceRef& local,
    uint64_t instance_offset, const std::optional<Box>& box, const AccessSource& source,
    std::vector<std::shared_ptr<ByteBudget>> budgets) {
  if (!watch) return std::shared_ptr<ActiveEnd>();
  bool exact = false;
  Ranges ranges = TouchedRanges(local, instance_offset, box, exact);
  bool watched = false;
  ISO_RETURN_IF_ERROR(watch->CheckAccess(op, ranges, watched));
  if (!watched) return std::shared_ptr<ActiveEnd>();
  ActiveAccess acc;
  acc.op = op;
  acc.ranges = std::move(ranges);
  acc.source = source;
  if (op == active::Op::kPut) {
    // As for a local put: the receiving half writes into scratch, which
    // starts as the storage where the touched runs are not known exactly.
    const uint64_t total = StorageBytes(local);
    ISO_ASSIGN_OR_RETURN(acc.scratch_charge,
                         ByteBudget::Take(std::move(budgets), total, ScratchWhat(*watch)));
    acc.scratch = std::make_unique<std::byte[]>(total);
    acc.scratch_base = instance_offset;
    if (!exact) std::memcpy(acc.scratch.get(), local.base, total);
    local.base = acc.scratch.get();
    local.capacity = total;
  }
  return std::shared_ptr<ActiveEnd>(std::make_shared<WatchedEnd>(watch, std::move(acc)));
}

Status Node::Impl::NoDistributedRankLocked(const Allocation& a, uint64_t begin,
                                           uint64_t end) const {
  for (const auto& [key, d] : distributed) {
    for (size_t r = 0; r < d->members.size(); ++r) {
      if (!d->members[r]) continue;
      auto it = instances.find(d->members[r]->instance);
      if (it == instances.end() || it->second.allocation.get() != &a) continue;
      const uint64_t first = it->second.offset;
      const uint64_t last = first + it->second.shape.total_bytes();
      if (first < end && begin < last) {
        return FailedPrecondition(
            "bytes [", first, ", ", last, ") of allocation ", a.id, " are rank ", r,
            " of distributed instance '", ForLog(d->name),
            "': redistributions do not run through watches, so they cannot be watched while "
            "the instance lasts");
      }
    }
  }
  return OkStatus();
}

Status Node::Impl::RankUnwatchedLocked(const Instance& in, std::optional<active::Op> op,
                                       const std::string& what) const {
  if (!in.allocation || !in.allocation->watch) return OkStatus();
  const Ranges span{{in.offset, in.offset + in.shape.total_bytes()}};
  bool watched = false;
  if (op) {
    ISO_RETURN_IF_ERROR(in.allocation->watch->CheckAccess(*op, span, watched));
  } else {
    watched = in.allocation->watch->Watches(span);
  }
  if (watched) {
    return FailedPrecondition(what, " lies in a watched region of allocation ", in.allocation->id,
                              ": redistributions do not run through watches (unwatch it, or "
                              "move those bytes with Copy, which applies the watch)");
  }
  return OkStatus();
}

Node::Impl::WatchedCount Node::Impl::WatchedLocked(const Session& s) const {
  WatchedCount n;
  for (uint64_t id : s.allocations) {
    auto it = allocations.find(id);
    if (it != allocations.end() && it->second->watch) {
      ++n.allocations;
      n.regions += it->second->watch->Report().regions.size();
    }
  }
  return n;
}

Result<std::shared_ptr<ActiveCopy>> Node::Impl::PrepareActiveLocked(
    const Instance* const ends[2], const std::optional<Box>& box, CopyRequest& request,
    uint64_t session, const std::array<std::shared_ptr<ByteBudget>, 2>& budgets) {
  std::shared_ptr<ActiveCopy> ac;
  InstanceRef* refs[2] = {&request.src, &request.dst};
  for (int i = 0; i < 2; ++i) {
    const Instance& in = *ends[i];
    if (!in.allocation || !in.allocation->watch) continue;
    const active::Op op = i == 0 ? active::Op::kGet : active::Op::kPut;
    bool exact = false;
    Ranges ranges = TouchedRanges(*refs[i], in.offset, box, exact);
    bool watched = false;
    ISO_RETURN_IF_ERROR(in.allocation->watch->CheckAccess(op, ranges, watched));
    if (!watched) continue;
    if (!ac) ac = std::make_shared<ActiveCopy>();
    ActiveAccess& acc = i == 0 ? ac->get : ac->put;
    acc.op = op;
    acc.ranges = std::move(ranges);
    acc.source.session = session;
    (i == 0 ? ac->get_watch : ac->put_watch) = in.allocation->watch;
    if (i == 1) {
      // The runtime writes into scratch; the watch applies it piece by
      // piece. Where the touched runs are not known exactly, scratch
      // starts as the storage so untouched bytes go back unchanged.
      const uint64_t total = StorageBytes(request.dst);
      ISO_ASSIGN_OR_RETURN(acc.scratch_charge,
                           ByteBudget::Take({budgets.begin(), budgets.end()}, total,
                                            ScratchWhat(*in.allocation->watch)));
      acc.scratch = std::make_unique<std::byte[]>(total);
      acc.scratch_base = in.offset;
      if (!exact) std::memcpy(acc.scratch.get(), request.dst.base, total);
      request.dst.base = acc.scratch.get();
      request.dst.capacity = total;
    }
  }
  return ac;
}

namespace {

// A file-log a refused Watch created (removed again by RemoveCreatedLog).
struct CreatedLog {
  std::shared_ptr<DiskMemory> disk;
  std::string file;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Unlinks the log file Watch created, if the name still names that file
// (beneath the DSK directory, like its creation).
void RemoveCreatedLog(const CreatedLog& c) {
  const size_t slash = c.file.rfind('/');
  const std::string base = slash == std::string::npos ? c.file : c.file.substr(slash + 1);
  UniqueFd parent;
  if (slash != std::string::npos) {
    Result<UniqueFd> dir =
        OpenBeneath(c.disk->dir_fd(), c.file.substr(0, slash), O_PATH | O_DIRECTORY, c.file);
    if (!dir.ok()) return;
    parent = *std::move(dir);
  }
  const int at = parent.valid() ? parent.get() : c.disk->dir_fd();
  struct stat st {};
  if (fstatat(at, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == c.dev &&
      st.st_ino == c.ino) {
    unlinkat(at, base.c_str(), 0);
  }
}

// Starts a file log in an empty file (its header), or checks that a
// non-empty one is a file log this daemon may go on (active/log_abi.h,
// FileLogHeader): appending entries to any other file would corrupt it.
Status StartFileLog(int fd, const struct stat& st, uint64_t allocation, const std::string& shown) {
  active::FileLogHeader h{};
  if (st.st_size == 0) {
    std::memcpy(h.magic, active::kFileLogMagic, sizeof h.magic);
    h.version = active::kFileLogVersion;
    h.entry_bytes = sizeof(active::LogEntry);
    h.allocation = allocation;
    if (::write(fd, &h, sizeof h) != static_cast<ssize_t>(sizeof h)) {
      return Internal(shown, ": writing the file log's header: ", ErrnoString(errno));
    }
    return OkStatus();
  }
  // The log's fd only appends: read the header through a second open.
  UniqueFd r(::open(StrCat("/proc/self/fd/", fd).c_str(), O_RDONLY | O_CLOEXEC));
  if (!r.valid() || ::pread(r.get(), &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) ||
      std::memcmp(h.magic, active::kFileLogMagic, sizeof h.magic) != 0) {
    return InvalidArgument(shown,
                           " is not an isometry file log (it does not start with the ISOFLOG "
                           "header): name a new file, or a log this daemon started");
  }
  if (h.entry_bytes != sizeof(active::LogEntry)) {
    return InvalidArgument(shown, " is a file log of version ", h.version, " with ", h.entry_bytes,
                           "-byte entries; this daemon writes version ", active::kFileLogVersion,
                           " (", sizeof(active::LogEntry), "-byte entries): name a new file");
  }
  return OkStatus();
}

}  // namespace

Result<WatchHandle> node::Watches::Watch(SessionRef session, const WatchSpec& spec) {
  const auto end = CheckedAdd(spec.offset, spec.bytes);
  if (!end) return InvalidArgument("watched range wraps past 2^64");
  RegionSpec rs;
  rs.region.begin = spec.offset;
  rs.region.end = *end;
  rs.region.action = spec.action;
  rs.region.handler = spec.handler;
  rs.region.tag = spec.tag;
  rs.region.log_data = spec.log_data;
  rs.region.value_bytes = spec.value_bytes;
  // A log file this call created goes again when the watch is refused.
  std::optional<CreatedLog> created;
  if (spec.handler == active::Handler::kFileLog) {
    std::optional<uid_t> as;  // whose file it may append to, as DSK copies
    {
      absl::MutexLock lock(&impl_->mu);
      ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
      as = s->creds.disk_uid();
    }
    // Opened before the lock (file I/O), confined beneath the DSK
    // directory like every DSK path.
    ISO_ASSIGN_OR_RETURN(std::shared_ptr<DiskMemory> disk,
                         impl_->runtime->FindDisk(spec.file_memory));
    // O_NONBLOCK: a FIFO planted under the name must not hang the open.
    const std::string shown = StrCat(spec.file_memory, ":", spec.file);
    constexpr int kFlags = O_WRONLY | O_APPEND | O_NONBLOCK;
    Result<UniqueFd> fd = OpenBeneath(disk->dir_fd(), spec.file, kFlags, shown);
    bool made = false;
    if (absl::IsNotFound(fd.status())) {
      fd = OpenBeneath(disk->dir_fd(), spec.file, kFlags | O_CREAT | O_EXCL, shown);
      made = fd.ok();
    }
    ISO_ASSIGN_OR_RETURN(rs.file, std::move(fd));
    struct stat st {};
    if (fstat(rs.file.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        (st.st_nlink > 1 && !disk->allow_hard_links())) {
      return PermissionDenied(shown, " is not a regular file with one link");
    }
    if (!made) ISO_RETURN_IF_ERROR(CheckDiskAccess(st, as, true, shown));
    if (Status s = StartFileLog(rs.file.get(), st, spec.allocation, shown); !s.ok()) {
      if (made) RemoveCreatedLog({disk, spec.file, st.st_dev, st.st_ino});
      return s;
    }
    if (made) created = CreatedLog{disk, spec.file, st.st_dev, st.st_ino};
  }
  Result<WatchHandle> out = impl_->AddWatch(session, spec, std::move(rs));
  if (!out.ok() && created) RemoveCreatedLog(*created);
  return out;
}

Result<WatchHandle> Node::Impl::AddWatch(SessionRef session, const WatchSpec& spec, RegionSpec rs) {
  const DaemonConfig& dc = config.daemon;
  absl::MutexLock lock(&mu);
  ISO_ASSIGN_OR_RETURN(Session * s, FindSession(session));
  auto it = allocations.find(spec.allocation);
  if (it == allocations.end()) return NotFound("no allocation ", spec.allocation);
  Allocation& a = *it->second;
  if (a.owner != s->id) {
    return PermissionDenied("allocation ", spec.allocation,
                            " belongs to another client: only its owner watches its regions");
  }
  if (a.mapped_by_others) {
    return FailedPrecondition("allocation ", spec.allocation,
                              " was mapped by another client (Map of a published allocation): "
                              "its stores bypass any watch and its mapping cannot be revoked; "
                              "watch an allocation no other client has mapped");
  }
  ISO_RETURN_IF_ERROR(NoDistributedRankLocked(a, rs.region.begin, rs.region.end));
  const WatchedCount held = WatchedLocked(*s);
  if (held.regions >= dc.max_watched_regions_per_session) {
    return ResourceExhausted("this session watches ", held.regions,
                             " regions; daemon.max_watched_regions_per_session is ",
                             dc.max_watched_regions_per_session);
  }
  const bool fresh = !a.watch;
  if (fresh) {
    // Each watched allocation has a worker thread: bounded per session
    // and on the node.
    if (held.allocations >= dc.max_watched_allocations_per_session) {
      return ResourceExhausted("this session watches regions of ", held.allocations,
                               " allocations; daemon.max_watched_allocations_per_session is ",
                               dc.max_watched_allocations_per_session,
                               " (each has a worker thread)");
    }
    if (watch_workers->load() >= dc.max_watch_threads) {
      return ResourceExhausted(watch_workers->load(),
                               " watched allocations on this node have a worker thread each; "
                               "daemon.max_watch_threads is ",
                               dc.max_watch_threads);
    }
    WatchOptions o;
    o.live_workers = watch_workers;
    o.log_bytes = spec.log_bytes != 0 ? spec.log_bytes : dc.access_log_bytes;
    if (o.log_bytes > dc.max_access_log_bytes) {
      return InvalidArgument("access log of ", o.log_bytes,
                             " bytes asked; daemon.max_access_log_bytes is ",
                             dc.max_access_log_bytes);
    }
    o.full =
        spec.full.value_or(dc.access_log_full == "fail" ? LogFullMode::kFail : LogFullMode::kBlock);
    o.block_limit = std::chrono::milliseconds(dc.access_log_block_ms);
    o.limits.max_regions = dc.max_watched_regions_per_session;
    ISO_ASSIGN_OR_RETURN(a.watch, WatchState::Create(a.id, s->id, a.shm.data(), a.shm.size(), o));
  }
  // The local socket hands the ring to the client, which reads it from
  // its mapping; the daemon's own reader must not read beside it.
  // (Readers open under mu as well: the answer holds until the end.)
  const bool handed = spec.maps_log && !a.watch->ReadByDaemon();
  if (spec.maps_log && !handed && rs.region.handler == active::Handler::kClient) {
    return InvalidArgument(
        "handler client over the local socket means this client maps and reads allocation ", a.id,
        "'s access log, but a ReadAccessLog stream reads it (one reader per log): take ",
        "the region's entries from that stream (Watch over gRPC), or cancel it first");
  }
  Result<uint64_t> id = a.watch->AddRegion(std::move(rs));
  if (!id.ok()) {
    if (fresh) {
      a.watch->Close("its first region was refused");
      a.watch.reset();
    }
    return id.status();
  }
  if (!handed || !a.watch->HandOutLog()) {
    return WatchHandle{*id, a.id, -1, a.watch->log_mapped_bytes(), -1};
  }
  return WatchHandle{*id, a.id, a.watch->log_fd(), a.watch->log_mapped_bytes(),
                     a.watch->event_fd()};
}

Status node::Watches::Unwatch(SessionRef session, uint64_t allocation, uint64_t region) {
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  auto it = impl_->allocations.find(allocation);
  if (it == impl_->allocations.end() || it->second->owner != s->id || !it->second->watch) {
    return NotFound("no watched region ", region, " on an allocation ", allocation,
                    " of this session");
  }
  Allocation& a = *it->second;
  ISO_RETURN_IF_ERROR(a.watch->RemoveRegion(region));
  if (a.watch->empty()) {
    a.watch->Close("its last region was unwatched");
    a.watch.reset();
  }
  return OkStatus();
}

Result<WatchReport> node::Watches::GetWatch(SessionRef session, uint64_t allocation) const {
  std::shared_ptr<WatchState> w;
  {
    absl::MutexLock lock(&impl_->mu);
    const Session* s = impl_->FindSessionOrNull(session);
    if (!s) return NotFound("no such session");
    auto it = impl_->allocations.find(allocation);
    if (it == impl_->allocations.end() || it->second->owner != s->id) {
      return PermissionDenied("allocation ", allocation,
                              " is not this session's: only its owner reads its watch");
    }
    w = it->second->watch;
  }
  if (!w) return NotFound("allocation ", allocation, " has no watched region");
  return w->Report();
}

Result<std::unique_ptr<WatchReader>> node::Watches::ReadAccessLog(SessionRef session,
                                                                  uint64_t allocation) {
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
  auto it = impl_->allocations.find(allocation);
  if (it == impl_->allocations.end() || it->second->owner != s->id) {
    return PermissionDenied("allocation ", allocation,
                            " is not this session's: only its owner reads its access log");
  }
  if (!it->second->watch) return NotFound("allocation ", allocation, " has no watched region");
  // Under mu: AddWatch decides on handing the ring out under it too.
  return it->second->watch->OpenReader();
}

Status node::Watches::ActiveFlush(SessionRef session, uint64_t allocation,
                                  std::chrono::milliseconds limit,
                                  std::function<void(Status)> done) {
  std::shared_ptr<WatchState> w;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
    ISO_ASSIGN_OR_RETURN(auto a, impl_->UsableAllocation(s->id, allocation));
    w = a->watch;
  }
  const auto cap = std::chrono::milliseconds(impl_->config.daemon.max_flush_ms);
  if (limit.count() <= 0 || limit > cap) limit = cap;
  if (!w) {
    done(OkStatus());
    return OkStatus();
  }
  w->Flush(limit, std::move(done));
  return OkStatus();
}

Result<std::vector<uint64_t>> node::Watches::DirtyPages(SessionRef session, uint64_t allocation,
                                                        bool clear) {
  std::shared_ptr<WatchState> w;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    auto it = impl_->allocations.find(allocation);
    if (it == impl_->allocations.end() || it->second->owner != s->id) {
      return PermissionDenied("allocation ", allocation, " is not this session's");
    }
    w = it->second->watch;
  }
  if (!w) return NotFound("allocation ", allocation, " has no watched region");
  return w->DirtyPages(clear);
}

std::vector<WatchReport> node::Watches::ListWatches() const {
  std::vector<std::shared_ptr<WatchState>> ws;
  {
    absl::MutexLock lock(&impl_->mu);
    for (const auto& [id, a] : impl_->allocations) {
      if (a->watch) ws.push_back(a->watch);
    }
  }
  std::vector<WatchReport> out;
  out.reserve(ws.size());
  for (const auto& w : ws) out.push_back(w->Report());
  return out;
}

}  // namespace isometry
