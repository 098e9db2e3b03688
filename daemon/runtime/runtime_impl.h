// The runtime's insides, shared by the files that implement it by role:
//   runtime.cc          the public API (Runtime, Transfer), start and stop
//   runtime_calibration.cc  measuring channels and swapping the planner
//   transfer_build.cc   validating a request, planning it, opening its ends,
//                       sizing its buffers and making its XDs
//   admission.cc        taking buffers for transfers (Isometry §3.6), and
//                       finishing or aborting them
//   runtime_qos.cc      traffic classes: reload, picking by share, reports
//   dma_worker.cc       the DMA workers (Isometry §3.5): one thread per
//                       channel issuing requests by priority, and the inline
//                       latency path
// Nothing outside daemon/runtime includes this header.
//
// Locking: `mu` guards the scheduling state (pools, workers, queues,
// statistics) and every TransferState field its header says is the
// runtime's; the analysis cannot name that lock from TransferState (it
// lives here), so those fields carry the rule as a comment and every
// function touching them here requires `mu`. A transfer's completion block
// has its own lock (TransferState::done_mu), taken inside `mu`, never
// around it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "channels/channel.h"
#include "channels/channel_backend.h"
#include "channels/gpu_memory.h"
#include "core/histogram.h"
#include "daemon/runtime/disk_memory.h"
#include "daemon/runtime/qos_scheduler.h"
#include "daemon/runtime/ring_stores.h"
#include "daemon/runtime/runtime.h"
#include "daemon/runtime/staging_pool.h"
#include "daemon/runtime/transfer_state.h"
#include "layout/chunk_compiler.h"
#include "planner/planner.h"

namespace isometry {

using RuntimeClock = std::chrono::steady_clock;

// The DMA worker of one channel (Isometry §3.5): its XD pool in priority
// order and its in-flight accounting. Its fields are guarded by the
// runtime's `mu` (see above); `cv` waits on it.
struct DmaWorker {
  size_t channel = 0;
  int max_in_flight = 1;
  std::vector<XdState*> pool;  // priority desc; equal priorities take turns (RotateAmongEquals)
  int in_flight = 0;           // requests holding one of max_in_flight
  // The channel's express lane (ChannelCaps::express): a request of at
  // most kExpressRequestBytes may go beyond max_in_flight, one at a time.
  bool express_lane = false;
  int express_in_flight = 0;
  // Requests the channel handed outside its threads (Channel::RunsElsewhere:
  // a client's own hop): in flight, but holding no slot.
  int elsewhere = 0;
  uint64_t requests_done = 0;
  uint64_t bytes_done = 0;
  uint64_t errors = 0;  // failed requests, cancellations aside
  uint64_t dispatch_seq = 0;
  // How long XDs waited between their first chunk being ready and its
  // request going out (the metrics' queue wait), per priority, highest
  // first. A client picks its priority, so the list is bounded: priorities
  // past kMaxWaitPriorities share the last entry (kOtherPriorities).
  static constexpr size_t kMaxWaitPriorities = 16;
  std::vector<std::pair<int, std::unique_ptr<Histogram>>> waits;
  Histogram& WaitOf(int priority);
  QosWorker qos;  // its classes' shares (qos_scheduler.h)
  absl::CondVar cv;
  std::thread thread;
};

// Runs a finished transfer's notifications outside the runtime lock.
struct Completion {
  std::shared_ptr<TransferState> transfer;
  Status status;  // its final status, as Finish set it (no lock to read it again)
  void Run();
};

struct Runtime::Impl {
  explicit Impl(const RuntimeConfig& c)
      : config(c), compiler(c.program_cache_entries, c.program_cache_bytes, 4096, 64ull << 20) {
    next_id = TransferIdBase(c.node) + 1;
  }

  // ---- constant after Create (read without a lock) ----
  RuntimeConfig config;
  Topology topo;  // edges' throughput functions change on recalibration (under calibrate_mu)
  Runtime* self = nullptr;
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<std::shared_ptr<DiskMemory>> disks;  // per memory (null: not DSK)
  // FBM staging and ZCM pinning (null: no GPU, or neither kind
  // configured); outlives `pools`, whose blocks it allocated.
  std::shared_ptr<GpuMemory> gpu;
  ChunkCompiler compiler;  // every chunk's program; thread-safe itself
  // Replaced whole (atomic_store) when calibration changes the graph; a
  // plan in progress keeps the planner it started with.
  std::shared_ptr<Planner> planner;
  // Set after each replacement, from one counter for every runtime in the
  // process: a thread keeps the planner it last used while this stays the
  // same (PlannerOfThread).
  std::atomic<uint64_t> planner_generation{0};
  absl::Mutex calibrate_mu;  // one calibration at a time
  // Counts of the planners replaced so far, so that Stats() stays
  // monotonic across recalibrations; taken around the swap and the read.
  mutable absl::Mutex planner_stats_mu;
  PlannerStats retired_planners ABSL_GUARDED_BY(planner_stats_mu);

  // ---- scheduling state ----
  mutable absl::Mutex mu;
  absl::CondVar drained_cv;  // `active` became empty
  std::vector<StagingPool> pools ABSL_GUARDED_BY(mu);
  std::vector<std::unique_ptr<DmaWorker>> workers ABSL_GUARDED_BY(mu);  // contents too
  std::vector<std::shared_ptr<TransferState>> waiting ABSL_GUARDED_BY(mu);
  std::map<uint64_t, std::shared_ptr<TransferState>> active ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  RuntimeStats stats ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // The classes in force (qos_scheduler.h), replaced whole on reload, and
  // the staging bytes each class holds in each pool ([class][pool]).
  std::shared_ptr<const QosTable> qos ABSL_GUARDED_BY(mu);
  std::vector<std::vector<uint64_t>> class_held ABSL_GUARDED_BY(mu);
  // Per class: how long its XDs' first chunks waited for their channel.
  std::vector<std::unique_ptr<Histogram>> class_wait ABSL_GUARDED_BY(mu);
  // A transfer being admitted whose worker is not woken: its submitting
  // thread issues it (IssueAtOnce). Set only around that Enqueue.
  const TransferState* issued_by_submitter ABSL_GUARDED_BY(mu) = nullptr;
  // How memcpy hops of large local copies write intermediate rings:
  // calibration's choice first (kNodePipeStreamedCurve), then the pace
  // their epochs kept (ring_stores.h).
  RingStores ring_stores ABSL_GUARDED_BY(mu);

  // ---- names and lookups (constant data) ----
  bool IsDisk(MemoryId id) const;
  std::vector<ChannelKind> ChannelKinds() const;  // by channel index
  bool IsLocal(MemoryId id) const { return id.node == config.node; }
  size_t PoolIndex(MemoryId id) const;
  const std::shared_ptr<DiskMemory>& DiskOf(MemoryId id) const { return disks[PoolIndex(id)]; }
  // A memory's name for messages: this node's by its config, another
  // node's as the cluster named it for a cross-node part ("b:sys0"), else
  // by its id.
  std::string MemoryName(MemoryId id, const RemotePart* part = nullptr) const;
  std::shared_ptr<Planner> CurrentPlanner() const { return std::atomic_load(&planner); }
  // The current planner, as this thread last took it: every copy plans, and
  // an atomic shared_ptr load takes a lock (libstdc++) and counts the
  // planner up and down again. A thread keeps a replaced planner (and its
  // plan cache) until it plans again.
  Planner& PlannerOfThread() const;

  // ---- calibration (runtime_calibration.cc; Isometry §4.1) ----
  Result<Calibration> LoadOrMeasure(bool force);
  CalibrationSite SiteOf(int channel) const;
  Status ApplyCalibration(const Calibration& cal);
  void MakePlanner();

  // ---- building a transfer (transfer_build.cc; no lock: constant data) ----
  Result<std::shared_ptr<TransferState>> Build(CopyRequest& req);
  Status MatchEnds(CopyRequest& req) const;
  Status CheckEnds(const CopyRequest& req, bool sending, bool receiving) const;
  Result<Box> CheckBox(const CopyRequest& req) const;
  Status CheckInstance(const InstanceRef& ref, std::string_view what) const;
  Status PlanPath(TransferState& t, const CopyRequest& req) const;
  std::shared_ptr<const Path> StagedPath(const CopyRequest& req, const Path& planned,
                                         const Box& box) const;
  Result<std::shared_ptr<const Path>> MakePath(const InstanceRef& src, const InstanceRef& dst,
                                               const Box& box,
                                               const std::vector<HopSpec>& via) const;
  // `path` re-evaluated for a copy without the closing fdatasync (disk
  // writes at their unsynced curves); nullopt where nothing changes (no
  // such write on it, or the model refuses it).
  std::optional<Path> Unsynced(const Path& path, const Box& box, const FieldSpace& fields) const;
  Status AdoptRemotePath(TransferState& t, const RemotePart& part) const;
  Result<int> NetChannel(uint64_t key, const std::string& peer) const;
  Status OpenDiskEnds(TransferState& t, const CopyRequest& req, bool src_disk, bool dst_disk) const;
  Result<ChunkGrid> GridFor(const Path& path, const Box& box, const FieldSpace& fields) const;
  // The ring depth of `path`'s intermediate buffers: runtime.slots_per_buffer,
  // and at least kFileWriteSlots for a pipeline from memory into a file.
  int SlotsFor(const Path& path) const;
  Result<ChunkGrid> GridOfCopy(const std::shared_ptr<const Path>& path, const Box& box,
                               const FieldSpace& fields) const;
  Status SizeBuffers(TransferState& t, const CopyRequest& req) const;
  void MakeXds(TransferState& t) const;
  bool TimesRing(const TransferState& t, size_t h) const;

  // ---- admission and completion (admission.cc) ----
  bool TryAdmit(TransferState& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The staging bytes `t`'s buffers take from each pool (index: pool).
  std::vector<uint64_t> NeedPerPool(const TransferState& t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Returns a buffer's block to its staging pool or hop window.
  void GiveBuffer(RingBuffer& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void AdmitWaiting() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Admitted(size_t waiting_index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);  // now running
  // Whether `t` would take more than its class's weighted share of a
  // staging pool that another class's waiting transfer needs.
  // `waiting_per_class`: the transfers of each class still waiting.
  bool OverShare(const TransferState& t, const std::vector<size_t>& waiting_per_class) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Whether a cap of 0 pauses `t`'s class on a channel `t` uses here.
  bool Paused(const TransferState& t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void HoldBuffers(const TransferState& t, bool take) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void InstallQos(std::shared_ptr<const QosTable> table) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Enqueue(std::shared_ptr<TransferState> t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void NotifyWorkers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  Completion Finish(const std::shared_ptr<TransferState>& t, Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Stops issuing new requests; the transfer finishes when the last request
  // in flight returns.
  Completion Abort(const std::shared_ptr<TransferState>& t, Status why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Cancel(const std::shared_ptr<TransferState>& t) ABSL_LOCKS_EXCLUDED(mu);
  void AbortNow(const std::shared_ptr<TransferState>& t, Status why) ABSL_LOCKS_EXCLUDED(mu);
  static const XdState& FirstLocalXd(const TransferState& t);

  // ---- the DMA workers and the inline path (dma_worker.cc) ----
  bool RunsInline(const TransferState& t) const;
  Completion RunInline(const std::shared_ptr<TransferState>& t) ABSL_LOCKS_EXCLUDED(mu);
  void WorkerLoop(DmaWorker& w) ABSL_LOCKS_EXCLUDED(mu);
  // Issues x's next chunk (PickXd's choice) on this thread; drops the lock
  // around compiling and submitting, and holds it again on return.
  void Issue(DmaWorker& w, XdState* x, bool express, RuntimeClock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A transfer the submitting thread may issue itself (IssueAtOnce).
  bool IssuesAtOnce(const TransferState& t) const;
  void IssueAtOnce(TransferState& t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  bool WorkerMayIssue(DmaWorker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Whether chunk k of `x` is written with streaming stores; counts it.
  bool StreamsChunk(XdState& x, uint64_t k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void ObserveRingEpoch(XdState& x) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void IssueReady(DmaWorker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  using ReadyWorkers = absl::InlinedVector<DmaWorker*, 4>;
  void WakeAfter(const TransferState& t, const XdState& x, bool express, bool class_capped,
                 ReadyWorkers& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The XD `w` issues next, by class share (qos_scheduler.h); null if none
  // may go now. `wake`: when a rate cap lets a held class go, if sooner.
  // `express`: it goes beyond max_in_flight, on the channel's express lane.
  XdState* PickXd(DmaWorker& w, RuntimeClock::time_point now, RuntimeClock::time_point& wake,
                  bool& express) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A class other than `own` waits on `w` with nothing in flight there.
  bool OtherClassWaits(const DmaWorker& w, size_t own) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // `elsewhere`: the request was counted in DmaWorker::elsewhere, not
  // in_flight; `express`: in express_in_flight.
  void OnRequestDone(const std::shared_ptr<TransferState>& t, XdState* x, uint64_t k,
                     uint64_t bytes, bool elsewhere, bool express, const Status& s)
      ABSL_LOCKS_EXCLUDED(mu);
};

}  // namespace isometry
