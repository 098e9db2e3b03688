// The node: what isometryd serves, independent of any wire protocol.
//
// A Node owns the runtime, the client pools, sessions, allocations,
// registered instances and the record of transfers. The gRPC service and the
// local (shared-memory) server both translate their messages into calls on
// it; neither holds state of its own beyond connections.
//
// Sessions: every client call names a session by its token, an
// unguessable capability handed only to the client that attached (over the
// local socket's handshake or in the first gRPC Attach event). The servers
// resolve it once per request (Resolve) into the SessionRef that node calls
// take (session_ref.h), so the token goes no further. It is never listed or
// logged; others see a session's public number and owner
// (client name, uid, pid). A session ends when its connection ends (the
// local socket closes, the gRPC Attach stream ends); ending it cancels its
// transfers and frees its allocations that were not published. Memory still
// used by a transfer in flight is released when that transfer has drained.
//
// Who may do what (docs/operations/security.md, "Security model"): a session touches its own
// allocations, instances and transfers, and allocations others published;
// the operator (who presents state_dir/operator.token) may also wait on,
// inspect and cancel any transfer, free orphaned published allocations and
// recalibrate.
//
// Thread-safety: every method may be called from any thread. Callbacks
// (transfer completion) run on runtime threads, never under the node lock.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "channels/channel_factory.h"
#include "config/runtime_config.h"
#include "core/datatype.h"
#include "core/instance.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "daemon/node/cross_copy.h"
#include "daemon/node/inventory.h"
#include "daemon/node/node_distributed.h"
#include "daemon/node/node_reports.h"
#include "daemon/node/session_ref.h"
#include "daemon/node/transfer_metrics.h"
#include "daemon/node/watch_reader.h"
#include "daemon/node/watch_state.h"
#include "daemon/runtime/runtime.h"
#include "layout/copy_program.h"
#include "net/rdma/rdma_probe.h"

namespace isometry {

struct InstanceSpec {
  uint64_t allocation = 0;  // pool instances
  uint64_t offset = 0;      // in the allocation, or in the file
  InstanceShape shape;
  std::string memory;  // DSK instances: the DSK memory ...
  std::string file;    // ... and the file, relative to its directory
  // Client process memory: a private range this session registered, or
  // one another session of its uid published (RegisterPrivate).
  uint64_t private_range = 0;
  // "node:memory" in `memory` names another node's memory: with `file`, a
  // file of its DSK memory; without, `allocation` published there.
  // Instead of `shape`: `count` elements of `datatype` whose origin (MPI's
  // buf) is `offset`; every byte they touch must lie in the storage.
  // `datatype_handle`: the datatype is that registered handle of the
  // session (its translation is memoized there).
  std::optional<Datatype> datatype;
  int64_t count = 1;
  uint64_t datatype_handle = 0;
  // Peers only (ResolveForPeer): rank `distributed_rank`'s local instance
  // of distributed instance `distributed` (namespace + name) on this node.
  std::string distributed;
  uint64_t distributed_rank = 0;
};

// How a peer's half of a cross-node copy touches this node's end
// (ResolveForPeer), for Active Access's checks and log entries.
struct PeerAccess {
  bool sending = false;    // the half reads the end (a get), else writes it (a put)
  std::optional<Box> box;  // the copy's box; none: the whole end
  uint32_t node = 0;       // the initiating node's id (its hello's)
  CopySource source;       // the client's session and transfer there
};

// A registered datatype (RegisterDatatype): its handle, MPI's figures and
// its canonical form as text.
struct DatatypeReport {
  uint64_t handle = 0;
  int64_t size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  std::string canonical;
};

// One side of an explained plan: a layout over the request's bounds and
// fields, or `count` elements of `datatype`.
struct PlanSide {
  std::string memory;
  Layout layout;
  std::optional<Datatype> datatype;
  int64_t count = 1;
};

struct ViaHop {
  std::string memory;
  std::string layout;  // parsed against the source instance's dimensions
};

// What a copy runs at: its traffic class, and its priority, lowered to
// the class's max_priority when it asked for more.
struct CopyTerms {
  int priority = 0;
  std::string qos_class;
  int requested_priority = 0;
};

struct CopySpec {
  uint64_t src_instance = 0;
  uint64_t dst_instance = 0;
  std::optional<Box> box;
  int priority = 0;
  std::vector<ViaHop> via;
  bool durable = true;  // DSK destinations: fdatasync before the rename
  // The session runs the hops that touch its own private memory (it waits
  // for this copy and runs posted work: ring::kFlagClientRunsHops).
  bool client_runs_hops = false;
};

// Active Access (node_watch.cc; docs/guides/active-access.md, "Active Access"): a watched
// region of a pool allocation.
struct WatchSpec {
  uint64_t allocation = 0;
  uint64_t offset = 0;  // page aligned
  uint64_t bytes = 0;   // page multiple, or up to the allocation's end
  active::Action action = active::Action::kApplyLog;
  active::Handler handler = active::Handler::kClient;
  uint64_t tag = 0;
  bool log_data = true;
  uint32_t value_bytes = 8;  // kHashInsert
  std::string file_memory;   // kFileLog: a DSK memory ...
  std::string file;          // ... and a file in it (appended to; created)
  // The first watch of an allocation makes its log: 0 = the config's size
  // and full mode.
  uint64_t log_bytes = 0;
  std::optional<LogFullMode> full;
  // The caller hands the log's memfd to the client (local socket), which
  // then reads the ring from its mapping: a kClient region is refused
  // (INVALID_ARGUMENT) while a WatchReader reads it, and other handlers
  // get no fds then.
  bool maps_log = false;
};

// What the owner needs to read the log: fds borrowed from the node, valid
// while the watch lives (the local server passes them with SCM_RIGHTS).
struct WatchHandle {
  uint64_t region = 0;
  uint64_t allocation = 0;
  int log_fd = -1;  // -1 (and event_fd too): not the caller's to hand out
  uint64_t log_mapped_bytes = 0;
  int event_fd = -1;
};

// Incremental checkpoints (node_checkpoint.cc, docs/guides/active-access.md "Incremental
// checkpoints").
struct CheckpointOptions {
  bool full = false;     // rewrite the base and drop the delta chain
  bool compact = false;  // merge the chain into the base afterwards
  // Pages the client wrote through its own mapping: [first, first + n).
  std::vector<std::pair<uint64_t, uint64_t>> client_pages;
};
struct CheckpointReport {
  bool full = false;
  uint64_t pages_written = 0;
  uint64_t bytes_written = 0;
  uint64_t file_bytes = 0;  // the base image
  uint64_t deltas = 0;      // records in the chain afterwards
  uint64_t delta_file_bytes = 0;
  bool compacted = false;
  std::string full_reason;  // why the checkpoint was full ("" for an incremental one)
};
struct RestoreReport {
  uint64_t image_bytes = 0;
  uint64_t deltas = 0;
  uint64_t pages_applied = 0;
};

// Completion callbacks get a report without `path` and `hops` (kept off
// the latency path); GetTransfer() has the full one.
using TransferCallback = std::function<void(const TransferReport&)>;

// An explained plan as isoctl and the gRPC API show it, memory names from
// `topo` (this node's graph, or the cluster's for cross-node plans).
PlanReport ReportPlan(const PlanExplanation& ex, const Topology& topo);
// PlanReport::why of a datatype plan: both ends' forms and runs, and what
// the hops touching them were costed at.
std::string WhyPacked(const PlanExplanation& ex, const PackedEnd& src, const PackedEnd& dst,
                      const Topology& topo);

class Node {
 public:
  // Channels are made by MakeChannel with `context`; with a data plane
  // (the cluster layer's links) each configured peer gets its network
  // channel (PeerChannels), without one peers are not served.
  static Result<std::unique_ptr<Node>> Create(const Config& config,
                                              const ChannelContext& context = {});
  // Cross-node copies go to `copier` (set once, before serving).
  void SetCrossCopier(CrossCopier* copier);
  // This node's end of a cross-node copy a peer asked for: a published
  // allocation, or a file of a DSK memory (spec.memory without prefix).
  // With `packed` (a datatype copy's end, its form checked), spec.shape is
  // ignored: the end is PackedShape(packed->bytes) over packed->span bytes.
  // With `access`, an allocation end that touches watched regions is
  // served as an active put (the half receives) or get (it sends): its
  // CrossEnd::active finishes the half through the watch; a region that
  // denies the access refuses the half (PERMISSION_DENIED).
  Result<CrossEnd> ResolveForPeer(const InstanceSpec& spec,
                                  std::shared_ptr<const PackedEnd> packed = nullptr,
                                  const PeerAccess* access = nullptr) const;
  Runtime& runtime();
  ~Node();

  // Sessions. `on_transfer_done` receives every finished transfer of the
  // session (the completion stream / ring); it may be empty. Refused with
  // RESOURCE_EXHAUSTED beyond daemon.max_sessions, max_sessions_per_uid
  // (credentials known) or max_grpc_sessions (not known).
  Result<OpenedSession> OpenSession(const std::string& client_name, const Credentials& creds,
                                    TransferCallback on_transfer_done);
  void CloseSession(SessionRef session);
  // The session `token` names, resolved at the boundary once per request
  // (session_ref.h); none for a wrong token or a closed session (the same
  // answer, and the token never echoed).
  SessionRef Resolve(const std::string& token) const;

  // Pool memory. The report's fd is what clients map.
  Result<AllocationReport> Allocate(SessionRef session, const std::string& memory, uint64_t bytes);
  // The owner frees its allocation; a published one whose owner has left
  // may be freed by a session of the same (known) uid, or the operator.
  // The operator needs no session of its own to free an orphan (an empty
  // or unknown `session` with `is_operator`).
  Status Free(SessionRef session, uint64_t allocation, bool is_operator = false);
  // Published allocations outlive their session: a uid's published bytes
  // in a memory (live and orphaned; gRPC clients, whose uid is unknown,
  // share one allowance) stay within that memory's client_quota, beyond
  // which Publish is RESOURCE_EXHAUSTED. Publishing twice changes nothing.
  Status Publish(SessionRef session, uint64_t allocation);
  // The orphaned published allocations, for the operator.
  std::vector<OrphanReport> ListOrphans() const;
  // Every session and allocation (`only` null: the operator), or those of
  // the session `only` (node_inventory.cc).
  Result<std::vector<SessionListing>> ListSessions(const SessionRef* only) const;
  Result<std::vector<AllocationListing>> ListAllocations(const SessionRef* only) const;
  // An allocation the session may use: its own or a published one.
  Result<AllocationReport> Lookup(SessionRef session, uint64_t allocation) const;
  // Lookup for a client that maps the allocation's memory itself (the
  // local socket's Map): its stores then reach the bytes without the
  // daemon. So another session gets no memory of a watched allocation
  // (`fd` -1, `watched`: it may still register instances on it and copy),
  // and an allocation another session has mapped can no longer be watched
  // (Watch: FAILED_PRECONDITION).
  Result<AllocationReport> Map(SessionRef session, uint64_t allocation);
  Status Write(SessionRef session, uint64_t allocation, uint64_t offset, std::string_view data);
  Result<std::string> Read(SessionRef session, uint64_t allocation, uint64_t offset,
                           uint64_t length) const;

  // Instances are registered once and copied by handle (FALCON-X's
  // memoized translation: the shape is validated here, once).
  Result<std::pair<uint64_t, uint64_t>> RegisterInstance(SessionRef session,
                                                         const InstanceSpec& spec);
  Status UnregisterInstance(SessionRef session, uint64_t instance);

  // Datatypes (node_datatypes.cc; FALCON-X's memoized translation): a
  // session registers a datatype once and names it by handle in later
  // datatypes and instances; the canonical form of `count` elements of it
  // is computed once per count and kept with the handle. At most
  // daemon.max_datatypes_per_session (RESOURCE_EXHAUSTED); handles live
  // until the session ends.
  Result<DatatypeReport> RegisterDatatype(SessionRef session, const Datatype& type);
  // The session's datatype `handle` (NOT_FOUND: not its own).
  Result<Datatype> LookupDatatype(SessionRef session, uint64_t handle) const;
  // LookupDatatype bound to `session`: how the wire decoders resolve
  // `registered` handles in a datatype message (proto/datatype_wire.h).
  std::function<Result<Datatype>(uint64_t)> DatatypeHandles(SessionRef session) const;

  // Client process memory (node_private.cc). A local-socket session
  // registers [address, address + bytes) of its own process (the one
  // SO_PEERCRED named; pinned by a pidfd at the first call, after the
  // identity check of channels/cma/client_process.h) for instances the
  // daemon reaches by CMA. The range lives until the session ends; copies
  // that use it afterwards are refused. Sessions without credentials
  // (gRPC): FAILED_PRECONDITION. Bad ranges: INVALID_ARGUMENT; more than
  // daemon.max_private_ranges_per_session: RESOURCE_EXHAUSTED. `mem`,
  // `maps`: the client's own /proc/self files, when it passed them
  // (ClientProcess::Open).
  Result<uint64_t> RegisterPrivate(SessionRef session, uint64_t address, uint64_t bytes,
                                   UniqueFd mem = UniqueFd(), UniqueFd maps = UniqueFd());
  // Lets other sessions of the same uid register instances over the
  // range; sessions of any other uid never can (NOT_FOUND for them).
  // `serve`: the publisher's serve window (docs/guides/client-memory.md, "Served reads"), told
  // to readers with each lease of the range; nullopt when it serves none.
  // INVALID_ARGUMENT for a window no client library makes.
  struct ServeWindowRef {
    int fd = -1;  // in the publisher's process
    uint64_t bytes = 0;
    uint64_t token = 0;
  };
  Status PublishPrivate(SessionRef session, uint64_t range,
                        std::optional<ServeWindowRef> serve = std::nullopt);
  // The session will run the hops of its copies that touch its own private
  // memory itself (docs/guides/client-memory.md, "Hops the client runs itself"): makes its hop
  // window (daemon.own_hop_window_mib of shared memory) and returns it;
  // `wake` tells the client that work waits (its completion eventfd).
  // FAILED_PRECONDITION without a cma channel, with the window size 0, over
  // gRPC, or a second time.
  struct OwnHopsWindow {
    int fd = -1;  // the node keeps it; valid for the session's life
    uint64_t bytes = 0;
  };
  Result<OwnHopsWindow> EnableOwnHops(SessionRef session, std::function<void()> wake);

  // A lease for the session to copy instance `src` (over another
  // process's private range it may use) into `dst` (over a range it
  // registered itself, so in its own process) with its own
  // process_vm_readv calls (docs/guides/client-memory.md, "Direct reads"; node_direct_read.cc).
  // `epoch` is the session's ControlHeader::lease_epoch: the node adds one
  // to it when the source range ends. NOT_FOUND for instances that are not
  // the session's or a range that ended; FAILED_PRECONDITION when the pair
  // does not qualify (the copy then goes through the daemon as before).
  struct DirectRead {
    pid_t pid = 0;
    UniqueFd pidfd;               // a duplicate of the node's pidfd of the source process
    uint64_t remote_address = 0;  // the program's source offset 0, in that process
    uint64_t local_address = 0;   // its destination offset 0, in the session's
    uint64_t src_span = 0, dst_span = 0;
    std::shared_ptr<const CopyProgram> program;
    uint32_t epoch = 0;
    std::optional<ServeWindowRef> serve;  // the source's publisher serves reads
    // A staged lease (DirectReadResponse.unpack_programs): `program` packs
    // the source's stream densely; piece k of `piece_bytes` is written by
    // unpack[k] (offsets from local_address). Empty otherwise.
    uint64_t piece_bytes = 0;
    std::vector<CopyProgram> unpack;
  };
  // `served_reads`: the reader copies through the source's serve window
  // when there is one.
  Result<DirectRead> GrantDirectRead(SessionRef session, uint64_t src, uint64_t dst,
                                     std::atomic<uint32_t>* epoch, bool served_reads = false);

  // Distributed instances and M:N redistribution (node_distributed.h).
  // A rank joins `join.name` with its local instance; the answer says how
  // many ranks have joined. INVALID_ARGUMENT when the join disagrees with
  // earlier ones or the instance does not fit the rank's local extents,
  // ALREADY_EXISTS for a rank joined twice, UNIMPLEMENTED for storage that
  // is not strided or lives on another node.
  Result<DistributedReport> JoinDistributed(SessionRef session, const DistributedJoin& join);
  // Starts the redistribution of `producer` into `consumer` (both complete,
  // same global extents and element size, the caller a rank of either) as
  // one transfer owned by the caller's session; `on_done` as for Copy. A
  // gRPC session (no uid) must present the grant of a side it is no rank
  // of (PERMISSION_DENIED otherwise).
  Result<uint64_t> Redistribute(SessionRef session, const std::string& producer,
                                const std::string& consumer, const RedistributeGrants& grants = {},
                                TransferCallback on_done = nullptr);
  // For peers (the cluster layer), with distributed instances named by
  // namespace + name: the ranks joined here; the pieces of this node's
  // producer ranks that node `caller` asks for (`done` once, with the
  // bytes moved); the end of an instance a rank on `caller` left.
  // A gRPC-namespace instance is answered only to a query carrying the
  // digest of the grant it was made with (else: not found here).
  DistributedRanks DistributedRanksForPeer(const std::string& caller, const std::string& key,
                                           const std::string& grant_digest);
  Result<std::shared_ptr<CrossTransfer>> RunPartForPeer(
      const std::string& caller, const RedistributePart& part,
      const std::function<void(Status, uint64_t)>& done);
  void DistributedEndedByPeer(const std::string& caller, const std::string& key,
                              const std::string& why);

  // Active Access (node_watch.cc). Only the allocation's owner watches,
  // unwatches and reads the log (PERMISSION_DENIED for others); bad
  // ranges, overlaps and handler/action mismatches: INVALID_ARGUMENT;
  // more than daemon.max_watched_regions_per_session: RESOURCE_EXHAUSTED.
  // The watch (regions and log) ends with the owner's session, when the
  // allocation is freed, or when its last region is unwatched.
  Result<WatchHandle> Watch(SessionRef session, const WatchSpec& spec);
  Status Unwatch(SessionRef session, uint64_t allocation, uint64_t region);
  Result<WatchReport> GetWatch(SessionRef session, uint64_t allocation) const;
  // The daemon-side reader of the owner's watched allocation's log
  // (ReadAccessLog; watch_reader.h): PERMISSION_DENIED for others,
  // NOT_FOUND without a watch, FAILED_PRECONDITION when the owner's local
  // client mapped the ring, ALREADY_EXISTS while another reader lasts.
  Result<std::unique_ptr<WatchReader>> ReadAccessLog(SessionRef session, uint64_t allocation);
  // Active flush: `done` runs once every access to the allocation's
  // regions up to now has been handled (entries acknowledged by the owner,
  // built-in handlers run), or with DEADLINE_EXCEEDED after `limit`
  // (capped at daemon.max_flush_ms). Any session that may use the
  // allocation may flush. OK at once for an allocation not watched.
  Status ActiveFlush(SessionRef session, uint64_t allocation, std::chrono::milliseconds limit,
                     std::function<void(Status)> done);
  // The dirty pages (kDirtyPages regions) of the owner's allocation;
  // `clear` starts a new epoch.
  Result<std::vector<uint64_t>> DirtyPages(SessionRef session, uint64_t allocation, bool clear);
  // Incremental checkpoint (node_checkpoint.cc): the owner's allocation
  // as a base image `file` of DSK memory `memory` plus a delta chain in
  // `file`.delta (active/checkpoint_delta.h). The first time (or with
  // `full`, or when the base is not the allocation's size, or the chain is
  // damaged) the whole image goes to the base and the chain is dropped;
  // afterwards the pages its dirty_pages regions saw written since the
  // last checkpoint, and the client's own `client_pages`, are appended as
  // one record with one write and one fdatasync. The chain is merged into
  // the base when asked, when it would hold more than
  // daemon.checkpoint_max_deltas records, or when it outgrows the image.
  // The disk I/O runs on the calling thread (never a gRPC one: the
  // service hands these calls to a worker).
  Result<CheckpointReport> Checkpoint(SessionRef session, uint64_t allocation,
                                      const std::string& memory, const std::string& file,
                                      const CheckpointOptions& options);
  // Reads base + chain into the owner's `allocation` (the image's size),
  // streaming the chain into a private image: DATA_LOSS (damaged,
  // truncated, forged, larger than any checkpoint leaves) or
  // INVALID_ARGUMENT (another image size) change nothing. The files must
  // be the session's uid's or the daemon's (checkpoint_files.h).
  Result<RestoreReport> Restore(SessionRef session, uint64_t allocation, const std::string& memory,
                                const std::string& file);
  // Merges the chain into the base (crash-safe: the chain is cut only
  // after the base is synced), once the whole chain is verified. Any
  // session whose uid owns the files (or the daemon's files).
  Result<RestoreReport> CompactCheckpoint(SessionRef session, const std::string& memory,
                                          const std::string& file);
  // Every watch on this node (isoctl status; never a log's contents).
  std::vector<WatchReport> ListWatches() const;

  // Queues a copy between two instances the session registered. `on_done`
  // (optional) runs once when it ends, instead of the session callback:
  // the caller answers this transfer itself.
  // `terms`, if given, is told what the copy runs at.
  Result<uint64_t> Copy(SessionRef session, const CopySpec& spec,
                        TransferCallback on_done = nullptr, CopyTerms* terms = nullptr);
  // A session may cancel, inspect and wait on its own transfers; the
  // operator (who holds the token in state_dir/operator.token) on any.
  // Others get PERMISSION_DENIED, also for transfers that have ended.
  // Cancelling one's own ended transfer answers OK (nothing to do).
  Status Cancel(SessionRef session, uint64_t transfer, bool is_operator = false);
  Result<TransferReport> GetTransfer(SessionRef session, uint64_t transfer,
                                     bool is_operator = false) const;
  // Runs `cb` once the transfer has ended (at once if it already has).
  Status WhenDone(SessionRef session, uint64_t transfer, bool is_operator, TransferCallback cb);
  // Every transfer in flight, with its owner (never a credential).
  std::vector<TransferReport> ListTransfers() const;
  // The final reports of the last daemon.transfer_history transfers of
  // this node's own that ended, newest first (no hops; no halves of other
  // nodes' copies). Anyone may list them, as ListTransfers; the message of
  // a transfer that ended badly (it may name another client's file) only
  // its session and the operator see, others its code alone.
  std::vector<TransferReport> RecentTransfers(SessionRef session, bool is_operator = false) const;
  // Why a transfer took its path (isoctl explain), for whoever may inspect
  // it; FAILED_PRECONDITION for a cross-node copy.
  Result<TransferExplanation> ExplainTransfer(SessionRef session, uint64_t transfer,
                                              bool is_operator = false) const;

  std::vector<MemoryReport> ListMemories() const;
  std::vector<ChannelReport> ListChannels() const;

  // Traffic classes (node_qos.cc; docs/guides/qos.md). ReloadQos installs
  // a validated [qos] (SIGHUP): sessions are placed again by its rules
  // (the operator's placements stay), transfers keep running in their
  // classes' new shares. SetSessionClass is the operator's grant: session
  // `session` (its public number) joins `class_name` until it ends.
  void ReloadQos(const QosConfig& qos);
  Status SetSessionClass(uint64_t session, const std::string& class_name);
  // Classes, their shares per channel and members (the list of members
  // for the operator only; `viewer`'s own class named).
  QosReport Qos(SessionRef viewer, bool is_operator) const;
  // The class a half of a cross-node copy that `peer` started runs in here
  // (its class there: `remote_class`), and `priority` within its ceiling.
  std::pair<std::string, int> QosForPeerHalf(const std::string& peer,
                                             const std::string& remote_class, int priority) const;
  Result<PlanReport> Explain(const std::string& src_memory, const Layout& src_layout,
                             const std::string& dst_memory, const Layout& dst_layout,
                             const Box& bounds, const FieldSpace& fields) const;
  // The same with a datatype on either side (node_datatypes.cc); the plan
  // says why (forms, runs, the cost of each end) in PlanReport::why.
  Result<PlanReport> Explain(const PlanSide& src, const PlanSide& dst, const Box& bounds,
                             const FieldSpace& fields) const;
  NodeStatus GetStatus() const;
  // Re-measures every channel (isoctl calibrate).
  Result<Calibration> Calibrate();
  const Config& config() const;
  // Whether this node runs network hops over RDMA, decided at Create from
  // the probe and [rdma] (peers learn it in the hello exchange).
  const rdma::RdmaChoice& rdma() const;

  // What Drain had to give up.
  struct DrainOutcome {
    size_t cancelled = 0;  // transfers still running at the grace deadline
    size_t stuck = 0;      // of those, still not ended `cancel_bound` later
  };
  // Stops admitting copies (they fail with UNAVAILABLE), lets transfers in
  // flight finish for up to `grace`, then cancels the rest and waits for
  // them at most `cancel_bound` more: it returns within grace +
  // cancel_bound whatever the transfers do. A caller that sees `stuck`
  // must not destroy the Node (that waits for them): it exits instead.
  DrainOutcome Drain(std::chrono::milliseconds grace,
                     std::chrono::milliseconds cancel_bound = std::chrono::seconds(2));

  // Samples channel throughput (current and peak); called periodically by
  // the daemon, and by tests.
  void SampleThroughput();

 private:
  struct Impl;
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace isometry
