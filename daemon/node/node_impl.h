// The node's insides, shared by the files that implement it by role:
//   node.cc                  start, peers' view of its instances,
//                            introspection, drain
//   node_sessions.cc         sessions: open, resolve a token, close and release
//   node_pools.cc            client pool memory: allocate, free, publish,
//                            read, write
//   node_instances.cc        instances: register, validate, unregister
//   node_copies.cc           copies: resolve their ends, submit here or
//                            across nodes, track them to the end
//   node_halves.cc           cross-node copies' halves as isoctl shows them
//   node_explain.cc          why a copy took its path (alternatives)
//   node_datatypes.cc        datatype handles and form ends
//   node_private.cc          clients' own process memory (CMA ranges)
//   node_direct_read.cc      direct-read leases between clients
//   node_distributed.cc      distributed instances (ranks joining)
//   node_redistribute*.cc    M:N redistribution, on one node and across nodes
//   node_watch.cc            Active Access: watched regions, access logs
//   node_checkpoint.cc       incremental checkpoints of watched allocations
//   node_inventory.cc        what the sessions hold, listed for isoctl
//   node_qos.cc              traffic classes: sessions' classes, reload, report
// The services callers use (node::Pools in pools.h, and so on: node.h
// lists them) are views of this struct, made with it (Impl::services);
// their methods live in the files above by role. Their value types live
// in node_reports.h (what the node reports), session_ref.h (a resolved
// session) and session.h (the session itself). Nothing outside daemon/node includes this header.
//
// Locking: `mu` guards the session, allocation, instance and transfer
// tables; records reached through them (TransferRecord, Allocation's
// `published` and `owner`) are the node lock's too, which the analysis
// cannot name from inside those records, so the functions touching them
// require `mu`. A session's datatypes have their own lock, taken inside
// `mu` or alone, never the other way round (session.h says what of a
// session is whose). Callbacks to clients run outside it.
#pragma once

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "channels/cma/client_process.h"
#include "channels/cma/own_hops.h"
#include "channels/gpu_memory.h"
#include "core/log_limiter.h"
#include "daemon/node/byte_budget.h"
#include "daemon/node/checkpoint_files.h"
#include "daemon/node/copies.h"
#include "daemon/node/distributed.h"
#include "daemon/node/instances.h"
#include "daemon/node/introspection.h"
#include "daemon/node/node.h"
#include "daemon/node/pools.h"
#include "daemon/node/redistribute_op.h"
#include "daemon/node/session.h"
#include "daemon/node/sessions.h"
#include "daemon/node/shared_memory.h"
#include "daemon/node/traffic_classes.h"
#include "daemon/node/transfer_history.h"
#include "daemon/node/transfer_metrics.h"
#include "daemon/node/watches.h"

namespace isometry {

using NodeClock = std::chrono::steady_clock;

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
  // A ZCM pool where a GPU exists: each allocation is pinned and mapped
  // for the GPUs while it lives (null: plain host memory).
  std::shared_ptr<GpuMemory> gpu;
  std::atomic<bool> pin_warned{false};

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
  // Unpins shm (ZCM) when it goes, before shm is unmapped; null: not pinned.
  std::shared_ptr<void> pinned;
  bool published = false;  // the node lock's (Node::Impl::mu)
  // Another session mapped it (node::Pools::Map of a published allocation): it
  // can never be watched. The node lock's.
  bool mapped_by_others = false;
  // Active Access: its regions and log while watched; the node lock's.
  std::shared_ptr<WatchState> watch;
  ~Allocation() {
    if (watch) watch->Close("the allocation was freed");
    if (pool) pool->used -= shm.size();
  }
};

// A range of a client's own memory (node::Instances::RegisterPrivate). Constant
// after registration but `alive` and `published`, which are the node
// lock's.
struct PrivateRange {
  uint64_t id = 0;
  uint64_t session = 0;  // the registering session's number
  uid_t uid = 0;         // its uid: only sessions of this uid may use it
  uint64_t address = 0;
  uint64_t bytes = 0;
  std::shared_ptr<const ClientProcess> process;  // pinned by its pidfd
  // Whether every page of it was mapped writable at registration; if
  // not, copies may only read it (CheckWritable), and the first
  // read-only mapping, as the process's maps showed it, says why.
  bool writable = true;
  std::string read_only_pages;
  bool published = false;
  std::optional<node::Instances::ServeWindowRef> serve;  // set by PublishPrivate
  bool alive = true;                                     // false once its session ended
};

// OK if copies may write into `r`; INVALID_ARGUMENT naming `what` (the
// instance, the rank) and the read-only pages otherwise (node_private.cc).
Status CheckWritable(const PrivateRange& r, std::string_view what);

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
  std::shared_ptr<PrivateRange> private_range;  // PROCESS instances; offset is in it
  // Datatype instances: where the stream lies from `offset` (the
  // first byte it touches); `shape` is then StreamShape(form->bytes).
  std::shared_ptr<const EndForm> form;
};

struct TransferRecord {
  uint64_t id = 0;
  SessionOwner owner;                    // owner.session is the session's number
  std::optional<Transfer> handle;        // set once the runtime accepted it, until it ended
  std::optional<TransferSummary> ended;  // what is kept of `handle` once it ended
  std::shared_ptr<CrossTransfer> cross;  // or: a cross-node copy this node started
  std::shared_ptr<Allocation> src, dst;  // kept alive until the transfer ends
  bool finished = false;
  Status status;
  // Most copies have one (their caller's): kept inline, no allocation.
  absl::InlinedVector<TransferCallback, 1> waiters;
  // Copy() was given its own on_done (a gRPC Copy with wait, a ring entry):
  // that caller answers the transfer, so the session callback (the gRPC
  // Attach stream's completion event) is not sent too: one message per
  // small copy instead of two on the client's connection.
  bool caller_answers = false;
  // Set once it ended (Finalize), never changed after: the callbacks it
  // owes and the history share it.
  TransferReport final_report;
  std::string qos_class;
  int priority = 0;                       // what it runs at (the runtime's, for local copies)
  std::optional<int> requested_priority;  // set when its class's ceiling lowered it
};

// The end of a copy that touches watched regions (node_watch.cc): once
// the runtime has moved its bytes (into a scratch buffer for a put) and
// Copy() knows its id, the source's watch logs the get, then the
// destination's applies and logs the put, then `finish` completes it.
class ActiveCopy : public std::enable_shared_from_this<ActiveCopy> {
 public:
  std::shared_ptr<WatchState> get_watch, put_watch;
  ActiveAccess get, put;
  std::function<void(Status)> finish;  // set before the copy is submitted

  void Completed(Status s) ABSL_LOCKS_EXCLUDED(mu_);
  void Registered(uint64_t transfer) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Start();
  void StartPut();
  absl::Mutex mu_;
  bool completed_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  Status status_ ABSL_GUARDED_BY(mu_);
};

// node::Pools::Write and node::Pools::Read through a watch: a put of `data` or a get of
// `length` bytes at `offset` of the watched allocation, finished by the
// watch's worker (waited for here). False when no region is touched (the
// caller moves the bytes itself).
// A put's scratch buffer is charged to `budgets` (the writer session's
// and the node's: RESOURCE_EXHAUSTED past either).
Result<bool> RunActiveBytes(WatchState& w, active::Op op, uint64_t session, uint64_t offset,
                            std::string_view data, uint64_t length,
                            std::vector<std::shared_ptr<ByteBudget>> budgets);

// A cross-node copy's end in an allocation watched by `watch`
// (node_watch.cc): null when the end touches no watched region,
// PERMISSION_DENIED when a region denies `op`. A put's `local` is pointed
// at the scratch buffer the watch applies from (docs/guides/active-access.md, "Active Access").
Result<std::shared_ptr<ActiveEnd>> PrepareActiveEnd(
    const std::shared_ptr<WatchState>& watch, active::Op op, InstanceRef& local,
    uint64_t instance_offset, const std::optional<Box>& box, const AccessSource& source,
    std::vector<std::shared_ptr<ByteBudget>> budgets);

// A found transfer record as Cancel, GetTransfer and WhenDone see it.
struct FoundTransfer {
  TransferRecord* record = nullptr;
  bool in_flight = false;  // in `active`; else among the last ended
};

// An ended transfer as the history keeps it: its final report, and the
// path it ran (shared with the plan cache) for RecentTransfers to give as
// text. A copy on this node shares its record's report (what is left of
// the record once ended is small); a cross-node copy's is a copy with its
// path's text already, so that the history never holds a cross-node
// operation alive.
struct KeptTransfer {
  std::shared_ptr<const TransferReport> report;
  std::shared_ptr<const Path> path;
};

// Callbacks owed to clients for one ended transfer, run outside the node
// lock. They share its record's final report rather than each taking a
// copy.
struct PendingCalls {
  std::shared_ptr<const TransferRecord> record;
  absl::InlinedVector<TransferCallback, 2> callbacks;

  void Run() const {
    for (const TransferCallback& cb : callbacks) cb(record->final_report);
  }
};

// A redistribution some of whose ranks joined on other nodes, as
// node::Distributed::Redistribute found it (node_redistribute_cluster.cc goes on).
struct ClusterRedistribution {
  uint64_t session = 0;
  SessionOwner owner;
  std::string ns, producer, consumer;
  std::shared_ptr<DistributedInstance> local[2];  // this node's ranks, if any
  // Per side, the grant digest every node's ranks must have joined with
  // (DistributedInstance::grant_digest; the gRPC namespace only).
  std::string grant_digest[2];
};

struct Node::Impl {
  // ---- constant after Create ----
  Config config;
  std::unique_ptr<Runtime> runtime;
  CrossCopier* cross = nullptr;  // set before serving
  const NodeClock::time_point started = NodeClock::now();
  std::vector<std::shared_ptr<PoolAccount>> pools;
  rdma::RdmaChoice rdma;
  // The node's bounds over every session's datatypes and watch scratch
  // buffers (peers' puts into watched allocations included).
  std::shared_ptr<ByteBudget> scratch_all, datatypes_all;
  void MakeBudgets();  // the two above, from the config (Node::Create)
  // Watch workers running (one per watched allocation; WatchState).
  const std::shared_ptr<std::atomic<uint32_t>> watch_workers =
      std::make_shared<std::atomic<uint32_t>>(0);
  // The checkpoint last written into each checkpoint's files.
  CheckpointMarks checkpoint_marks;
  // What every session's hop window did (isoctl status, /metrics).
  const std::shared_ptr<OwnHopsTotals> own_hops_totals = std::make_shared<OwnHopsTotals>();
  // Direct read leases granted, revoked and refused (isoctl status).
  std::atomic<uint64_t> leases{0}, leases_revoked{0}, leases_refused{0};
  static constexpr size_t kFinishedKept = 4096;

  // ---- the tables ----
  mutable absl::Mutex mu;
  absl::CondVar idle_cv;  // `active` became empty
  std::map<uint64_t, std::shared_ptr<Session>> sessions ABSL_GUARDED_BY(mu);  // by public number
  // The [qos] in force (config.qos until the first reload) and, per class,
  // the copies whose priority its ceiling lowered (node_qos.cc).
  QosConfig qos ABSL_GUARDED_BY(mu);
  std::map<std::string, uint64_t> qos_clamped ABSL_GUARDED_BY(mu);
  uint64_t next_session ABSL_GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::shared_ptr<Allocation>> allocations ABSL_GUARDED_BY(mu);
  // Bytes of published allocations, live or orphaned, by (publisher uid,
  // pool index): each within the pool's client_quota (node::Pools::Publish).
  std::map<std::pair<int64_t, size_t>, uint64_t> published_bytes ABSL_GUARDED_BY(mu);
  std::map<uint64_t, Instance> instances ABSL_GUARDED_BY(mu);
  std::map<uint64_t, std::shared_ptr<TransferRecord>> active ABSL_GUARDED_BY(mu);
  // The last kFinishedKept finished records, by id (Wait, GetTransfer and
  // every gRPC completion event look one up, and a scan of the list cost a
  // noticeable share of a small copy; docs/benchmarks/design-measurements.md,
  // "Daemon bookkeeping"),
  // and their ids oldest first, the order they are forgotten in. An open
  // table: a copy that ends allocates no node for its entry.
  absl::flat_hash_map<uint64_t, std::shared_ptr<TransferRecord>> finished ABSL_GUARDED_BY(mu);
  std::deque<uint64_t> finished_order ABSL_GUARDED_BY(mu);
  // The last daemon.transfer_history ended transfers (ListTransfers
  // recent): their final reports, shared with their records.
  TransferHistory<KeptTransfer> history ABSL_GUARDED_BY(mu);
  TransferMetrics ended_metrics ABSL_GUARDED_BY(mu);  // GET /metrics
  uint64_t next_allocation ABSL_GUARDED_BY(mu) = 1;
  uint64_t next_instance ABSL_GUARDED_BY(mu) = 1;
  std::map<uint64_t, std::shared_ptr<PrivateRange>> private_ranges ABSL_GUARDED_BY(mu);
  uint64_t next_private ABSL_GUARDED_BY(mu) = 1;
  std::atomic<uint64_t> next_datatype{1};  // handles, unique on the node
  // A path's text and hop names, formatted once per plan: copies on a
  // cached plan share its Path, and formatting layouts for each copy's
  // report was a visible share of a gRPC Copy's reply
  // (docs/benchmarks/design-measurements.md, "Daemon bookkeeping"). Keyed by
  // the Path itself (held, so its address is not reused); cleared when
  // kPathTextsKept are held.
  struct PathText {
    std::string path;
    std::vector<HopReport> hops;  // chunk counts zero
  };
  static constexpr size_t kPathTextsKept = 256;
  mutable std::unordered_map<std::shared_ptr<const Path>, PathText> path_texts ABSL_GUARDED_BY(mu);
  // Forms computed vs taken from a handle's memo (isoctl status).
  std::atomic<uint64_t> translations{0};
  std::atomic<uint64_t> translations_memoized{0};
  // Ids of cross-node copies this node starts: the node's ids with
  // kCrossTransferBit (runtime.h), apart from the runtime's.
  uint64_t next_cross ABSL_GUARDED_BY(mu) = kCrossTransferBit;
  bool draining ABSL_GUARDED_BY(mu) = false;
  // (time, bytes done per channel) over the last second.
  std::deque<std::pair<NodeClock::time_point, std::vector<uint64_t>>> samples ABSL_GUARDED_BY(mu);
  std::vector<double> current_bps ABSL_GUARDED_BY(mu);
  std::vector<double> peak_bps ABSL_GUARDED_BY(mu);

  // Session open/close lines: a client that attaches in a loop writes a
  // few per 10 s, then one line counting the rest (per uid; gRPC together).
  LogLimiter session_lines{20, std::chrono::seconds(10)};

  // ---- sessions (node_sessions.cc) ----
  bool SessionLineAllowed(const Credentials& creds);
  // The session a token names (node::Sessions::Resolve): the same answer for a wrong
  // token and a closed session, and the token is never echoed (errors reach
  // logs and terminals).
  const Session* FindByTokenLocked(const std::string& token) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The live session `ref` names; for none or a closed one,
  // FAILED_PRECONDITION "unknown or closed session" (FindSession) or null.
  const Session* FindSessionOrNull(SessionRef ref) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Result<Session*> FindSession(SessionRef ref) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The same, shared: for work that goes on outside the node lock (its
  // datatypes, which have their own lock; session.h).
  Result<std::shared_ptr<Session>> SessionFor(SessionRef ref) ABSL_LOCKS_EXCLUDED(mu);
  // The session `ref` when it may start one more transfer: UNAVAILABLE
  // while draining, RESOURCE_EXHAUSTED at daemon.max_transfers_per_session.
  Result<Session*> TransferSessionLocked(SessionRef ref) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The class `s` belongs to by the rules in force (node_qos.cc).
  const std::string& QosClassByRulesLocked(const Session& s) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void ReleaseSessionLocked(Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- pools (node_pools.cc) ----
  // ---- private ranges (node_private.cc) ----
  // The range `id` if session `s` may use it: its own, or published by a
  // session of its uid. NOT_FOUND otherwise (another uid's range is not
  // told apart from none).
  Result<std::shared_ptr<PrivateRange>> UsablePrivateRange(const Session& s, uint64_t id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Status RegisterPrivateInstanceLocked(Session& s, const InstanceSpec& spec, uint64_t total,
                                       uint64_t& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void ReleasePrivateLocked(Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Tells every session holding a lease on range `id` that it ended.
  void RevokeLeasesLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  Result<std::shared_ptr<Allocation>> UsableAllocation(uint64_t session, uint64_t id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  std::shared_ptr<PoolAccount> PoolByName(const std::string& name) const;

  // ---- instances (node_instances.cc) ----
  // Registers an instance whose storage is [spec.offset, + total) (checked
  // against its allocation, range or file name here) and returns its id.
  Result<uint64_t> PlaceInstanceLocked(Session& s, const InstanceSpec& spec, uint64_t total,
                                       const std::shared_ptr<const EndForm>& end_form)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- datatypes (node_datatypes.cc) ----
  // The form end of a datatype instance, its form rebased onto the first
  // byte it touches, which is `storage_offset` into the storage. Computes
  // the form outside the lock (it may walk up to 2^21 runs).
  Result<std::shared_ptr<const EndForm>> DatatypeEnd(SessionRef session, const InstanceSpec& spec,
                                                     uint64_t& storage_offset)
      ABSL_LOCKS_EXCLUDED(mu);
  // A copy with a datatype on either end: the layout end (if any) becomes
  // the form end of `box` of it (its whole bounds by default). For a
  // copy on this node (`local`), a datatype end whose stream is contiguous
  // bytes against a layout end instead becomes that layout's AOS C-order
  // layout over the same bytes, and the copy an ordinary layout copy of
  // `box` (request.box to set): no form, so no form bound, whatever the
  // fields; and a layout end whose stream is a list of runs is described
  // chunk by chunk (EndForm::layout), bounded per chunk only.
  Status PackEndsLocked(const Instance* const ends[2], const std::optional<Box>& box,
                        CopyRequest& request, bool local = false) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- distributed instances (node_distributed.cc) ----
  // By namespace ("uid 1000/" or "grpc/") and name.
  std::map<std::string, std::shared_ptr<DistributedInstance>> distributed ABSL_GUARDED_BY(mu);
  // Removes every distributed instance `session` is a rank of; returns the
  // redistributions they were part of (the caller aborts them unlocked).
  // `ended` receives the keys (namespace + name) of the instances removed.
  std::vector<std::shared_ptr<CrossTransfer>> ReleaseDistributedLocked(
      uint64_t session, std::vector<EndedDistributed>& ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The ranks' local instances of `d` as copy ends (node_redistribute.cc);
  // `destination`: the consumer's (DSK files refused there).
  Result<std::vector<RankEnd>> RankEndsLocked(const DistributedInstance& d, bool destination) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // ABORTED (naming `shown` and `what` was being planned) unless `key`
  // still names `d`: it ended, or was replaced, meanwhile.
  Status StillCurrentLocked(const std::string& key, const std::shared_ptr<DistributedInstance>& d,
                            const std::string& shown, const char* what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Result<RankEnd> RankEndLocked(const DistributedInstance& d, size_t rank, bool destination) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- distributed instances across nodes (node_redistribute_cluster.cc) ----
  // node::Distributed::Redistribute where not every rank joined here.
  Result<uint64_t> RedistributeAcrossNodes(ClusterRedistribution c,
                                           const std::shared_ptr<TransferRecord>& record)
      ABSL_LOCKS_EXCLUDED(mu);
  // The ranks of `d` joined on this node, as peers see them.
  DistributedRanks LocalRanksLocked(const DistributedInstance& d) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Runs the pieces of `part`'s producer ranks on this node (for `caller`,
  // a node's name); `done` once with its end and the bytes moved.
  Result<std::shared_ptr<CrossTransfer>> StartPart(
      const RedistributePart& part, const std::string& caller,
      const std::function<void(Status, uint64_t)>& done) ABSL_LOCKS_EXCLUDED(mu);
  // A redistribution piece's destination a peer names (ResolveForPeer).
  Result<CrossEnd> ResolveRankForPeer(const InstanceSpec& spec,
                                      std::shared_ptr<const EndForm> end_form) const
      ABSL_LOCKS_EXCLUDED(mu);
  // Ends the distributed instance `key` here (a peer said it ended there).
  std::vector<std::shared_ptr<CrossTransfer>> EndDistributedLocked(const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Ties a planned redistribution to its two sides (ABORTED if either has
  // ended since) and records it as the session's transfer.
  Status AdoptRedistributionLocked(uint64_t session, const std::string& ns,
                                   const std::shared_ptr<DistributedInstance> sides[2],
                                   const std::shared_ptr<CrossTransfer>& op,
                                   const std::shared_ptr<TransferRecord>& record,
                                   PendingCalls& calls, bool& adopted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- Active Access (node_watch.cc) ----
  // A copy's watched ends: whether either touches a watched region (then
  // `active` is set up and the request's destination may be redirected
  // into a scratch buffer); PERMISSION_DENIED when a region denies it.
  // A put's scratch is charged to `budgets` (the session's and the
  // node's), which every copy passes: a pair, not a vector to allocate.
  Result<std::shared_ptr<ActiveCopy>> PrepareActiveLocked(
      const Instance* const ends[2], const std::optional<Box>& box, CopyRequest& request,
      uint64_t session, const std::array<std::shared_ptr<ByteBudget>, 2>& budgets)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The session's watched allocations and their regions.
  struct WatchedCount {
    uint64_t allocations = 0, regions = 0;
  };
  WatchedCount WatchedLocked(const Session& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // OK when `priority` is within the session's ceiling (daemon.max_priority,
  // daemon.priority_ceilings), else PERMISSION_DENIED naming it.
  Status PriorityAllowedLocked(const Session& s, int priority) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // node::Watches::Watch once its file log (if any) is open: the checks under the
  // lock and the region added.
  Result<WatchHandle> AddWatch(SessionRef session, const WatchSpec& spec, RegionSpec rs)
      ABSL_LOCKS_EXCLUDED(mu);
  // Redistributions never run through watches (node_watch.cc): OK unless
  // bytes [begin, end) of `a` back a rank of a distributed instance
  // (FAILED_PRECONDITION naming it), so no watch is set where one would run.
  Status NoDistributedRankLocked(const Allocation& a, uint64_t begin, uint64_t end) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A rank's local instance `in` as a redistribution end (an access `op`),
  // or joining one (no op): OK unless it touches a watched region
  // (PERMISSION_DENIED where the region denies `op`, counted there, else
  // FAILED_PRECONDITION; `what` names the rank).
  Status RankUnwatchedLocked(const Instance& in, std::optional<active::Op> op,
                             const std::string& what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // ---- copies (node_copies.cc) ----
  // The record of `transfer`, in flight or among the last kFinishedKept
  // ended, if the caller may act on it (`what` it wants to do goes into the
  // refusal).
  Result<FoundTransfer> TouchableLocked(SessionRef session, uint64_t transfer, bool is_operator,
                                        std::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // `detailed` adds the path text and per-hop progress: string work kept
  // off the completion path (the ring's latency), done on introspection.
  TransferReport BuildReport(const TransferRecord& r, bool detailed = true) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  const PathText& TextOfLocked(const std::shared_ptr<const Path>& path) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // node_halves.cc: the cluster layer's halves (none without peers).
  // Never under mu: the cluster layer takes its own lock.
  std::vector<HalfReport> Halves(uint64_t id, bool running_only) const ABSL_LOCKS_EXCLUDED(mu);
  uint64_t RunningRemoteHalves() const ABSL_LOCKS_EXCLUDED(mu);
  // Moves a finished record out of `active` and returns the callbacks to
  // run (outside the lock).
  PendingCalls Finalize(const std::shared_ptr<TransferRecord>& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void OnRuntimeDone(const std::shared_ptr<TransferRecord>& r, Status s) ABSL_LOCKS_EXCLUDED(mu);
  // A copy's ends and checks, under the lock: what to submit.
  struct ResolvedCopy {
    CopyRequest request;  // its qos_class is the session's
    std::optional<CrossCopySpec> cross;
    uint64_t session = 0;
    std::shared_ptr<ActiveCopy> active;  // touches watched regions
  };
  // Where a local instance's bytes are, as the runtime takes an end: its
  // allocation's mapping, its DSK file, or its private range (an instance
  // of another node: an empty ref).
  InstanceRef LocalRefLocked(const Instance& in) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Fills `resolved` (a fresh one: filled in place, as it is large).
  Status ResolveCopyLocked(SessionRef session, const CopySpec& spec, TransferRecord& record,
                           ResolvedCopy& resolved) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Records the priority a copy runs at, and that its class's ceiling
  // lowered it from `asked` if it did (isometry_qos_clamped_total).
  void NoteClampLocked(TransferRecord& record, int asked, int runs_at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Puts an accepted transfer among the session's; false if the session
  // ended meanwhile (the caller cancels it).
  bool AdoptLocked(uint64_t session, const std::shared_ptr<TransferRecord>& record,
                   PendingCalls& calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Result<uint64_t> StartCross(uint64_t session, const std::shared_ptr<TransferRecord>& record,
                              CrossCopySpec spec, const CopySpec& copy) ABSL_LOCKS_EXCLUDED(mu);

  // ---- the services (node.h): views of this, made with it ----
  struct Services {
    explicit Services(Impl& i)
        : sessions(i),
          pools(i),
          instances(i),
          distributed(i),
          watches(i),
          copies(i),
          traffic_classes(i),
          introspection(i) {}
    node::Sessions sessions;
    node::Pools pools;
    node::Instances instances;
    node::Distributed distributed;
    node::Watches watches;
    node::Copies copies;
    node::TrafficClasses traffic_classes;
    node::Introspection introspection;
  };
  Services services{*this};
};

// Shared checks.
// What an instance spec describes, for messages: "layout 'F,x' over
// [0,8)" or "3 x vector(...)".
std::string InstanceWhat(const InstanceSpec& spec);
// A network channel's bounds for isoctl channels (node_halves.cc).
std::string NetworkLimits(const ClusterConfig& c);
std::optional<uint64_t> TokenNumber(const std::string& token);
SessionOwner OwnerOf(const Session& s);
// An instance's storage [offset, offset + bytes) must not wrap 2^64.
Status CheckInstanceEnd(uint64_t offset, uint64_t bytes);
// Explained plans (node_explain.cc): hop `h` of `path` (its rate, no
// request or buffer size), and a plan's alternatives into `rep`.
PlanHopReport ReportHop(const Path& path, size_t h, const Topology& topo);
void ReportAlternatives(const Alternatives& alts, const Topology& topo, PlanReport& rep);

}  // namespace isometry
