#include "daemon/node/node.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <set>

#include "channels/channel_factory.h"
#include "channels/host_pages.h"
#include "core/checked.h"
#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "core/random.h"
#include "core/strings.h"
#include "daemon/node/shared_memory.h"
#include "daemon/runtime/disk_endpoint.h"

namespace isometry {

namespace {

using Clock = std::chrono::steady_clock;

// Client pool of one memory. `used` is atomic because allocations are
// released by whichever thread drops the last reference (a transfer's
// completion, possibly), never under the node lock.
struct PoolAccount {
  size_t memory = 0;  // index into the runtime's memories
  std::string name;
  uint64_t capacity = 0;
  uint64_t quota = 0;
  bool hugetlb = false;
  std::atomic<bool> hugetlb_warned{false};
  std::atomic<uint64_t> used{0};

  bool TryTake(uint64_t bytes) {
    uint64_t cur = used.load();
    do {
      if (bytes > capacity - cur) return false;
    } while (!used.compare_exchange_weak(cur, cur + bytes));
    return true;
  }
};

struct Allocation {
  uint64_t id = 0;
  uint64_t owner = 0;      // session number; 0 once published and its owner left
  int64_t owner_uid = -1;  // the publisher's uid (-1: not known)
  std::shared_ptr<PoolAccount> pool;
  SharedMemory shm;
  bool published = false;  // guarded by the node lock
  ~Allocation() {
    if (pool) pool->used -= shm.size();
  }
};

struct Instance {
  uint64_t id = 0;
  uint64_t session = 0;
  std::shared_ptr<Allocation> allocation;  // null for DSK instances
  uint64_t offset = 0;
  InstanceShape shape;
  size_t disk_memory = 0;   // DSK instances: the memory's index
  std::string file;         // DSK instances: relative path
  std::string remote_node;  // another node's instance (spec in remote_*)
  uint64_t remote_allocation = 0;
  std::string remote_memory;
};

struct TransferRecord {
  uint64_t id = 0;
  SessionOwner owner;                    // owner.session is the session's number
  std::optional<Transfer> handle;        // set once the runtime accepted it
  std::shared_ptr<CrossTransfer> cross;  // or: a cross-node copy this node started
  std::shared_ptr<Allocation> src, dst;  // kept alive until the transfer ends
  bool finished = false;
  Status status;
  std::vector<TransferCallback> waiters;
  TransferReport final_report;
};

struct Session {
  uint64_t id = 0;    // public
  std::string token;  // secret: "<id>.<64 hex digits>", 256 random bits
  std::string name;   // as the client gave it, cut to 128 bytes
  Credentials creds;
  TransferCallback on_done;
  std::set<uint64_t> allocations;
  std::set<uint64_t> instances;
  std::set<uint64_t> transfers;
  std::map<size_t, uint64_t> quota_used;  // per pool
};

// The number a token claims; the token is then compared in full.
std::optional<uint64_t> TokenNumber(const std::string& token) {
  const size_t dot = token.find('.');
  if (dot == std::string::npos) return std::nullopt;
  return ParseNumber<uint64_t>(std::string_view(token).substr(0, dot));
}

SessionOwner OwnerOf(const Session& s) {
  return SessionOwner{s.id, s.name, s.creds.known() ? static_cast<int64_t>(s.creds.uid) : -1,
                      s.creds.pid};
}

// Who may see, wait on or cancel a transfer: its session and the operator.
// A caller without a (valid) session is told what would let it, not that
// its session is unknown: isoctl acts without one.
Status MayTouch(const SessionOwner& owner, const Session* caller, bool is_operator,
                uint64_t transfer, std::string_view what, const std::string& state_dir) {
  if (is_operator || (caller && caller->id == owner.session)) return OkStatus();
  return PermissionDenied("transfer ", transfer, " belongs to another client (session ",
                          owner.session, "); ", what, " it needs the operator token (", state_dir,
                          "/operator.token)");
}

// A transfer's record as Cancel, GetTransfer and WhenDone find it.
struct FoundTransfer {
  TransferRecord* record = nullptr;
  bool in_flight = false;  // in `active`; else among the last ended
};

// An instance's storage [offset, offset + bytes) must not wrap 2^64
// (a wrapped end would pass every later "fits" check).
Status CheckInstanceEnd(uint64_t offset, uint64_t bytes) {
  if (CheckedAdd(offset, bytes)) return OkStatus();
  return InvalidArgument("instance: offset ", offset, " + ", bytes,
                         " bytes of storage wraps past 2^64");
}

std::string StateName(const TransferRecord& r) {
  // Waiting: queued for staging buffers or behind other work on its
  // channels (no request dispatched yet).
  if (!r.finished) {
    const bool started =
        r.handle && r.handle->times().first_dispatch != TransferTimes::Clock::time_point{};
    return started ? "running" : "waiting";
  }
  if (r.status.ok()) return "done";
  return absl::IsCancelled(r.status) ? "cancelled" : "failed";
}

}  // namespace

struct Node::Impl {
  Config config;
  std::unique_ptr<Runtime> runtime;
  CrossCopier* cross = nullptr;  // set before serving
  const Clock::time_point started = Clock::now();

  mutable std::mutex mu;
  std::condition_variable idle_cv;
  std::vector<std::shared_ptr<PoolAccount>> pools;              // constant
  std::map<uint64_t, Session> sessions;                         // by public number; guarded by mu
  uint64_t next_session = 1;                                    // guarded by mu
  std::map<uint64_t, std::shared_ptr<Allocation>> allocations;  // guarded by mu
  std::map<uint64_t, Instance> instances;                       // guarded by mu
  std::map<uint64_t, std::shared_ptr<TransferRecord>> active;   // guarded by mu
  std::deque<std::shared_ptr<TransferRecord>> finished;         // guarded by mu
  uint64_t next_allocation = 1, next_instance = 1;              // guarded by mu
  // Ids of cross-node copies this node starts; far above the runtime's.
  uint64_t next_cross = 1ull << 48;  // guarded by mu
  bool draining = false;             // guarded by mu
  // (time, bytes done per channel) over the last second; guarded by mu.
  std::deque<std::pair<Clock::time_point, std::vector<uint64_t>>> samples;
  std::vector<double> current_bps, peak_bps;  // guarded by mu

  static constexpr size_t kFinishedKept = 4096;

  // Session open/close lines: a client that attaches in a loop writes a
  // few per 10 s, then one line counting the rest (per uid; gRPC together).
  LogLimiter session_lines{20, std::chrono::seconds(10)};
  bool SessionLineAllowed(const Credentials& creds) {
    const std::string key = creds.known() ? std::to_string(creds.uid) : std::string("gRPC");
    const LogLimiter::Verdict v = session_lines.Allow(key);
    if (v.log && v.suppressed > 0) {
      spdlog::info("sessions of uid {}: {} open/close line(s) suppressed", key, v.suppressed);
    }
    return v.log;
  }

  // Under mu. The same answer for a wrong token and a closed session, and
  // the token is never echoed (errors reach logs and terminals).
  const Session* FindSessionOrNull(const std::string& token) const {
    const std::optional<uint64_t> n = TokenNumber(token);
    if (!n) return nullptr;
    auto it = sessions.find(*n);
    if (it == sessions.end() || !SameSecret(it->second.token, token)) return nullptr;
    return &it->second;
  }

  Result<Session*> FindSession(const std::string& token) {
    const Session* s = FindSessionOrNull(token);
    if (!s) {
      return FailedPrecondition(
          "unknown or closed session: attach first (gRPC Attach or the local handshake) and "
          "pass the token it returned");
    }
    return const_cast<Session*>(s);
  }

  Result<const Session*> FindSession(const std::string& token) const {
    return const_cast<Impl*>(this)->FindSession(token);
  }

  Status CheckSession(const std::string& token) const { return FindSession(token).status(); }

  // Under mu: the record of `transfer`, in flight or among the last
  // kFinishedKept ended, if the caller may act on it (`what` it wants to do
  // goes into the refusal).
  Result<FoundTransfer> TouchableLocked(const std::string& session, uint64_t transfer,
                                        bool is_operator, std::string_view what) const {
    FoundTransfer found;
    auto it = active.find(transfer);
    if (it != active.end()) {
      found = {it->second.get(), true};
    } else {
      for (const auto& f : finished) {
        if (f->id == transfer) found.record = f.get();
      }
    }
    if (!found.record) {
      return NotFound("no transfer ", transfer, " (finished transfers are kept for the last ",
                      kFinishedKept, ")");
    }
    ISO_RETURN_IF_ERROR(MayTouch(found.record->owner, FindSessionOrNull(session), is_operator,
                                 transfer, what, config.daemon.state_dir));
    return found;
  }

  Result<std::shared_ptr<Allocation>> UsableAllocation(uint64_t session, uint64_t id) const {
    auto it = allocations.find(id);
    if (it == allocations.end()) return NotFound("no allocation ", id);
    const Allocation& a = *it->second;
    if (a.owner != session && !a.published) {
      return PermissionDenied("allocation ", id, " belongs to another client and is not published");
    }
    return it->second;
  }

  std::shared_ptr<PoolAccount> PoolByName(const std::string& name) const {
    for (const auto& p : pools)
      if (p->name == name) return p;
    return nullptr;
  }

  // `detailed` adds the path text and per-hop progress: string work kept
  // off the completion path (the ring's latency), done on introspection.
  TransferReport BuildReport(const TransferRecord& r, bool detailed = true) const {
    TransferReport rep;
    rep.id = r.id;
    rep.owner = r.owner;
    rep.status = r.status;
    rep.state = StateName(r);
    if (r.cross) {
      rep.state = r.finished ? rep.state : "running";
      rep.bytes = r.cross->bytes();
      rep.elapsed_s = std::chrono::duration<double>(Clock::now() - r.cross->started()).count();
      if (detailed) rep.path = r.cross->PathText();
      return rep;
    }
    if (!r.handle) return rep;
    const Transfer& t = *r.handle;
    rep.priority = t.priority();
    rep.bytes = t.bytes();
    const TransferTimes times = t.times();
    const auto end = r.finished ? times.finished : Clock::now();
    rep.elapsed_s = std::chrono::duration<double>(end - times.submitted).count();
    if (!detailed) return rep;
    const Topology& topo = runtime->topology();
    rep.path = t.path().ToString(topo);
    const std::vector<uint64_t> done = t.HopsDone();
    for (size_t h = 0; h < t.path().edges.size(); ++h) {
      const TopologyEdge& e = t.path().edges[h];
      HopReport hop;
      hop.src_memory = topo.FindMemory(e.src)->name;
      hop.dst_memory = topo.FindMemory(e.dst)->name;
      hop.channel = e.channel_name;
      hop.src_layout = t.path().nodes[h].layout.ToString();
      hop.dst_layout = t.path().nodes[h + 1].layout.ToString();
      hop.chunks_done = h < done.size() ? done[h] : 0;
      hop.chunks_total = t.chunks();
      rep.hops.push_back(hop);
    }
    return rep;
  }

  // Under mu: moves a finished record out of `active` and returns the
  // callbacks to run (outside the lock).
  std::vector<std::pair<TransferCallback, TransferReport>> Finalize(
      const std::shared_ptr<TransferRecord>& r) {
    std::vector<std::pair<TransferCallback, TransferReport>> calls;
    r->final_report = BuildReport(*r, /*detailed=*/false);
    r->src.reset();
    r->dst.reset();
    active.erase(r->id);
    finished.push_back(r);
    if (finished.size() > kFinishedKept) finished.pop_front();
    auto s = sessions.find(r->owner.session);
    if (s != sessions.end()) {
      s->second.transfers.erase(r->id);
      if (s->second.on_done) calls.emplace_back(s->second.on_done, r->final_report);
    }
    for (TransferCallback& w : r->waiters) calls.emplace_back(std::move(w), r->final_report);
    r->waiters.clear();
    idle_cv.notify_all();
    return calls;
  }

  void OnRuntimeDone(const std::shared_ptr<TransferRecord>& r, Status s) {
    std::vector<std::pair<TransferCallback, TransferReport>> calls;
    {
      std::lock_guard lock(mu);
      r->finished = true;
      r->status = std::move(s);
      // Completed before Copy() registered it (the inline path): Copy()
      // finalizes instead.
      if (r->handle || r->cross) calls = Finalize(r);
    }
    for (auto& [cb, rep] : calls) cb(rep);
  }

  Result<uint64_t> StartCross(uint64_t session, std::shared_ptr<TransferRecord> record,
                              CrossCopySpec spec, const CopySpec& copy) {
    if (!cross)
      return FailedPrecondition("this node has no peers: cross-node copies need [[peer]]");
    spec.box = copy.box;
    spec.priority = copy.priority;
    spec.durable = copy.durable;
    ISO_ASSIGN_OR_RETURN(auto handle, cross->Copy(std::move(spec), [this, record](Status s) {
      OnRuntimeDone(record, std::move(s));
    }));
    std::vector<std::pair<TransferCallback, TransferReport>> calls;
    bool orphan = false;
    {
      std::lock_guard lock(mu);
      record->cross = handle;
      active[record->id] = record;
      auto s = sessions.find(session);
      if (s != sessions.end()) {
        s->second.transfers.insert(record->id);
      } else {
        orphan = true;
      }
      if (record->finished) calls = Finalize(record);
    }
    if (orphan) handle->Cancel();
    for (auto& [cb, rep] : calls) cb(rep);
    return record->id;
  }

  void ReleaseSessionLocked(Session& s) {
    for (uint64_t id : s.instances) instances.erase(id);
    for (uint64_t id : s.allocations) {
      auto it = allocations.find(id);
      if (it == allocations.end()) continue;
      if (it->second->published) {
        it->second->owner = 0;  // outlives its session
      } else {
        allocations.erase(it);  // memory goes when in-flight transfers drain
      }
    }
  }
};

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Node::~Node() {
  // Destroying the runtime below waits for every request in flight.
  (void)Drain(std::chrono::milliseconds(0), std::chrono::hours(24 * 365));
}

Result<std::unique_ptr<Node>> Node::Create(const Config& config, const ChannelContext& context) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  RuntimeConfig rc = config.runtime;
  if (config.daemon.calibrate) {
    rc.calibrate = true;
    rc.calibration_file = config.daemon.state_dir + "/calibration.toml";
  }
  if (context.data_plane) {
    // One RemoteMemcpy channel per peer: its DMA worker schedules both
    // halves of the network hops with that peer.
    for (ChannelConfig& c : PeerChannels(config.cluster)) rc.channels.push_back(std::move(c));
  }
  impl->config.runtime.channels = rc.channels;
  LogChannelAvailability(ProbeChannels(context));
  ChannelMaker maker = [context](const ChannelConfig& c) { return MakeChannel(c, context); };
  ISO_ASSIGN_OR_RETURN(impl->runtime, Runtime::Create(rc, maker));
  for (size_t i = 0; i < config.runtime.memories.size(); ++i) {
    const MemoryConfig& m = config.runtime.memories[i];
    auto p = std::make_shared<PoolAccount>();
    p->memory = i;
    p->name = m.name;
    p->capacity = m.pool_bytes;
    p->quota = m.client_quota ? m.client_quota : m.pool_bytes;
    p->hugetlb = m.hugetlb;
    impl->pools.push_back(p);
    if (p->capacity == 0) continue;
    // Each allocation is its own memfd (clients never see each other's
    // memory), populated when it is made: what that costs here, measured
    // on a probe of up to 64 MiB.
    const uint64_t probe_bytes = std::min<uint64_t>(p->capacity, 64ull << 20);
    auto probe =
        SharedMemory::Create(StrCat("isometry:", m.name, ":probe"), probe_bytes, m.hugetlb);
    if (!probe.ok()) {
      spdlog::warn("memory '{}': a {} MiB probe allocation failed: {}", m.name, probe_bytes >> 20,
                   probe.status().ToString());
      continue;
    }
    const double ms = probe->populate_seconds() * 1e3;
    spdlog::info(
        "memory '{}': client pool of {} MiB; allocations are populated when made "
        "({} MiB in {:.1f} ms, {:.0f} ms per GiB{})",
        m.name, p->capacity >> 20, probe_bytes >> 20, ms,
        ms * static_cast<double>(1ull << 30) / static_cast<double>(probe_bytes),
        probe->used_hugetlb() ? ", hugetlb" : "");
  }
  // Pool pages size every O_DIRECT or socket request from client memory:
  // one segment per page. Say so once when nothing gives large pages.
  const bool any_hugetlb =
      std::any_of(config.runtime.memories.begin(), config.runtime.memories.end(),
                  [](const MemoryConfig& m) { return m.hugetlb; });
  if (!any_hugetlb && ShmemHugePageMode() == "never") {
    spdlog::info(
        "client pools use 4 KiB pages (transparent_hugepage/shmem_enabled is 'never'); "
        "disk paths from pool memory run faster with 'advise' or with memory.hugetlb "
        "(README, Tuning)");
  }
  const size_t channels = rc.channels.size();
  impl->samples.push_back({Clock::now(), std::vector<uint64_t>(channels, 0)});
  impl->current_bps.assign(channels, 0);
  impl->peak_bps.assign(channels, 0);
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

const Config& Node::config() const { return impl_->config; }

void Node::SetCrossCopier(CrossCopier* copier) { impl_->cross = copier; }

Runtime& Node::runtime() { return *impl_->runtime; }

Result<CrossEnd> Node::ResolveForPeer(const InstanceSpec& spec) const {
  ISO_RETURN_IF_ERROR(spec.shape.Validate("instance"));
  ISO_RETURN_IF_ERROR(CheckInstanceEnd(spec.offset, spec.shape.total_bytes()));
  CrossEnd end;
  if (!spec.file.empty()) {
    ISO_ASSIGN_OR_RETURN(MemoryId m, impl_->runtime->FindMemory(spec.memory));
    if (impl_->runtime->topology().FindMemory(m)->kind != MemoryKind::kDsk) {
      return InvalidArgument("memory '", spec.memory, "' is not a DSK memory");
    }
    ISO_RETURN_IF_ERROR(CheckRelativePath(spec.file));
    end.local = InstanceRef{m, nullptr, 0, spec.shape};
    end.local.file = spec.file;
    end.local.file_offset = spec.offset;
    return end;
  }
  std::lock_guard lock(impl_->mu);
  auto it = impl_->allocations.find(spec.allocation);
  if (it == impl_->allocations.end() || !it->second->published) {
    return PermissionDenied(
        "allocation ", spec.allocation, " of node '", impl_->config.cluster.node_name,
        "' does not exist or is not published (peers reach published allocations only)");
  }
  const auto& a = it->second;
  const uint64_t total = spec.shape.total_bytes();
  if (spec.offset > a->shm.size() || total > a->shm.size() - spec.offset) {
    return OutOfRange("instance of ", total, " bytes at offset ", spec.offset,
                      " does not fit allocation ", spec.allocation, " of ", a->shm.size(),
                      " bytes on node '", impl_->config.cluster.node_name, "'");
  }
  const MemoryId mem = impl_->runtime->topology().memories[a->pool->memory].id;
  end.local =
      InstanceRef{mem, a->shm.data() + spec.offset, a->shm.size() - spec.offset, spec.shape};
  end.keep = a;
  return end;
}

// ---- sessions ----

Result<OpenedSession> Node::OpenSession(const std::string& client_name, const Credentials& creds,
                                        TransferCallback on_transfer_done) {
  std::lock_guard lock(impl_->mu);
  if (impl_->draining) return Unavailable("isometryd is shutting down");
  const DaemonConfig& dc = impl_->config.daemon;
  if (impl_->sessions.size() >= dc.max_sessions) {
    return ResourceExhausted("too many sessions (", impl_->sessions.size(),
                             "); daemon.max_sessions is ", dc.max_sessions);
  }
  // One uid (or, where gRPC hides it, the gRPC clients together) cannot
  // take every session slot from the others.
  uint32_t same = 0;
  for (const auto& [id, other] : impl_->sessions) {
    same +=
        creds.known() ? other.creds.known() && other.creds.uid == creds.uid : !other.creds.known();
  }
  if (creds.known() && same >= dc.max_sessions_per_uid) {
    return ResourceExhausted("uid ", creds.uid, " already has ", same,
                             " sessions; daemon.max_sessions_per_uid is ", dc.max_sessions_per_uid);
  }
  if (!creds.known() && same >= dc.max_grpc_sessions) {
    return ResourceExhausted("too many gRPC sessions (", same, "); daemon.max_grpc_sessions is ",
                             dc.max_grpc_sessions);
  }
  Session s;
  s.id = impl_->next_session++;
  s.token = StrCat(s.id, ".", RandomHex(32));
  s.name = client_name.substr(0, 128);
  s.creds = creds;
  s.on_done = std::move(on_transfer_done);
  OpenedSession opened{s.token, s.id};
  if (impl_->SessionLineAllowed(s.creds)) {
    spdlog::info("session {} opened: client '{}' pid {} uid {}", s.id, ForLog(s.name), creds.pid,
                 creds.known() ? std::to_string(creds.uid) : std::string("unknown (gRPC)"));
  }
  impl_->sessions.emplace(s.id, std::move(s));
  return opened;
}

void Node::CloseSession(const std::string& session) {
  std::vector<Transfer> to_cancel;
  std::vector<std::shared_ptr<CrossTransfer>> cross;
  {
    std::lock_guard lock(impl_->mu);
    const Session* found = impl_->FindSessionOrNull(session);
    if (!found) return;
    auto it = impl_->sessions.find(found->id);
    Session& s = it->second;
    for (uint64_t id : s.transfers) {
      auto t = impl_->active.find(id);
      if (t == impl_->active.end()) continue;
      if (t->second->handle) to_cancel.push_back(*t->second->handle);
      if (t->second->cross) cross.push_back(t->second->cross);
    }
    size_t published = 0;
    for (uint64_t id : s.allocations) {
      auto a = impl_->allocations.find(id);
      published += a != impl_->allocations.end() && a->second->published;
    }
    if (impl_->SessionLineAllowed(s.creds)) {
      spdlog::info(
          "session {} closed: client '{}' pid {}; cancelling {} transfer(s), freeing {} "
          "allocation(s), keeping {} published",
          s.id, ForLog(s.name), s.creds.pid, to_cancel.size() + cross.size(),
          s.allocations.size() - published, published);
    }
    impl_->ReleaseSessionLocked(s);
    // Completions of its transfers no longer reach it.
    impl_->sessions.erase(it);
  }
  for (Transfer& t : to_cancel) t.Cancel();
  for (auto& c : cross) c->Cancel();
}

std::optional<uint64_t> Node::SessionNumber(const std::string& session) const {
  std::lock_guard lock(impl_->mu);
  const Session* s = impl_->FindSessionOrNull(session);
  if (!s) return std::nullopt;
  return s->id;
}

// ---- pool memory ----

Result<AllocationReport> Node::Allocate(const std::string& session, const std::string& memory,
                                        uint64_t bytes) {
  std::shared_ptr<PoolAccount> pool = impl_->PoolByName(memory);
  if (!pool) return NotFound("no memory named '", memory, "'");
  if (pool->capacity == 0) {
    return FailedPrecondition("memory '", memory, "' has no client pool (set pool = \"...\" ",
                              "for it in the config)");
  }
  if (bytes == 0) return InvalidArgument("allocation of 0 bytes");
  if (bytes > pool->capacity) {
    return ResourceExhausted("allocation of ", bytes, " bytes exceeds memory '", memory,
                             "' pool of ", pool->capacity, " bytes");
  }
  uint64_t id, session_id;
  int64_t owner_uid;
  {
    std::lock_guard lock(impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    const uint32_t max_allocations = impl_->config.daemon.max_allocations_per_session;
    if (s->allocations.size() >= max_allocations) {
      return ResourceExhausted("this session holds ", s->allocations.size(),
                               " allocations; daemon.max_allocations_per_session is ",
                               max_allocations);
    }
    session_id = s->id;
    owner_uid = OwnerOf(*s).uid;
    uint64_t& used = s->quota_used[pool->memory];
    if (bytes > pool->quota - used) {
      return ResourceExhausted("client quota of memory '", memory, "' exhausted: ", used, " of ",
                               pool->quota, " bytes held, ", bytes, " asked");
    }
    if (!pool->TryTake(bytes)) {
      return ResourceExhausted("memory '", memory, "' pool is full: ", pool->used.load(), " of ",
                               pool->capacity, " bytes in use, ", bytes, " asked");
    }
    used += bytes;
    id = impl_->next_allocation++;
  }
  auto shm = SharedMemory::Create(StrCat("isometry:", memory, ":", id), bytes, pool->hugetlb);
  std::lock_guard lock(impl_->mu);
  auto sit = impl_->sessions.find(session_id);
  if (!shm.ok() || sit == impl_->sessions.end()) {
    pool->used -= bytes;
    if (sit != impl_->sessions.end()) sit->second.quota_used[pool->memory] -= bytes;
    return shm.ok() ? FailedPrecondition("session closed during allocation") : shm.status();
  }
  if (pool->hugetlb && !shm->used_hugetlb() && !pool->hugetlb_warned.exchange(true)) {
    spdlog::warn(
        "memory '{}': hugetlb is configured but no 2 MiB huge pages could be had "
        "(see /proc/sys/vm/nr_hugepages); using normal pages",
        memory);
  }
  spdlog::debug("memory '{}': allocation {} of {} bytes populated in {:.1f} ms", memory, id, bytes,
                shm->populate_seconds() * 1e3);
  auto a = std::make_shared<Allocation>();
  a->id = id;
  a->owner = session_id;
  a->owner_uid = owner_uid;
  a->shm = *std::move(shm);
  a->pool = pool;  // from here on the destructor returns the bytes
  impl_->allocations[id] = a;
  sit->second.allocations.insert(id);
  return AllocationReport{id, memory, bytes, a->shm.fd()};
}

Status Node::Free(const std::string& session, uint64_t allocation, bool is_operator) {
  std::lock_guard lock(impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  auto it = impl_->allocations.find(allocation);
  if (it == impl_->allocations.end()) return NotFound("no allocation ", allocation);
  Allocation& a = *it->second;
  // A published allocation whose owner has gone: a later session of the
  // same uid (the publisher's job, restarted) or the operator frees it;
  // other users may read it but not destroy it.
  const bool orphan = a.published && a.owner == 0;
  const int64_t uid = OwnerOf(*s).uid;
  const bool same_uid = uid >= 0 && uid == a.owner_uid;
  if (a.owner != s->id && !(orphan && (same_uid || is_operator))) {
    return PermissionDenied("allocation ", allocation, " belongs to another client",
                            orphan ? "; its publisher has left: a session of the same uid, or "
                                     "the operator (--operator-token), may free it"
                                   : "");
  }
  for (auto i = s->instances.begin(); i != s->instances.end();) {
    auto inst = impl_->instances.find(*i);
    if (inst != impl_->instances.end() && inst->second.allocation.get() == &a) {
      impl_->instances.erase(inst);
      i = s->instances.erase(i);
    } else {
      ++i;
    }
  }
  if (a.owner == s->id) s->quota_used[a.pool->memory] -= a.shm.size();
  s->allocations.erase(allocation);
  impl_->allocations.erase(it);
  return OkStatus();
}

Status Node::Publish(const std::string& session, uint64_t allocation) {
  std::lock_guard lock(impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  auto it = impl_->allocations.find(allocation);
  if (it == impl_->allocations.end()) return NotFound("no allocation ", allocation);
  if (it->second->owner != s->id) {
    return PermissionDenied("allocation ", allocation, " belongs to another client");
  }
  it->second->published = true;
  return OkStatus();
}

Result<AllocationReport> Node::Lookup(const std::string& session, uint64_t allocation) const {
  std::lock_guard lock(impl_->mu);
  ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
  ISO_ASSIGN_OR_RETURN(auto a, impl_->UsableAllocation(s->id, allocation));
  return AllocationReport{a->id, a->pool->name, a->shm.size(), a->shm.fd()};
}

namespace {
Status CheckRange(uint64_t offset, uint64_t length, uint64_t size, uint64_t allocation) {
  if (offset > size || length > size - offset) {
    return OutOfRange("bytes [", offset, ", ", offset, "+", length, ") lie outside allocation ",
                      allocation, " of ", size, " bytes");
  }
  return OkStatus();
}
}  // namespace

Status Node::Write(const std::string& session, uint64_t allocation, uint64_t offset,
                   std::string_view data) {
  std::shared_ptr<Allocation> a;
  {
    std::lock_guard lock(impl_->mu);
    ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
    ISO_ASSIGN_OR_RETURN(a, impl_->UsableAllocation(s->id, allocation));
  }
  ISO_RETURN_IF_ERROR(CheckRange(offset, data.size(), a->shm.size(), allocation));
  if (!data.empty()) std::memcpy(a->shm.data() + offset, data.data(), data.size());
  return OkStatus();
}

Result<std::string> Node::Read(const std::string& session, uint64_t allocation, uint64_t offset,
                               uint64_t length) const {
  std::shared_ptr<Allocation> a;
  {
    std::lock_guard lock(impl_->mu);
    ISO_ASSIGN_OR_RETURN(const Session* s, impl_->FindSession(session));
    ISO_ASSIGN_OR_RETURN(a, impl_->UsableAllocation(s->id, allocation));
  }
  ISO_RETURN_IF_ERROR(CheckRange(offset, length, a->shm.size(), allocation));
  if (length > (64ull << 20)) return OutOfRange("a read returns at most 64 MiB; asked ", length);
  return std::string(reinterpret_cast<const char*>(a->shm.data() + offset), length);
}

// ---- instances and copies ----

Result<std::pair<uint64_t, uint64_t>> Node::RegisterInstance(const std::string& session,
                                                             const InstanceSpec& spec) {
  ISO_RETURN_IF_ERROR(spec.shape.Validate("instance"));
  const uint64_t total = spec.shape.total_bytes();
  ISO_RETURN_IF_ERROR(CheckInstanceEnd(spec.offset, total));
  std::lock_guard lock(impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  const uint32_t max_instances = impl_->config.daemon.max_instances_per_session;
  if (s->instances.size() >= max_instances) {
    return ResourceExhausted("this session has ", s->instances.size(),
                             " instances registered; daemon.max_instances_per_session is ",
                             max_instances);
  }
  const NodeMemory where = SplitNodeMemory(spec.memory, impl_->config.cluster.node_name);
  const std::string& memory = where.memory;
  if (where.node != impl_->config.cluster.node_name) {
    // Another node's instance: that node checks it when a copy uses it.
    if (!impl_->cross || !impl_->cross->KnowsNode(where.node)) {
      return NotFound("no node '", where.node, "' in this cluster (memory '", spec.memory, "')");
    }
    if (spec.file.empty() && spec.allocation == 0) {
      return InvalidArgument("remote instance on '", spec.memory,
                             "': name a file or an allocation published there");
    }
    if (!spec.file.empty()) ISO_RETURN_IF_ERROR(CheckRelativePath(spec.file));
    const uint64_t id = impl_->next_instance++;
    Instance in{id, s->id, nullptr, spec.offset, spec.shape, 0, spec.file};
    in.remote_node = where.node;
    in.remote_allocation = spec.allocation;
    in.remote_memory = memory;
    impl_->instances[id] = std::move(in);
    s->instances.insert(id);
    return std::make_pair(id, total);
  }
  if (!spec.file.empty() || !memory.empty()) {
    // A file of a DSK memory: checked lexically here, opened (confined to
    // the directory) by each copy.
    const auto& mems = impl_->config.runtime.memories;
    size_t m = 0;
    while (m < mems.size() && mems[m].name != memory) ++m;
    if (m == mems.size()) return NotFound("no memory named '", memory, "'");
    if (mems[m].kind != MemoryKind::kDsk) {
      return InvalidArgument("memory '", memory, "' is not a DSK memory; name an allocation");
    }
    ISO_RETURN_IF_ERROR(CheckRelativePath(spec.file));
    const uint64_t id = impl_->next_instance++;
    Instance in{id, s->id, nullptr, spec.offset, spec.shape, m, spec.file};
    impl_->instances[id] = std::move(in);
    s->instances.insert(id);
    return std::make_pair(id, total);
  }
  ISO_ASSIGN_OR_RETURN(auto a, impl_->UsableAllocation(s->id, spec.allocation));
  if (spec.offset > a->shm.size() || total > a->shm.size() - spec.offset) {
    return OutOfRange("instance of ", total, " bytes (layout '", spec.shape.layout.ToString(),
                      "' over ", ToString(spec.shape.bounds), ") at offset ", spec.offset,
                      " does not fit allocation ", spec.allocation, " of ", a->shm.size(),
                      " bytes");
  }
  const uint64_t id = impl_->next_instance++;
  impl_->instances[id] = Instance{id, s->id, a, spec.offset, spec.shape, 0, ""};
  s->instances.insert(id);
  return std::make_pair(id, total);
}

Status Node::UnregisterInstance(const std::string& session, uint64_t instance) {
  std::lock_guard lock(impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  if (!s->instances.erase(instance)) return NotFound("no instance ", instance, " in this session");
  impl_->instances.erase(instance);
  return OkStatus();
}

Result<uint64_t> Node::Copy(const std::string& session, const CopySpec& spec,
                            TransferCallback on_done) {
  auto record = std::make_shared<TransferRecord>();
  if (on_done) record->waiters.push_back(std::move(on_done));
  CopyRequest req;
  std::optional<CrossCopySpec> cross;
  uint64_t session_id;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->draining) return Unavailable("isometryd is shutting down; no new copies");
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    const uint32_t max_transfers = impl_->config.daemon.max_transfers_per_session;
    if (s->transfers.size() >= max_transfers) {
      return ResourceExhausted("this session has ", s->transfers.size(),
                               " transfers in flight; daemon.max_transfers_per_session is ",
                               max_transfers, " (wait for some to finish)");
    }
    session_id = s->id;
    record->owner = OwnerOf(*s);
    // memory.quota_bytes is per uid; where gRPC hides the uid, per session
    // (one gRPC user cannot use up another's).
    req.disk_owner = s->creds.known() ? StrCat("uid ", s->creds.uid) : StrCat("session ", s->id);
    const Instance* ends[2] = {nullptr, nullptr};
    const uint64_t ids[2] = {spec.src_instance, spec.dst_instance};
    for (int i = 0; i < 2; ++i) {
      auto it = impl_->instances.find(ids[i]);
      if (it == impl_->instances.end() || it->second.session != session_id) {
        return NotFound("no ", i ? "destination" : "source", " instance ", ids[i],
                        " registered in this session");
      }
      ends[i] = &it->second;
    }
    ISO_RETURN_IF_ERROR(
        CheckCopyDimensions(ends[0]->shape.bounds, ends[1]->shape.bounds, spec.box));
    if (!ends[0]->remote_node.empty() || !ends[1]->remote_node.empty()) {
      cross.emplace();
      CrossEnd* out[2] = {&cross->src, &cross->dst};
      for (int i = 0; i < 2; ++i) {
        const Instance& in = *ends[i];
        CrossEnd& e = *out[i];
        e.node = in.remote_node;
        e.shape = in.shape;
        if (!in.remote_node.empty()) {
          e.allocation = in.remote_allocation;
          e.offset = in.offset;
          e.memory = in.remote_memory;
          e.file = in.file;
        }
      }
      if (!spec.via.empty()) {
        return InvalidArgument("explicit intermediate hops are not supported across nodes");
      }
    }
    auto ref = [&](const Instance& in) {
      if (!in.remote_node.empty()) return InstanceRef{};
      if (!in.allocation) {
        InstanceRef r{impl_->runtime->topology().memories[in.disk_memory].id, nullptr, 0, in.shape};
        r.file = in.file;
        r.file_offset = in.offset;
        return r;
      }
      const MemoryId mem = impl_->runtime->topology().memories[in.allocation->pool->memory].id;
      return InstanceRef{mem, in.allocation->shm.data() + in.offset,
                         in.allocation->shm.size() - in.offset, in.shape};
    };
    req.src = ref(*ends[0]);
    req.dst = ref(*ends[1]);
    if (cross) {
      cross->src.local = req.src;
      cross->dst.local = req.dst;
      cross->src.keep = ends[0]->allocation;
      cross->dst.keep = ends[1]->allocation;
      record->id = impl_->next_cross++;
    }
    record->src = ends[0]->allocation;
    record->dst = ends[1]->allocation;
    req.durable = spec.durable;
    for (const ViaHop& h : spec.via) {
      ISO_ASSIGN_OR_RETURN(MemoryId m, impl_->runtime->FindMemory(h.memory));
      ISO_ASSIGN_OR_RETURN(Layout l, Layout::Parse(h.layout, ends[0]->shape.bounds.dims));
      req.via.push_back({m, l});
    }
  }
  req.box = spec.box;
  req.priority = spec.priority;
  Impl* impl = impl_.get();
  if (cross) return impl_->StartCross(session_id, record, *std::move(cross), spec);
  req.on_complete = [impl, record](Status s) { impl->OnRuntimeDone(record, std::move(s)); };
  // Not under the node lock: the inline path completes inside Copy().
  ISO_ASSIGN_OR_RETURN(Transfer t, impl_->runtime->Copy(std::move(req)));
  std::vector<std::pair<TransferCallback, TransferReport>> calls;
  bool orphan = false;
  {
    std::lock_guard lock(impl_->mu);
    record->id = t.id();
    record->handle = t;
    impl_->active[t.id()] = record;
    auto s = impl_->sessions.find(session_id);
    if (s != impl_->sessions.end()) {
      s->second.transfers.insert(t.id());
    } else {
      orphan = true;  // the session ended while we submitted
    }
    if (record->finished) calls = impl_->Finalize(record);
  }
  if (orphan) t.Cancel();
  for (auto& [cb, rep] : calls) cb(rep);
  return t.id();
}

Status Node::Cancel(const std::string& session, uint64_t transfer, bool is_operator) {
  std::optional<Transfer> t;
  std::shared_ptr<CrossTransfer> cross;
  {
    std::lock_guard lock(impl_->mu);
    ISO_ASSIGN_OR_RETURN(FoundTransfer f,
                         impl_->TouchableLocked(session, transfer, is_operator, "cancelling"));
    if (!f.in_flight) return OkStatus();  // already ended: nothing to do
    t = f.record->handle;
    cross = f.record->cross;
  }
  if (t) t->Cancel();
  if (cross) cross->Cancel();
  return OkStatus();
}

Result<TransferReport> Node::GetTransfer(const std::string& session, uint64_t transfer,
                                         bool is_operator) const {
  std::lock_guard lock(impl_->mu);
  ISO_ASSIGN_OR_RETURN(FoundTransfer f,
                       impl_->TouchableLocked(session, transfer, is_operator, "inspecting"));
  return impl_->BuildReport(*f.record);
}

Status Node::WhenDone(const std::string& session, uint64_t transfer, bool is_operator,
                      TransferCallback cb) {
  TransferReport rep;
  {
    std::lock_guard lock(impl_->mu);
    ISO_ASSIGN_OR_RETURN(FoundTransfer f,
                         impl_->TouchableLocked(session, transfer, is_operator, "waiting on"));
    if (f.in_flight) {
      f.record->waiters.push_back(std::move(cb));
      return OkStatus();
    }
    rep = f.record->final_report;
  }
  cb(rep);
  return OkStatus();
}

std::vector<TransferReport> Node::ListTransfers() const {
  std::lock_guard lock(impl_->mu);
  std::vector<TransferReport> out;
  for (const auto& [id, r] : impl_->active) out.push_back(impl_->BuildReport(*r));
  return out;
}

// ---- introspection ----

std::vector<MemoryReport> Node::ListMemories() const {
  std::vector<MemoryReport> out;
  for (const MemoryUsage& u : impl_->runtime->Memories()) {
    MemoryReport r;
    r.usage = u;
    for (const auto& p : impl_->pools) {
      if (p->name == u.name) {
        r.pool_capacity = p->capacity;
        r.pool_used = p->used.load();
        r.client_quota = p->quota;
      }
    }
    out.push_back(r);
  }
  return out;
}

std::vector<ChannelReport> Node::ListChannels() const {
  const std::vector<ChannelStats> stats = impl_->runtime->Channels();
  const Topology& topo = impl_->runtime->topology();
  std::lock_guard lock(impl_->mu);
  std::vector<ChannelReport> out;
  for (size_t c = 0; c < stats.size(); ++c) {
    ChannelReport r;
    r.stats = stats[c];
    r.config = impl_->config.runtime.channels[c];
    for (const TopologyEdge& e : topo.edges) {
      if (e.channel == static_cast<int>(c)) {
        r.edges.push_back(topo.FindMemory(e.src)->name + "->" + topo.FindMemory(e.dst)->name);
      }
    }
    r.current_bytes_per_s = impl_->current_bps[c];
    r.peak_bytes_per_s = impl_->peak_bps[c];
    out.push_back(r);
  }
  return out;
}

void Node::SampleThroughput() {
  const std::vector<ChannelStats> stats = impl_->runtime->Channels();
  std::lock_guard lock(impl_->mu);
  const auto now = Clock::now();
  // Current = bytes over the last second (a sliding window of samples);
  // peak = the best full one-second window seen.
  auto& window = impl_->samples;
  window.push_back({now, {}});
  for (const ChannelStats& s : stats) window.back().second.push_back(s.bytes_done);
  while (window.size() > 2 && now - window[1].first >= std::chrono::seconds(1)) window.pop_front();
  const auto& [then, old] = window.front();
  const double dt = std::chrono::duration<double>(now - then).count();
  if (dt <= 0) return;
  for (size_t c = 0; c < stats.size(); ++c) {
    const double rate = static_cast<double>(stats[c].bytes_done - old[c]) / dt;
    impl_->current_bps[c] = rate;
    if (dt >= 0.95) impl_->peak_bps[c] = std::max(impl_->peak_bps[c], rate);
  }
}

Result<PlanReport> Node::Explain(const std::string& src_memory, const Layout& src_layout,
                                 const std::string& dst_memory, const Layout& dst_layout,
                                 const Box& bounds, const FieldSpace& fields) const {
  // "node:memory" of another node: the cluster plans it.
  const std::string& self = impl_->config.cluster.node_name;
  const NodeMemory s = SplitNodeMemory(src_memory, self), d = SplitNodeMemory(dst_memory, self);
  if (s.node != self || d.node != self) {
    if (!impl_->cross) return FailedPrecondition("this node has no peers");
    return impl_->cross->Explain(src_memory, src_layout, dst_memory, dst_layout, bounds, fields);
  }
  ISO_ASSIGN_OR_RETURN(MemoryId src, impl_->runtime->FindMemory(s.memory));
  ISO_ASSIGN_OR_RETURN(MemoryId dst, impl_->runtime->FindMemory(d.memory));
  InstanceShape ss{bounds, fields, src_layout}, ds{bounds, fields, dst_layout};
  ISO_RETURN_IF_ERROR(ss.Validate("source"));
  ISO_RETURN_IF_ERROR(ds.Validate("destination"));
  // Capacity is what a real instance would need; Explain never touches memory.
  ISO_ASSIGN_OR_RETURN(PlanExplanation ex,
                       impl_->runtime->Explain({src, nullptr, ss.total_bytes(), ss},
                                               {dst, nullptr, ds.total_bytes(), ds}));
  return ReportPlan(ex, impl_->runtime->topology());
}

PlanReport ReportPlan(const PlanExplanation& ex, const Topology& topo) {
  const Path& path = ex.path;
  PlanReport rep;
  rep.algorithm = path.algorithm;
  rep.text = path.ToString(topo);
  rep.predicted_bytes_per_s = path.predicted_bps;
  rep.chunks = ex.chunks;
  rep.chunk_bytes = ex.chunk_bytes;
  for (size_t h = 0; h < path.edges.size(); ++h) {
    const TopologyEdge& e = path.edges[h];
    PlanHopReport hop;
    hop.src_memory = topo.FindMemory(e.src)->name;
    hop.dst_memory = topo.FindMemory(e.dst)->name;
    hop.channel = e.channel_name;
    hop.src_layout = path.nodes[h].layout.ToString();
    hop.dst_layout = path.nodes[h + 1].layout.ToString();
    hop.request_bytes = ex.chunk_bytes;
    hop.buffer_bytes = h < ex.buffer_bytes.size() ? ex.buffer_bytes[h] : 0;
    hop.predicted_bytes_per_s = h < path.hop_bps.size() ? path.hop_bps[h] : 0;
    rep.hops.push_back(hop);
  }
  return rep;
}

Result<Calibration> Node::Calibrate() { return impl_->runtime->Recalibrate(); }

NodeStatus Node::GetStatus() const {
  NodeStatus s;
  s.runtime = impl_->runtime->Stats();
  std::lock_guard lock(impl_->mu);
  s.node = impl_->config.runtime.node;
  s.uptime_s = std::chrono::duration<double>(Clock::now() - impl_->started).count();
  s.sessions = static_cast<uint32_t>(impl_->sessions.size());
  s.transfers_active = impl_->active.size();
  s.allocations = impl_->allocations.size();
  s.instances = impl_->instances.size();
  return s;
}

Node::DrainOutcome Node::Drain(std::chrono::milliseconds grace,
                               std::chrono::milliseconds cancel_bound) {
  std::unique_lock lock(impl_->mu);
  impl_->draining = true;
  DrainOutcome outcome;
  if (impl_->idle_cv.wait_for(lock, grace, [&] { return impl_->active.empty(); })) return outcome;
  std::vector<Transfer> left;
  std::vector<std::shared_ptr<CrossTransfer>> cross;
  for (auto& [id, r] : impl_->active) {
    if (r->handle) left.push_back(*r->handle);
    if (r->cross) cross.push_back(r->cross);
  }
  outcome.cancelled = impl_->active.size();
  spdlog::warn("shutdown: cancelling {} transfer(s) still running after {} ms", outcome.cancelled,
               grace.count());
  lock.unlock();
  for (Transfer& t : left) t.Cancel();
  for (auto& c : cross) c->Cancel();
  lock.lock();
  if (!impl_->idle_cv.wait_for(lock, cancel_bound, [&] { return impl_->active.empty(); })) {
    outcome.stuck = impl_->active.size();
    spdlog::error("shutdown: {} transfer(s) did not end within {} ms of being cancelled",
                  outcome.stuck, cancel_bound.count());
  }
  return outcome;
}

}  // namespace isometry
