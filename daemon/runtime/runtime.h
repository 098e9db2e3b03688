// The Isometry runtime: the public C++ API for local transfers.
//
// A Runtime owns the node's channels, one DMA worker per channel, the
// staging budgets of its memories, the path planner and the copy-program
// cache. Copy() validates a request, plans a path, splits it into XDs (one
// per hop) over one shared sequence of chunks, and runs the XDs as a
// pipeline through bounded ring buffers (DESIGN.md, "Chunked pipelines").
//
// Thread-safety: every method may be called from any thread. Completion
// callbacks run on a channel thread and must not block for long; they may
// call Copy() and Cancel().
//
// Lifetime: destroying the Runtime cancels whatever is still running and
// waits for it; Transfer handles stay valid for Wait()/status() afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "channels/channel.h"
#include "config/runtime_config.h"
#include "core/copy_options.h"
#include "core/histogram.h"
#include "core/instance.h"
#include "core/memory.h"
#include "core/status.h"
#include "daemon/runtime/calibration_store.h"
#include "daemon/runtime/end_costs.h"
#include "layout/copy_end.h"
#include "planner/alternatives.h"
#include "planner/topology.h"

namespace isometry {

class ClientProcess;  // channels/cma/client_process.h
class OwnHops;        // channels/cma/own_hops.h

// The PROCESS memory the runtime adds when a cma channel is configured:
// every client's registered private memory, reached by CMA to and from
// every host memory.
inline constexpr std::string_view kProcessMemoryName = "proc";

// An instance the caller owns: its bytes live at `base` in memory `memory`.
// `capacity` is how many bytes from `base` the caller vouches for; the
// instance's storage (shape.total_bytes()) must fit in it.
struct InstanceRef {
  MemoryId memory;
  std::byte* base = nullptr;
  uint64_t capacity = 0;
  InstanceShape shape;
  // DSK memories: the file, relative to the memory's directory, and where
  // in it the instance starts (`base` and `capacity` unused). See
  // daemon/runtime/disk_endpoint.h for paths and durability.
  std::string file;
  uint64_t file_offset = 0;
  // As a destination: write into the existing file in place (DiskEndpoint::
  // OpenInPlace), as a redistribution's pieces do.
  bool file_in_place = false;
  // PROCESS memory: the client process, pinned by its pidfd, and the
  // instance's first byte in it (`base` unused; `capacity` is what its
  // registered range holds from `address`). The transfer keeps `process`
  // until it ends, so the pidfd outlives every request made with it.
  std::shared_ptr<const ClientProcess> process;
  uint64_t address = 0;
  // PROCESS memory of the copy's own client, which runs hops into or out
  // of it itself (channels/cma/own_hops.h): the intermediate buffer next
  // to this end goes in its window when the window is free. Null: CMA.
  std::shared_ptr<OwnHops> own_hops;
  // A form end (layout/copy_end.h): `shape` is then StreamShape(form->
  // bytes) and the bytes lie where the form says, from the instance's
  // first byte, within form->span bytes of storage. A copy's ends have
  // forms both or neither. Null: a layout end, `shape` alone.
  std::shared_ptr<const EndForm> form;

  // The end as the compiler sees it (borrowed from this ref).
  CopyEnd end() const { return {shape, form.get()}; }
};

// The bytes of storage an instance's copies may touch from its first byte.
inline uint64_t StorageBytes(const InstanceRef& ref) {
  return StorageBytes(ref.shape, ref.form.get());
}

// An intermediate hop forced by the caller instead of planned.
struct HopSpec {
  MemoryId memory;
  Layout layout;
};

struct TransferTimes {
  using Clock = std::chrono::steady_clock;
  Clock::time_point submitted{};
  Clock::time_point first_dispatch{};  // first request handed to a channel
  Clock::time_point finished{};
  // The first hop's channel dispatch counter when this transfer was queued
  // and when its first request was dispatched: the difference is how many
  // requests went ahead of it.
  uint64_t dispatch_seq_at_submit = 0;
  uint64_t dispatch_seq_at_first = 0;
  // ... and when its last request on that channel was dispatched: requests
  // of other transfers numbered between _at_first and _at_last ran among
  // this transfer's.
  uint64_t dispatch_seq_at_last = 0;
};

// Transfer ids are unique across a cluster: the node id sits in the top
// 24 bits (config node ids above 2^24 - 1 share a prefix with a smaller
// one), bit 39 marks a cross-node copy's id (Node), the low 39 bits count.
// A copy's id names it on every node it touches (`isoctl transfers` there
// lists its half under the initiator's id).
inline constexpr int kTransferNodeShift = 40;
inline constexpr uint64_t kCrossTransferBit = 1ull << 39;
inline uint64_t TransferIdBase(uint32_t node) {
  return static_cast<uint64_t>(node & 0xFFFFFFu) << kTransferNodeShift;
}
inline uint32_t TransferNode(uint64_t id) {
  return static_cast<uint32_t>(id >> kTransferNodeShift);
}

// This node's part of a cross-node transfer (DESIGN.md, "Cluster"): the
// initiating node planned `path` over the cluster's graph (memory ids are
// cluster-wide) and every node involved runs the hops that live on it. The
// network hop path.edges[net_hop] has a sending half on the source's node
// and a receiving half on the destination's, on this node's remote_memcpy
// channel for `peer` (the other node),
// paced by the receiver's credits. Both halves cut the box into the same
// chunks (chunk_target, slot_limit), so chunk k means the same sub-box on
// both nodes.
struct RemotePart {
  uint64_t key = 0;  // the cross-node transfer; the same on both nodes
  Path path;
  size_t net_hop = 0;
  bool sending = false;  // true: hops [0, net_hop] run here; false: [net_hop, end)
  std::string peer;      // the other node's name (cluster.node_name)
  uint64_t chunk_target = 0;
  uint64_t slot_limit = 0;
  // The path's memories as users name them, node-qualified ("b:sys0",
  // "a:sys0"), for messages.
  std::map<MemoryId, std::string> names;
  // The copy's id on the node that started it (0: unknown): messages name
  // the copy by the id its user knows, not by this half's.
  uint64_t copy_id = 0;
  // The traffic class this half runs in on this node (CopyRequest::
  // qos_class): the session's on the node that started the copy, the
  // node's mapping of it on the others (node::TrafficClasses::QosForPeerHalf).
  std::string qos_class;
  // A relay (a path that crosses the network more than once, through this
  // node): it receives at net_hop from `peer` (sending is false) and sends
  // at relay_hop (> net_hop) to `relay_peer`; hops between run here. 0:
  // not a relay.
  size_t relay_hop = 0;
  std::string relay_peer;
  // Called once the copy is built, before its first request: how many
  // chunks it has and the most bytes one takes on the network hop (in
  // either side's layout). An error fails the copy's start. The cluster
  // layer routes the hop over RDMA here (channels/rdma/net_routes.h).
  std::function<Status(uint64_t chunks, uint64_t wire_bytes)> on_grid;
  bool relays() const { return relay_hop > net_hop; }
  // Whether hop h runs on this node.
  bool Mine(size_t h) const {
    if (relays()) return h >= net_hop && h <= relay_hop;
    return sending ? h <= net_hop : h >= net_hop;
  }
};

struct CopyRequest {
  InstanceRef src;
  InstanceRef dst;
  std::optional<Box> box;  // default: the source's whole index space
  // Its priority (higher runs first on every channel it uses) and whether
  // a DSK destination is synced.
  CopyOptions options;
  // Whose turn it is among equal priorities: every channel serves the
  // shares of its waiting transfers in turn (a session's many transfers
  // get one share together, not one each). The node sets its session's
  // number; 0 (the daemon's own, peers' halves) is one share too.
  uint64_t share = 0;
  // Its traffic class (config/qos_config.h) by name: every channel shares
  // its capacity between busy classes by weight and applies the class's
  // caps. "" or a class not in force: the default class. The caller
  // clamps `priority` to the class's max_priority (Runtime::QosCeiling),
  // or sets clamp_priority and reads Transfer::priority() back.
  std::string qos_class;
  // Copy lowers options.priority to its class's max_priority itself, under
  // the lock it takes anyway (one lock fewer than QosCeiling first).
  bool clamp_priority = false;
  std::vector<HopSpec> via;                 // explicit intermediates; empty = planner decides
  std::function<void(Status)> on_complete;  // optional
  // Who a DSK destination's bytes are charged to (memory.quota_bytes),
  // e.g. "uid 1000"; "" = cross-node halves (and embedders of Runtime)
  // share one account.
  std::string disk_owner;
  // Whose access DSK ends are opened with (DiskEndpoint, "Who may open a
  // file"): the session's uid; none for sessions without one (gRPC) and
  // cross-node halves, which act as the daemon's own.
  std::optional<uid_t> disk_uid;
  // Set for one node's part of a cross-node copy; the end on the other
  // node (dst when sending, src when receiving) then only gives the shape.
  std::optional<RemotePart> remote;
};

class Runtime;
struct TransferState;

// What a copy would do, without doing it: the planned path (with the cost
// model's predictions) and the runtime's chunking of it.
struct PlanExplanation {
  Path path;
  uint64_t chunks = 0;                 // chunks every hop moves
  uint64_t chunk_bytes = 0;            // data bytes of a full chunk (= one request)
  std::vector<uint64_t> buffer_bytes;  // per intermediate buffer, all slots
  Alternatives alternatives;           // path first (planner/alternatives.h)
};

// What a copy's path was planned from, beyond its ends' memories and
// layouts (the path's first and last nodes): kept with a transfer so that
// its alternatives can be weighed after it ended (Runtime::Weigh).
struct PlanInputs {
  Box box;
  uint64_t entry_bytes = 0;    // |F|
  uint64_t element_bytes = 1;  // the smallest field's
  bool durable = true;
  bool datatype = false;  // a datatype end: its path's figures count the ends' forms
  bool remote = false;    // one node's part of a cross-node copy
};

// The ring depth of the intermediate buffers of one node's part of a
// cross-node copy: runtime.slots_per_buffer, and at least 4. The network
// hop gives a slot back only once the other node holds its chunk, a round
// trip after the chunk's last byte left; with two slots the hop that
// fills them (a disk read feeding the link) sat waiting for one, and a
// DSK -> SYS* pipeline over a shaped link ran well below its slower stage
// (docs/benchmarks/design-measurements.md, "Network I/O").
// The initiator cuts the copy's chunks for this many slots of its TH
// (cross_plan.cc); a part whose slots are larger than its node's TH over
// this gets fewer (CrossNodeSlotsFor).
int CrossNodeSlots(const RuntimeConfig& config);
// The slots a part with chunks of at most `slot_limit` bytes gets on a
// node of `config`: CrossNodeSlots, fewer where they would not fit in
// runtime.space_threshold (an initiator that cut for fewer slots), never
// fewer than one.
int CrossNodeSlotsFor(const RuntimeConfig& config, uint64_t slot_limit);

class ChunkGrid;
// The explanation of `path` cut into `grid`, with rings of
// `slots_per_buffer` slots (Runtime::Explain; cross-node plans too).
PlanExplanation ExplainGrid(Path path, const ChunkGrid& grid, uint64_t entry_bytes,
                            int slots_per_buffer);

// What reports need of a transfer: its figures and path, without its ends,
// buffers or XDs. Once a transfer has ended its node keeps only this (for
// the last thousands of copies), so the rest is freed while still in cache.
struct TransferSummary {
  int priority = 0;
  std::string qos_class;
  uint64_t bytes = 0;   // of the copy (box volume x entry size)
  uint64_t chunks = 0;  // every hop has this many
  TransferTimes times;
  // Chunks finished by each hop; inline for paths of up to four hops, so
  // a copy that ends allocates nothing for it.
  absl::InlinedVector<uint64_t, 4> hops_done;
  std::shared_ptr<const Path> path;
  // Path::predicted_bps, or for a copy with durable = false what its disk
  // writes move without the fdatasync (TransferState::predicted_bps).
  double predicted_bps = 0;
  PlanInputs inputs;
};

// A handle to a submitted transfer. Copyable; dropping it does not cancel.
class Transfer {
 public:
  uint64_t id() const;
  // Blocks until the transfer ends; returns its final status.
  Status Wait() const;
  // Waits at most `timeout`; nullopt if still running.
  std::optional<Status> WaitFor(std::chrono::milliseconds timeout) const;
  std::optional<Status> Poll() const;
  // Requests cancellation; the transfer ends with CANCELLED unless it had
  // already finished. Returns immediately. Requires the Runtime to be alive.
  void Cancel() const;
  // Like Cancel(), ending with `why` instead of CANCELLED (a peer that
  // vanished: UNAVAILABLE).
  void Abort(Status why) const;
  TransferTimes times() const;
  // Chunks finished by each hop, and the chunk count every hop has.
  std::vector<uint64_t> HopsDone() const;
  uint64_t chunks() const;
  int priority() const;
  uint64_t bytes() const;  // bytes of the copy (box volume x entry size)
  // The planned path, for explain output.
  const Path& path() const;
  TransferSummary Summary() const;

 private:
  friend class Runtime;
  explicit Transfer(std::shared_ptr<TransferState> s) : state_(std::move(s)) {}
  std::shared_ptr<TransferState> state_;
};

struct MemoryUsage {
  std::string name;
  MemoryId id;
  MemoryKind kind;
  uint64_t staging_budget = 0;
  uint64_t staging_used = 0;    // bytes of intermediate buffers held now
  uint64_t staging_peak = 0;    // most ever held at once
  uint64_t largest_buffer = 0;  // largest single intermediate buffer ever
  uint64_t staging_cached = 0;  // mapped bytes of buffers given back, kept for reuse
};

struct ChannelStats {
  std::string name;
  int xds_queued = 0;  // unfinished XDs in the XD pool
  int requests_in_flight = 0;
  uint64_t requests_done = 0;
  uint64_t bytes_done = 0;
  uint64_t errors = 0;                                  // requests that failed (not cancelled)
  uint64_t dispatch_seq = 0;                            // requests dispatched so far
  std::vector<std::pair<int, int>> queued_by_priority;  // (priority, XDs), highest first
  int threads_or_slots = 0;                             // max requests in flight
  // Queue wait (seconds from an XD's first chunk being ready to its
  // dispatch) per priority the channel has seen, highest first;
  // kOtherPriorities: those past the first 16.
  std::vector<std::pair<int, HistogramCounts>> queue_wait;
};

// A traffic class as the runtime applies it (Runtime::Qos).
struct QosChannelStats {
  std::string channel;
  uint64_t bytes = 0;     // dispatched for the class, ever
  uint64_t requests = 0;  // dispatched for the class, ever
  int in_flight = 0;
  int xds_queued = 0;       // its unfinished XDs in the channel's pool
  double recent_bps = 0;    // lately (decayed over about a second)
  double share = 0;         // recent_bps over all classes' on the channel (0..1)
  double weight_share = 0;  // weight over the busy classes' weights (0..1; 0: idle)
  double throttled_s = 0;   // held back by a cap while it had work
  uint64_t rate_cap = 0;    // bytes/s; 0: none
  int in_flight_cap = -1;   // -1: none
  bool paused = false;      // a cap of 0
};
struct QosClassStats {
  std::string name;
  uint32_t weight = 1;
  int32_t max_priority = 0;
  int nice = 0;              // qos.class.nice
  bool nice_applied = true;  // false: this process may not change it (core/thread_nice.h)
  bool retired = false;      // dropped by a reload; its transfers finish in it
  bool is_default = false;
  int transfers = 0;  // running or waiting for buffers
  std::vector<QosChannelStats> channels;
  HistogramCounts queue_wait;  // seconds, all channels
};

struct RuntimeStats {
  uint64_t transfers_submitted = 0;
  uint64_t transfers_completed = 0;
  uint64_t transfers_failed = 0;
  uint64_t transfers_cancelled = 0;
  uint64_t transfers_waiting_for_buffers = 0;  // ever queued for staging buffers
  uint64_t transfers_waiting = 0;              // queued for staging buffers now
  uint64_t transfers_running = 0;              // admitted and not yet finished now
  uint64_t program_cache_hits = 0;
  uint64_t program_cache_misses = 0;
  uint64_t program_cache_bytes = 0;  // held by the kept programs
  uint64_t program_cache_entries = 0;
  // Programs of copies between form ends, per chunk (layout/chunk_compiler.h).
  uint64_t form_cache_hits = 0;
  uint64_t form_cache_misses = 0;
  uint64_t form_cache_entries = 0;
  uint64_t form_cache_bytes = 0;
  uint64_t plan_cache_entries = 0;  // paths the current planner keeps
  uint64_t plan_cache_bytes = 0;    // what they hold (estimate)
  uint64_t transfers_inline = 0;    // small direct copies run on the submitting thread
  // Requests that wrote an intermediate ring with streaming stores (the
  // way that has been faster on this node, or tried; ring_stores.h) ...
  uint64_t ring_requests_streamed = 0;
  // ... ring epochs timed from end to end, and how often the faster way
  // changed (both since start).
  uint64_t ring_epochs_timed = 0;
  uint64_t ring_store_switches = 0;
  uint64_t plan_cache_hits = 0;  // since the last calibration (its fresh planner)
  uint64_t plan_cache_misses = 0;
  uint64_t plans_simple = 0;
  uint64_t plans_full = 0;
  // The same since start: the planners that recalibrations replaced are
  // added in, so these never decrease (the metrics' counters).
  uint64_t plan_cache_hits_since_start = 0;
  uint64_t plan_cache_misses_since_start = 0;
  uint64_t plans_simple_since_start = 0;
  uint64_t plans_full_since_start = 0;
};

// Makes the channel for a config entry. The default is MakeChannel (the
// real channels); tests pass a factory that wraps them to inject faults.
using ChannelMaker = std::function<Result<std::unique_ptr<Channel>>(const ChannelConfig&)>;

class DiskMemory;

class GpuMemory;  // channels/gpu_memory.h

class Runtime {
 public:
  // `gpu`: device memory and pinning for FBM and ZCM memories; null: the
  // channel factory's (MakeGpuMemory), where a GPU exists. Tests pass a
  // fake with `maker`'s fake GPU channels to run GPU paths without a GPU.
  static Result<std::unique_ptr<Runtime>> Create(const RuntimeConfig& config,
                                                 ChannelMaker maker = nullptr,
                                                 std::shared_ptr<GpuMemory> gpu = nullptr);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The id of a configured memory by name.
  Result<MemoryId> FindMemory(std::string_view name) const;
  // The DSK memory `name` (its directory fd), for files the node writes
  // itself (Active Access file logs). NOT_FOUND / INVALID_ARGUMENT.
  Result<std::shared_ptr<DiskMemory>> FindDisk(std::string_view name) const;
  // Validates, plans and queues a copy. Errors (bad shapes, bounds, unknown
  // memories, unreachable paths, buffers that could never fit) return here
  // and change nothing. Taken by rvalue: a request is large, and is
  // consumed (its ends move into the transfer).
  Result<Transfer> Copy(CopyRequest&& request);
  // Plans without copying; for a copy with `durable` false, the path's
  // figures count disk writes without their closing fdatasync.
  Result<Path> Plan(const InstanceRef& src, const InstanceRef& dst, bool durable = true) const;
  Result<PlanExplanation> Explain(const InstanceRef& src, const InstanceRef& dst) const;
  // The paths a copy of `chosen`'s ends could have taken, weighed under
  // today's model (planner/alternatives.h). Paths of a datatype copy are
  // weighed without its ends' forms, `chosen` among them (the copy's own
  // figure counted them); a cross-node part's only lists `chosen`.
  Alternatives Weigh(const Path& chosen, const PlanInputs& inputs) const;
  // Measures every channel again (Isometry §4.1), keeps the figures in
  // config.calibration_file, and plans with them from now on.
  Result<Calibration> Recalibrate();

  std::vector<MemoryUsage> Memories() const;
  std::vector<ChannelStats> Channels() const;
  // Traffic classes (config/qos_config.h; qos_scheduler.h): installs
  // `config`, at start and on reload. Running transfers keep going, in
  // their classes' new shares; a class `config` drops is retired (its
  // transfers finish in it, scheduled plainly).
  void SetQos(const QosConfig& config);
  // The highest priority a copy of class `name` runs at (CopyRequest::
  // qos_class); the default class's for a name not in force.
  int32_t QosCeiling(const std::string& name) const;
  // Whether class `name` (as QosCeiling finds it) has a cap, a pause
  // included, on a network channel (one per peer: remote_memcpy).
  bool QosCappedOnNetwork(const std::string& name) const;
  std::vector<QosClassStats> Qos() const;
  RuntimeStats Stats() const;
  const Topology& topology() const;
  const RuntimeConfig& config() const;

 private:
  struct Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class Transfer;
};

}  // namespace isometry
