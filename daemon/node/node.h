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
#include "core/copy_options.h"
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
  CopyOptions options;
  std::vector<ViaHop> via;
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
std::string WhyForms(const PlanExplanation& ex, const EndForm& src, const EndForm& dst,
                     const Topology& topo);

namespace node {
class Sessions;
class Pools;
class Instances;
class Distributed;
class Watches;
class Copies;
class TrafficClasses;
class Introspection;
}  // namespace node

class Node {
 public:
  // Channels are made by MakeChannel with `context`; with a data plane
  // (the cluster layer's links) each configured peer gets its network
  // channel (PeerChannels), without one peers are not served.
  static Result<std::unique_ptr<Node>> Create(const Config& config,
                                              const ChannelContext& context = {});
  // Cross-node copies go to `copier` (set once, before serving).
  void SetCrossCopier(CrossCopier* copier);
  Runtime& runtime();

  // The node's services by concern, each with its own header (include the
  // ones you call). Each is a view of this node, valid while it lives; its
  // calls take the session the boundary resolved (session_ref.h), never a
  // token; every call is thread-safe (it takes the node's lock where it
  // touches the node's tables).
  node::Sessions& sessions() const;               // daemon/node/sessions.h
  node::Pools& pools() const;                     // daemon/node/pools.h
  node::Instances& instances() const;             // daemon/node/instances.h
  node::Distributed& distributed() const;         // daemon/node/distributed.h
  node::Watches& watches() const;                 // daemon/node/watches.h
  node::Copies& copies() const;                   // daemon/node/copies.h
  node::TrafficClasses& traffic_classes() const;  // daemon/node/traffic_classes.h
  node::Introspection& introspection() const;     // daemon/node/introspection.h
  ~Node();

  const Config& config() const;

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

  // Its insides (node_impl.h, daemon/node only): public so that the
  // services can hold it.
  struct Impl;

 private:
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace isometry
