#include "daemon/runtime/runtime.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "channels/calibrate.h"
#include "channels/channel_factory.h"
#include "channels/disk/disk_channel.h"
#include "channels/host_pages.h"
#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "daemon/runtime/calibration_store.h"
#include "daemon/runtime/staging_pool.h"
#include "daemon/runtime/transfer_state.h"
#include "layout/program_cache.h"
#include "planner/planner.h"

namespace isometry {

namespace {

using Clock = std::chrono::steady_clock;
using Phase = TransferState::Phase;

// The DMA worker of one channel (Isometry §3.5): its XD pool in priority
// order and its in-flight accounting. Guarded by the runtime mutex.
struct DmaWorker {
  size_t channel = 0;
  int max_in_flight = 1;
  std::vector<XdState*> pool;  // priority desc; equal priorities take turns (RotateAmongEquals)
  int in_flight = 0;
  uint64_t requests_done = 0;
  uint64_t bytes_done = 0;
  uint64_t dispatch_seq = 0;
  std::condition_variable cv;
  std::thread thread;
};

// Runs a finished transfer's notifications outside the runtime lock.
struct Completion {
  std::shared_ptr<TransferState> transfer;
  void Run() {
    if (!transfer) return;
    Status s;
    {
      std::lock_guard lock(transfer->done_mu);
      s = transfer->status;
    }
    transfer->done_cv.notify_all();
    // Called once, then dropped: the callback may hold what holds this
    // transfer (a caller's record with its handle), a cycle otherwise.
    std::function<void(Status)> callback = std::exchange(transfer->on_complete, nullptr);
    if (callback) callback(s);
  }
};

bool Overlaps(const InstanceRef& a, const InstanceRef& b) {
  if (a.memory != b.memory) return false;
  const std::byte* a_end = a.base + a.shape.total_bytes();
  const std::byte* b_end = b.base + b.shape.total_bytes();
  return a.base < b_end && b.base < a_end;
}

}  // namespace

struct Runtime::Impl {
  RuntimeConfig config;
  Topology topo;  // edges' throughput functions change on recalibration (under calibrate_mu)
  Runtime* self = nullptr;
  // Replaced whole (atomic_store) when calibration changes the graph; a
  // plan in progress keeps the planner it started with.
  std::shared_ptr<Planner> planner;
  std::mutex calibrate_mu;                         // one calibration at a time
  std::vector<std::unique_ptr<Channel>> channels;  // constant after Create
  std::vector<std::shared_ptr<DiskMemory>>
      disks;  // per memory (null: not DSK); constant after Create
  ProgramCache cache{4096};

  mutable std::mutex mu;
  std::condition_variable drained_cv;
  std::vector<StagingPool> pools;                             // guarded by mu
  std::vector<std::unique_ptr<DmaWorker>> workers;            // guarded by mu (contents)
  std::vector<std::shared_ptr<TransferState>> waiting;        // guarded by mu
  std::map<uint64_t, std::shared_ptr<TransferState>> active;  // guarded by mu
  uint64_t next_id = 1;                                       // guarded by mu
  RuntimeStats stats;                                         // guarded by mu
  bool stopping = false;                                      // guarded by mu

  explicit Impl(const RuntimeConfig& c)
      : config(c), cache(c.program_cache_entries, c.program_cache_bytes) {}

  bool IsDisk(MemoryId id) const {
    const TopologyMemory* m = topo.FindMemory(id);
    return m && m->kind == MemoryKind::kDsk;
  }
  const std::shared_ptr<DiskMemory>& DiskOf(MemoryId id) const { return disks[PoolIndex(id)]; }

  bool IsLocal(MemoryId id) const { return id.node == config.node; }

  // A memory's name for messages: this node's by its config, another
  // node's as the cluster named it for a cross-node part ("b:sys0"), else
  // by its id.
  std::string MemoryName(MemoryId id, const RemotePart* part = nullptr) const {
    if (const TopologyMemory* m = topo.FindMemory(id)) return m->name;
    if (part) {
      if (auto it = part->names.find(id); it != part->names.end()) return it->second;
    }
    return StrCat("memory ", id.memory, " of node ", id.node);
  }

  size_t PoolIndex(MemoryId id) const {
    for (size_t i = 0; i < topo.memories.size(); ++i) {
      if (topo.memories[i].id == id) return i;
    }
    return topo.memories.size();
  }

  // ---- calibration (Isometry §4.1) ----

  // Measures every channel (budget shared evenly), or reuses the file.
  Result<Calibration> LoadOrMeasure(bool force) {
    const std::string fp = HardwareFingerprint(config);
    if (!force && !config.calibration_file.empty()) {
      auto loaded = LoadCalibration(config.calibration_file, fp);
      if (loaded.ok()) {
        spdlog::info("calibration: reusing {} (fingerprint {})", config.calibration_file, fp);
        return loaded;
      }
      if (!absl::IsNotFound(loaded.status())) {
        spdlog::info("calibration: measuring again ({})", loaded.status().ToString());
      }
    }
    Calibration cal;
    const auto budget = std::chrono::milliseconds(config.calibration_budget_ms) /
                        static_cast<int>(std::max<size_t>(channels.size(), 1));
    for (size_t c = 0; c < channels.size(); ++c) {
      Channel& ch = *channels[c];
      const ChannelKind kind = ch.caps().kind;
      if (kind == ChannelKind::kMemcpy) {
        ISO_ASSIGN_OR_RETURN(cal[ch.caps().name], MeasureChannel(ch, budget));
      } else if (kind == ChannelKind::kDiskRead || kind == ChannelKind::kDiskWrite) {
        // On a scratch file in the first DSK directory the channel serves.
        // A directory that refuses it keeps the model, not the start-up.
        const std::string dir = DiskDirectoryOf(static_cast<int>(c));
        if (dir.empty()) continue;
        auto measured = MeasureDiskChannel(ch, dir, budget);
        if (!measured.ok()) {
          spdlog::warn("calibration: channel '{}' keeps the 1 GB/s model: {}", ch.caps().name,
                       measured.status().ToString());
          continue;
        }
        cal[ch.caps().name] = *std::move(measured);
      }
    }
    if (!config.calibration_file.empty()) {
      Status s = SaveCalibration(config.calibration_file, fp, cal);
      if (!s.ok()) spdlog::warn("calibration: not kept: {}", s.ToString());
    }
    return cal;
  }

  // The directory of the first DSK memory an edge of channel `c` reaches;
  // "" if none.
  std::string DiskDirectoryOf(int c) const {
    for (const TopologyEdge& e : topo.edges) {
      if (e.channel != c) continue;
      for (const MemoryId id : {e.src, e.dst}) {
        if (!IsLocal(id) || id.memory >= config.memories.size()) continue;
        const MemoryConfig& m = config.memories[id.memory];
        if (m.kind == MemoryKind::kDsk) return m.directory;
      }
    }
    return "";
  }

  // Puts measured throughput functions on the graph's edges and starts a
  // fresh planner (its cache would describe the old figures).
  Status ApplyCalibration(const Calibration& cal) {
    for (TopologyEdge& e : topo.edges) {
      auto it = cal.find(e.channel_name);
      if (it == cal.end()) continue;
      std::vector<ThroughputSample> samples;
      for (const RateSample& s : it->second) samples.push_back({s.request_bytes, s.bytes_per_s});
      ISO_ASSIGN_OR_RETURN(e.tp, ThroughputFunction::FromSamples(std::move(samples)));
    }
    for (const auto& [name, samples] : cal) {
      double peak = 0;
      for (const RateSample& s : samples) peak = std::max(peak, s.bytes_per_s);
      spdlog::info("calibration: channel '{}' peaks at {:.2f} GB/s ({} sizes; {} B: {:.2f} GB/s)",
                   name, peak / 1e9, samples.size(),
                   samples.empty() ? 0 : samples.front().request_bytes,
                   samples.empty() ? 0.0 : samples.front().bytes_per_s / 1e9);
    }
    MakePlanner();
    return OkStatus();
  }

  void MakePlanner() {
    PlannerOptions o;
    o.full_threshold = config.full_planner_threshold;
    o.space_threshold = config.space_threshold;
    o.cache_capacity = config.plan_cache_entries;
    std::atomic_store(&planner, std::make_shared<Planner>(topo, o));
  }

  // ---- validation and planning (no lock needed: constant data) ----

  Status CheckInstance(const InstanceRef& ref, std::string_view what) const {
    ISO_RETURN_IF_ERROR(ref.shape.Validate(what));
    const TopologyMemory* m = topo.FindMemory(ref.memory);
    if (!m) return NotFound(what, ": unknown memory ", ToString(ref.memory));
    if (m->kind == MemoryKind::kDsk) {
      if (ref.base != nullptr) {
        return InvalidArgument(what, ": memory '", m->name, "' is DSK: name a file, not a pointer");
      }
      return CheckRelativePath(ref.file);
    }
    if (!IsHostMemory(m->kind)) {
      return InvalidArgument(what, ": memory '", m->name, "' is ", MemoryKindName(m->kind),
                             "; this runtime addresses host and DSK memories");
    }
    const uint64_t need = ref.shape.total_bytes();
    if (need > 0 && ref.base == nullptr) return InvalidArgument(what, ": base pointer is null");
    if (need > ref.capacity) {
      return OutOfRange(what, ": layout '", ref.shape.layout.ToString(), "' over ",
                        ToString(ref.shape.bounds), " needs ", need, " bytes but the buffer holds ",
                        ref.capacity);
    }
    return OkStatus();
  }

  std::shared_ptr<Planner> CurrentPlanner() const { return std::atomic_load(&planner); }

  Result<Path> MakePath(const InstanceRef& src, const InstanceRef& dst, const Box& box,
                        const std::vector<HopSpec>& via) const {
    if (via.empty()) {
      return CurrentPlanner()->Plan({src.memory, src.shape.layout}, {dst.memory, dst.shape.layout},
                                    box, src.shape.fields.total_bytes());
    }
    Path p;
    p.algorithm = "explicit";
    p.nodes.push_back({src.memory, src.shape.layout});
    for (const HopSpec& h : via) {
      if (h.layout.dims() != src.shape.bounds.dims) {
        return InvalidArgument("intermediate layout '", h.layout.ToString(), "' has ",
                               h.layout.dims(), " dimension(s), the instance ",
                               src.shape.bounds.dims);
      }
      const TopologyMemory* m = topo.FindMemory(h.memory);
      if (!m) return NotFound("intermediate hop: unknown memory ", ToString(h.memory));
      p.nodes.push_back({h.memory, h.layout});
    }
    p.nodes.push_back({dst.memory, dst.shape.layout});
    for (size_t i = 0; i + 1 < p.nodes.size(); ++i) {
      const TopologyEdge* e = topo.FindEdge(p.nodes[i].memory, p.nodes[i + 1].memory);
      if (!e) {
        return NotFound("no channel connects memory '", MemoryName(p.nodes[i].memory), "' to '",
                        MemoryName(p.nodes[i + 1].memory), "' (hop ", i, " of the path)");
      }
      p.edges.push_back(*e);
    }
    return p;
  }

  // The chunk sequence a path runs with: chunks of about the smallest
  // preferred request of its channels, and, with intermediate buffers, no
  // larger than one slot (TH / slots_per_buffer).
  Result<ChunkGrid> GridFor(const Path& path, const Box& box, const FieldSpace& fields) const {
    const uint64_t slot_limit =
        config.space_threshold / static_cast<uint64_t>(config.slots_per_buffer);
    uint64_t target = UINT64_MAX;
    for (const TopologyEdge& e : path.edges) {
      target = std::min(target, channels[e.channel]->caps().request_bytes);
    }
    if (path.edges.size() > 1) target = std::min(target, slot_limit);
    // A disk hop of a pipeline moves a chunk as runs of the file's layout,
    // and a layout change elsewhere on the path cuts those runs short (a
    // 16-row transpose: 16 runs of chunk/16 bytes). Larger chunks, up to a
    // slot, keep its I/Os long; at least 8 chunks keep the hops overlapped.
    // Measured (1 GiB, 2-core VM, medians of 5 paired rounds): DSK -> DSK
    // transpose 0.87-0.92 -> 1.06-1.11 of read + write; AOS -> SOA into a
    // file 0.94-1.05 -> 1.09-1.10 of the plain durable write.
    // (DSK memories are only ever a path's ends: Build refuses others.)
    const bool disk_hop = IsDisk(path.nodes.front().memory) || IsDisk(path.nodes.back().memory);
    if (disk_hop && path.edges.size() > 1) {
      const uint64_t bytes = box.volume() * fields.total_bytes();
      target = std::max(target, std::min(slot_limit, bytes / 8));
    }
    return GridAlong(path, box, fields, target, slot_limit);
  }

  // Checks a cross-node part and puts its path on `t`: hops that live
  // here get this node's channels, the network hop the peer's channel, and
  // hops of the other node are marked remote.
  Status AdoptRemotePath(TransferState& t, const RemotePart& part) const {
    const Path& path = part.path;
    if (path.edges.empty() || path.nodes.size() != path.edges.size() + 1 ||
        part.net_hop >= path.edges.size()) {
      return InvalidArgument("cross-node copy ", part.key, ": malformed path");
    }
    int net = -1;
    for (size_t c = 0; c < config.channels.size(); ++c) {
      if (config.channels[c].kind == ChannelKind::kRemoteMemcpy &&
          config.channels[c].peer == part.peer) {
        net = static_cast<int>(c);
      }
    }
    if (net < 0) {
      return FailedPrecondition("cross-node copy ", part.key, ": no network channel to peer '",
                                part.peer, "' on this node");
    }
    // The other node planned this path: check it as untrusted input.
    // Nodes on this side of the network hop must be this node's memories,
    // those on the other side another node's.
    for (size_t i = 0; i < path.nodes.size(); ++i) {
      const MemoryId m = path.nodes[i].memory;
      const bool here = part.sending ? i <= part.net_hop : i > part.net_hop;
      if (here != IsLocal(m) || (here && !topo.FindMemory(m))) {
        return InvalidArgument("cross-node copy ", part.key, ": path node ", i, " (",
                               MemoryName(m, &part), ") is not where the network hop puts it");
      }
    }
    if (part.chunk_target < 4096 || part.chunk_target > (256ull << 20) || part.slot_limit < 4096 ||
        part.slot_limit > config.space_threshold) {
      return InvalidArgument("cross-node copy ", part.key, ": chunks of ", part.chunk_target,
                             " bytes in slots of ", part.slot_limit,
                             " are outside this node's limits");
    }
    t.path = path;
    for (size_t h = 0; h < path.edges.size(); ++h) {
      TopologyEdge& e = t.path.edges[h];
      const bool mine = part.sending ? h <= part.net_hop : h >= part.net_hop;
      if (h == part.net_hop) {
        const MemoryId here = part.sending ? e.src : e.dst;
        if (!IsLocal(here) || IsLocal(part.sending ? e.dst : e.src)) {
          return InvalidArgument("cross-node copy ", part.key, ": hop ", h,
                                 " does not cross from this node to another");
        }
        e.channel = net;
        continue;
      }
      if (!mine) {
        e.channel = -1;
        continue;
      }
      const TopologyEdge* local = topo.FindEdge(e.src, e.dst);
      if (!IsLocal(e.src) || !local) {
        return NotFound("cross-node copy ", part.key, ": no channel here connects ",
                        MemoryName(e.src, &part), " to ", MemoryName(e.dst, &part), " (hop ", h,
                        ")");
      }
      e.channel = local->channel;
    }
    for (size_t i = 1; i + 1 < path.nodes.size(); ++i) {
      if (IsLocal(path.nodes[i].memory) && IsDisk(path.nodes[i].memory)) {
        return FailedPrecondition("cross-node copy ", part.key,
                                  " stages in a DSK memory; DSK memories are endpoints only");
      }
    }
    return OkStatus();
  }

  Result<std::shared_ptr<TransferState>> Build(CopyRequest& req) {
    const bool sending = req.remote && req.remote->sending;
    const bool receiving = req.remote && !req.remote->sending;
    if (receiving) {
      ISO_RETURN_IF_ERROR(req.src.shape.Validate("source instance"));
    } else {
      ISO_RETURN_IF_ERROR(CheckInstance(req.src, "source instance"));
    }
    if (sending) {
      ISO_RETURN_IF_ERROR(req.dst.shape.Validate("destination instance"));
    } else {
      ISO_RETURN_IF_ERROR(CheckInstance(req.dst, "destination instance"));
    }
    if (!(req.src.shape.fields == req.dst.shape.fields)) {
      return InvalidArgument("copy: source and destination field spaces differ; fields must ",
                             "match by name, order and size");
    }
    ISO_RETURN_IF_ERROR(CheckCopyDimensions(req.src.shape.bounds, req.dst.shape.bounds, req.box));
    const Box box = req.box.value_or(req.src.shape.bounds);
    ISO_RETURN_IF_ERROR(box.Validate("copy box"));
    for (const InstanceRef* r : {&req.src, &req.dst}) {
      if (!r->shape.bounds.contains(box)) {
        return OutOfRange("copy box ", ToString(box), " lies outside the ",
                          r == &req.src ? "source" : "destination", " index space ",
                          ToString(r->shape.bounds));
      }
    }
    const bool src_disk = !receiving && IsDisk(req.src.memory);
    const bool dst_disk = !sending && IsDisk(req.dst.memory);
    if (!req.remote && !src_disk && !dst_disk && Overlaps(req.src, req.dst)) {
      return InvalidArgument("copy: source and destination storage overlap in memory '",
                             MemoryName(req.src.memory), "'");
    }
    auto t = std::make_shared<TransferState>();
    t->priority = req.priority;
    t->src = req.src;
    t->dst = req.dst;
    t->box = box;
    t->on_complete = std::move(req.on_complete);
    t->durable = req.durable;
    t->runtime = self;
    if (req.remote) {
      ISO_RETURN_IF_ERROR(AdoptRemotePath(*t, *req.remote));
      t->remote = req.remote;
      t->net_channel = t->path.edges[req.remote->net_hop].channel;
    } else {
      ISO_ASSIGN_OR_RETURN(t->path, MakePath(req.src, req.dst, box, req.via));
    }
    t->last_hop = sending ? req.remote->net_hop : t->path.edges.size() - 1;
    for (size_t i = 1; i + 1 < t->path.nodes.size() && !req.remote; ++i) {
      if (IsDisk(t->path.nodes[i].memory)) {
        return FailedPrecondition("the path ", t->path.ToString(topo),
                                  " stages in a DSK memory; DSK memories are endpoints only");
      }
    }
    if (src_disk) {
      ISO_ASSIGN_OR_RETURN(
          t->src_disk, DiskEndpoint::OpenForRead(DiskOf(req.src.memory), req.src.file,
                                                 req.src.file_offset, req.src.shape.total_bytes()));
    }
    if (dst_disk) {
      // Only a copy that writes every byte of the instance may drop the
      // file's old content; any other keeps the bytes it does not write.
      const InstanceShape& d = req.dst.shape;
      const bool covers =
          box == d.bounds && d.bounds.volume() * d.fields.total_bytes() == d.total_bytes();
      ISO_ASSIGN_OR_RETURN(
          t->dst_disk,
          DiskEndpoint::OpenForWrite(DiskOf(req.dst.memory), req.dst.file, req.dst.file_offset,
                                     d.total_bytes(), covers, req.disk_owner));
    }

    const size_t hops = t->path.edges.size();
    const int slots = config.slots_per_buffer;
    const uint64_t entry = req.src.shape.fields.total_bytes();
    ISO_ASSIGN_OR_RETURN(ChunkGrid grid,
                         req.remote ? GridAlong(t->path, box, req.src.shape.fields,
                                                req.remote->chunk_target, req.remote->slot_limit)
                                    : GridFor(t->path, box, req.src.shape.fields));
    if (req.remote && grid.count() > (1ull << 22)) {
      return InvalidArgument("cross-node copy ", req.remote->key, ": ", grid.count(),
                             " chunks; at most 4194304 (raise cluster.request_size)");
    }
    t->grid = grid;
    std::vector<uint64_t> need(pools.size(), 0);
    for (size_t i = 1; i + 1 < t->path.nodes.size(); ++i) {
      RingBuffer b;
      b.memory = t->path.nodes[i].memory;
      if (!IsLocal(b.memory)) {  // the other node's buffer
        b.remote = true;
        b.layout = t->path.nodes[i].layout;
        t->buffers.push_back(b);
        continue;
      }
      b.pool = PoolIndex(b.memory);
      b.layout = t->path.nodes[i].layout;
      b.slot_bytes = grid.SlotBytes(b.layout, entry);
      b.slots = slots;
      need[b.pool] += b.bytes();
      t->buffers.push_back(b);
    }
    for (size_t p = 0; p < pools.size(); ++p) {
      if (need[p] > pools[p].budget()) {
        return ResourceExhausted("copy needs ", need[p], " bytes of staging in memory '",
                                 topo.memories[p].name, "', whose budget is ", pools[p].budget());
      }
    }
    for (size_t h = 0; h < hops; ++h) {
      auto x = std::make_unique<XdState>();
      x->transfer = t.get();
      x->hop = h;
      x->remote = t->path.edges[h].channel < 0;
      x->channel = x->remote ? 0 : static_cast<size_t>(t->path.edges[h].channel);
      x->done.assign(grid.count(), 0);
      t->xds.push_back(std::move(x));
    }
    return t;
  }

  // ---- admission (under mu) ----

  // Takes every ring buffer of `t` or none: buffers are taken in the global
  // memory order (Isometry §3.6), all under one lock, so a transfer never
  // holds some buffers while waiting for others.
  bool TryAdmit(TransferState& t) {
    std::vector<uint64_t> need(pools.size(), 0);
    for (const RingBuffer& b : t.buffers) {
      if (!b.remote) need[b.pool] += b.bytes();
    }
    for (size_t p = 0; p < pools.size(); ++p) {
      if (!pools[p].Fits(need[p])) return false;
    }
    std::vector<RingBuffer*> order;
    for (RingBuffer& b : t.buffers) {
      if (!b.remote) order.push_back(&b);
    }
    std::stable_sort(order.begin(), order.end(), [](const RingBuffer* a, const RingBuffer* b) {
      return a->memory < b->memory;
    });
    for (RingBuffer* b : order) {
      auto block = pools[b->pool].Take(b->bytes());
      if (!block.ok()) {  // out of host memory: undo and wait
        for (RingBuffer* u : order) {
          if (u->data) pools[u->pool].Give(std::exchange(u->data, nullptr), u->bytes());
        }
        return false;
      }
      b->data = *block;
    }
    t.phase = Phase::kRunning;
    for (auto& x : t.xds) {
      if (x->remote) continue;
      DmaWorker& w = *workers[x->channel];
      auto pos = std::upper_bound(w.pool.begin(), w.pool.end(), x.get(),
                                  [](const XdState* a, const XdState* b) {
                                    return a->transfer->priority > b->transfer->priority;
                                  });
      w.pool.insert(pos, x.get());
    }
    t.times.dispatch_seq_at_submit = workers[FirstLocalXd(t).channel]->dispatch_seq;
    return true;
  }

  // Admits waiting transfers in (priority, submission) order; stops at the
  // first that does not fit so large transfers are not starved.
  void AdmitWaiting() {
    while (!waiting.empty() && TryAdmit(*waiting.front())) {
      active[waiting.front()->id] = waiting.front();
      waiting.erase(waiting.begin());
    }
    NotifyWorkers();
  }

  void Enqueue(std::shared_ptr<TransferState> t) {
    auto pos =
        std::upper_bound(waiting.begin(), waiting.end(), t,
                         [](const auto& a, const auto& b) { return a->priority > b->priority; });
    waiting.insert(pos, std::move(t));
    ++stats.transfers_waiting_for_buffers;
    AdmitWaiting();
  }

  static const XdState& FirstLocalXd(const TransferState& t) {
    for (const auto& x : t.xds) {
      if (!x->remote) return *x;
    }
    return *t.xds.front();
  }

  void NotifyWorkers() {
    for (auto& w : workers) w->cv.notify_all();
  }

  // ---- completion (under mu) ----

  Completion Finish(const std::shared_ptr<TransferState>& t, Status status) {
    for (auto& x : t->xds) {
      if (x->remote) continue;
      auto& pool = workers[x->channel]->pool;
      pool.erase(std::remove(pool.begin(), pool.end(), x.get()), pool.end());
    }
    for (RingBuffer& b : t->buffers) {
      if (b.data) pools[b.pool].Give(std::exchange(b.data, nullptr), b.bytes());
    }
    t->phase = Phase::kFinished;
    t->times.finished = Clock::now();
    t->src_disk.reset();
    t->dst_disk.reset();  // removes the temporary file unless committed
    if (status.ok()) {
      ++stats.transfers_completed;
    } else if (absl::IsCancelled(status)) {
      ++stats.transfers_cancelled;
    } else {
      ++stats.transfers_failed;
      // A client can fail transfers at will (a missing file, a bad layout):
      // its strings are escaped and its lines limited per error code.
      static LogLimiter limiter(20, std::chrono::seconds(10));
      if (const auto v = limiter.Allow(absl::StatusCodeToString(status.code())); v.log) {
        if (v.suppressed) {
          spdlog::warn("suppressed {} similar 'transfer failed' lines", v.suppressed);
        }
        spdlog::warn("transfer {} failed: {}", t->id, ForLog(status.ToString(), 512));
      }
    }
    {
      std::lock_guard lock(t->done_mu);
      t->finished = true;
      t->status = std::move(status);
      t->final_times = t->times;
    }
    active.erase(t->id);
    waiting.erase(std::remove(waiting.begin(), waiting.end(), t), waiting.end());
    AdmitWaiting();
    drained_cv.notify_all();
    return Completion{t};
  }

  // Stops issuing new requests; the transfer finishes when the last request
  // in flight returns.
  Completion Abort(const std::shared_ptr<TransferState>& t, Status why) {
    if (why.ok()) why = absl::UnknownError("transfer aborted without a reason");
    if (t->remote && !t->abandoned && t->phase != Phase::kFinished) {
      // Frees what the network channel holds for it and tells the other node.
      t->abandoned = true;
      channels[static_cast<size_t>(t->net_channel)]->AbandonTransfer(t->remote->key, why);
    }
    if (t->phase == Phase::kWaiting) return Finish(t, std::move(why));
    if (t->phase != Phase::kRunning) return {};
    t->phase = Phase::kDraining;
    t->failure = std::move(why);
    if (t->in_flight == 0) return Finish(t, t->failure);
    // Requests in flight end at the channels' next safe point instead of
    // running to completion (a slow or paced channel could take minutes).
    t->cancelled.store(true, std::memory_order_release);
    for (const auto& x : t->xds) {
      if (!x->remote) channels[x->channel]->Interrupt();
    }
    return {};
  }

  void Cancel(const std::shared_ptr<TransferState>& t) {
    AbortNow(t, absl::CancelledError(StrCat("transfer ", t->id, " was cancelled")));
  }
  void AbortNow(const std::shared_ptr<TransferState>& t, Status why) {
    Completion c;
    {
      std::lock_guard lock(mu);
      c = Abort(t, std::move(why));
    }
    c.Run();
  }

  // ---- the inline latency path ----

  // Constant-data check: a direct copy of one chunk, no larger than
  // inline_bytes, on a channel that can run it on this thread.
  bool RunsInline(const TransferState& t) const {
    if (config.inline_bytes == 0 || t.xds.size() != 1 || t.grid->count() != 1) return false;
    const Channel& ch = *channels[t.xds[0]->channel];
    return ch.caps().runs_inline &&
           t.box.volume() * t.src.shape.fields.total_bytes() <= config.inline_bytes;
  }

  Completion RunInline(const std::shared_ptr<TransferState>& t) {
    const Box chunk = t->grid->chunk(0);
    auto program = cache.Get(t->src.shape, t->dst.shape, chunk);
    Status s = program.ok() ? channels[t->xds[0]->channel]->RunInline(
                                  {*program, HostBytes{t->src.base}, HostBytes{t->dst.base}})
                            : program.status();
    std::lock_guard lock(mu);
    DmaWorker& w = *workers[t->xds[0]->channel];
    t->times.first_dispatch = Clock::now();
    ++stats.transfers_inline;
    active[t->id] = t;
    if (s.ok()) {
      t->xds[0]->done[0] = 1;
      t->xds[0]->done_count = 1;
      ++w.requests_done;
      w.bytes_done += (*program)->bytes;
    }
    return Finish(t, std::move(s));
  }

  // ---- the DMA worker (Isometry §3.5) ----

  static bool Runnable(const XdState& x) {
    const TransferState& t = *x.transfer;
    if (t.phase != Phase::kRunning || x.next >= t.grid->count()) return false;
    const uint64_t k = x.next;
    // Copy dependency. The network hop's receiving half needs no check
    // here: data arrival gates it inside its channel.
    if (x.hop > 0 && !t.xds[x.hop - 1]->remote && !t.xds[x.hop - 1]->done[k]) return false;
    // A free output slot. The sending half's slot is on the other node:
    // the receiver's credits gate it inside the channel.
    if (x.hop + 1 < t.xds.size() && !t.xds[x.hop + 1]->remote) {
      const uint64_t slots = static_cast<uint64_t>(t.buffers[x.hop].slots);
      if (k >= slots && !t.xds[x.hop + 1]->done[k - slots]) return false;
    }
    return true;
  }

  // One end of an XD's request for chunk k: its shape (for the program)
  // and where its bytes are (host memory, a file, the network).
  struct ChunkEnd {
    InstanceShape shape;
    Endpoint where;
  };

  // Chunk k as it crosses the network: dense in the receiving side's layout.
  static ChunkEnd Wire(const TransferState& t, const Box& chunk, uint64_t k) {
    const size_t h = t.remote->net_hop;
    InstanceShape s{chunk, t.src.shape.fields, t.path.nodes[h + 1].layout};
    return {std::move(s), NetHalf{t.remote->key, k}};
  }

  ChunkEnd InputOf(const TransferState& t, size_t hop, const Box& chunk, uint64_t k) const {
    if (t.remote && !t.remote->sending && hop == t.remote->net_hop) return Wire(t, chunk, k);
    if (hop == 0) {
      if (t.src_disk) return {t.src.shape, t.src_disk->Ref(t.src.file_offset)};
      return {t.src.shape, HostBytes{t.src.base}};
    }
    return SlotOf(t, t.buffers[hop - 1], chunk, k);
  }
  ChunkEnd OutputOf(const TransferState& t, size_t hop, const Box& chunk, uint64_t k) const {
    if (t.remote && t.remote->sending && hop == t.remote->net_hop) return Wire(t, chunk, k);
    if (hop + 1 == t.xds.size()) {
      if (t.dst_disk) return {t.dst.shape, t.dst_disk->Ref(t.dst.file_offset)};
      return {t.dst.shape, HostBytes{t.dst.base}};
    }
    return SlotOf(t, t.buffers[hop], chunk, k);
  }
  static ChunkEnd SlotOf(const TransferState& t, const RingBuffer& b, const Box& chunk,
                         uint64_t k) {
    InstanceShape s{chunk, t.src.shape.fields, b.layout};
    return {std::move(s), HostBytes{b.data + (k % static_cast<uint64_t>(b.slots)) * b.slot_bytes}};
  }

  // Moves `x` behind the other XDs of its priority: equal priorities take
  // turns request by request, so one transfer of slow requests (a layout
  // change forced onto a disk hop) cannot hold a channel for its whole
  // length while another of the same priority waits. Higher priorities
  // still always go first.
  static void RotateAmongEquals(std::vector<XdState*>& pool, XdState* x) {
    auto at = std::find(pool.begin(), pool.end(), x);
    auto end = at;
    while (end + 1 != pool.end() && (*(end + 1))->transfer->priority == x->transfer->priority)
      ++end;
    std::rotate(at, at + 1, end + 1);
  }

  void WorkerLoop(DmaWorker& w) {
    std::unique_lock lock(mu);
    while (true) {
      if (stopping && w.pool.empty() && w.in_flight == 0) return;
      XdState* x = nullptr;
      if (w.in_flight < w.max_in_flight) {
        for (XdState* c : w.pool) {
          if (Runnable(*c)) {
            x = c;
            break;
          }
        }
      }
      if (!x) {
        w.cv.wait(lock);
        continue;
      }
      TransferState& t = *x->transfer;
      std::shared_ptr<TransferState> keep = active.at(t.id);
      RotateAmongEquals(w.pool, x);
      const uint64_t k = x->next++;
      ++x->in_flight;
      ++t.in_flight;
      ++w.in_flight;
      ++w.dispatch_seq;
      if (!t.dispatched) {
        t.dispatched = true;
        t.times.first_dispatch = Clock::now();
        t.times.dispatch_seq_at_first = w.dispatch_seq;
      }
      if (x == &FirstLocalXd(t)) t.times.dispatch_seq_at_last = w.dispatch_seq;
      const Box chunk = t.grid->chunk(k);
      ChunkEnd in = InputOf(t, x->hop, chunk, k);
      ChunkEnd out = OutputOf(t, x->hop, chunk, k);
      lock.unlock();

      auto program = cache.Get(in.shape, out.shape, chunk);
      if (!program.ok()) {
        OnRequestDone(keep, x, k, 0, program.status());
      } else {
        const uint64_t bytes = (*program)->bytes;
        channels[w.channel]->Submit(
            {*program, std::move(in.where), std::move(out.where), t.priority, &t.cancelled},
            [this, keep, x, k, bytes](Status s) {
              OnRequestDone(keep, x, k, bytes, std::move(s));
            });
      }
      lock.lock();
    }
  }

  void OnRequestDone(const std::shared_ptr<TransferState>& t, XdState* x, uint64_t k,
                     uint64_t bytes, Status s) {
    Completion c;
    bool commit = false;
    {
      std::lock_guard lock(mu);
      DmaWorker& w = *workers[x->channel];
      --w.in_flight;
      --x->in_flight;
      --t->in_flight;
      if (s.ok()) {
        x->done[k] = 1;
        ++x->done_count;
        ++w.requests_done;
        w.bytes_done += bytes;
        if (t->phase == Phase::kRunning && t->xds[t->last_hop]->done_count == t->grid->count()) {
          if (t->dst_disk) {
            commit = true;  // fdatasync + rename, outside the lock
          } else {
            c = Finish(t, OkStatus());
          }
        }
      } else if (t->phase == Phase::kRunning) {
        const TopologyEdge& e = t->path.edges[x->hop];
        const RemotePart* remote = t->remote ? &*t->remote : nullptr;
        c = Abort(t, Status(s.code(), StrCat("transfer ", t->id, ", hop ", x->hop, " (",
                                             MemoryName(e.src, remote), " -> ",
                                             MemoryName(e.dst, remote), " on channel '",
                                             e.channel_name, "'), chunk ", k, ": ", s.message())));
      }
      if (t->phase == Phase::kDraining && t->in_flight == 0) c = Finish(t, t->failure);
      // Only this transfer's channels can have new work (a free slot, a
      // finished dependency, room in flight); waking every worker on every
      // request costs more than the request on fast channels.
      for (const auto& xd : t->xds) {
        if (!xd->remote) workers[xd->channel]->cv.notify_all();
      }
    }
    if (commit) {
      // Every chunk is written; no request of this transfer is in flight.
      Status durable = t->dst_disk->Commit(t->durable);
      std::lock_guard lock(mu);
      c = Finish(t, durable.ok() ? durable
                                 : Status(durable.code(),
                                          StrCat("transfer ", t->id, ": ", durable.message())));
    }
    c.Run();
  }
};

// ---- Runtime ----

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->self = this; }

Result<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeConfig& config, ChannelMaker maker) {
  ISO_RETURN_IF_ERROR(config.Validate());
  if (!maker) maker = [](const ChannelConfig& c) { return MakeChannel(c); };
  auto impl = std::make_unique<Impl>(config);
  std::map<std::string, MemoryId> ids;
  for (size_t i = 0; i < config.memories.size(); ++i) {
    const MemoryConfig& m = config.memories[i];
    const MemoryId id{config.node, static_cast<uint32_t>(i)};
    // A DSK directory is resolved once, here: every file step starts at
    // this fd (daemon/runtime/disk_memory.h).
    impl->disks.emplace_back();
    if (m.kind == MemoryKind::kDsk) {
      ISO_ASSIGN_OR_RETURN(impl->disks.back(), DiskMemory::Open(m));
      spdlog::info(
          "memory '{}': DSK directory {} opened; names resolved beneath it with {}, no "
          "links; files up to {} bytes, {} bytes being written at once per uid{}",
          m.name, m.directory, DiskMemory::Resolution(), m.max_file_bytes, m.quota_bytes,
          m.allow_hard_links ? "; files with several hard links allowed" : "");
    }
    impl->topo.memories.push_back({id, m.kind, m.name});
    impl->pools.emplace_back(id, m.staging_bytes, m.name);
    ids[m.name] = id;
  }
  bool thp_warned = false;
  for (size_t c = 0; c < config.channels.size(); ++c) {
    const ChannelConfig& cc = config.channels[c];
    ISO_ASSIGN_OR_RETURN(std::unique_ptr<Channel> ch, maker(cc));
    for (const auto& [s, d] : config.EdgesOf(cc)) {
      TopologyEdge e{ids[s], ids[d], static_cast<int>(c), cc.kind, cc.name};
      // Until calibration measures them (runtime.calibrate), disk channels
      // are modelled as a 1 GB/s device with 100 us per request, so the
      // planner keeps small requests (and layout changes) off them
      // (Isometry fig. 9b).
      if (cc.kind == ChannelKind::kDiskRead || cc.kind == ChannelKind::kDiskWrite) {
        e.tp = ThroughputFunction::PerRequestOverhead(1e9, 100e-6);
      }
      impl->topo.edges.push_back(std::move(e));
    }
    spdlog::info(
        "channel '{}' ({}): {} thread(s), {} request(s) in flight, requests of {} bytes{}", cc.name,
        ChannelKindName(cc.kind), cc.threads, ch->caps().max_in_flight, cc.request_bytes,
        cc.rate_limit_bytes_per_s ? StrCat(", capped at ", cc.rate_limit_bytes_per_s, " bytes/s")
                                  : std::string());
    // Ring, registrations, staging and its page size: what an operator
    // checks when a disk path is slower than fio.
    if (const std::string d = DescribeDiskChannel(*ch); !d.empty()) {
      spdlog::info("{}", d);
      if (!thp_warned && TransparentHugePageMode() == "never") {
        thp_warned = true;
        spdlog::warn(
            "transparent huge pages are off: staging rings use 4 KiB pages, so every "
            "O_DIRECT request is one segment per page (slower on virtualized disks); "
            "'echo madvise > /sys/kernel/mm/transparent_hugepage/enabled' enables them");
      }
    }
    impl->channels.push_back(std::move(ch));
  }
  if (config.calibrate) {
    ISO_ASSIGN_OR_RETURN(Calibration cal, impl->LoadOrMeasure(/*force=*/false));
    ISO_RETURN_IF_ERROR(impl->ApplyCalibration(cal));
  } else {
    impl->MakePlanner();
  }
  std::unique_ptr<Runtime> rt(new Runtime(std::move(impl)));
  Impl* p = rt->impl_.get();
  for (size_t c = 0; c < p->channels.size(); ++c) {
    auto w = std::make_unique<DmaWorker>();
    w->channel = c;
    w->max_in_flight = p->channels[c]->caps().max_in_flight;
    p->workers.push_back(std::move(w));
  }
  for (auto& w : p->workers) {
    DmaWorker* wp = w.get();
    wp->thread = std::thread([p, wp] { p->WorkerLoop(*wp); });
  }
  return rt;
}

Runtime::~Runtime() {
  std::vector<Completion> done;
  {
    std::unique_lock lock(impl_->mu);
    impl_->stopping = true;
    while (!impl_->waiting.empty()) {
      done.push_back(
          impl_->Finish(impl_->waiting.front(), absl::CancelledError("runtime is shutting down")));
    }
    std::vector<std::shared_ptr<TransferState>> running;
    for (auto& [id, t] : impl_->active) running.push_back(t);
    for (auto& t : running) {
      done.push_back(impl_->Abort(t, absl::CancelledError("runtime is shutting down")));
    }
    impl_->NotifyWorkers();
  }
  for (Completion& c : done) c.Run();
  {
    std::unique_lock lock(impl_->mu);
    impl_->drained_cv.wait(lock, [&] { return impl_->active.empty(); });
    impl_->NotifyWorkers();
  }
  for (auto& w : impl_->workers) w->thread.join();
  impl_->channels.clear();
}

Result<MemoryId> Runtime::FindMemory(std::string_view name) const {
  for (const TopologyMemory& m : impl_->topo.memories) {
    if (m.name == name) return m.id;
  }
  return NotFound("no memory named '", name, "'");
}

Result<Transfer> Runtime::Copy(CopyRequest request) {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<TransferState> t, impl_->Build(request));
  Completion c;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return Unavailable("runtime is shutting down");
    t->id = impl_->next_id++;
    t->times.submitted = Clock::now();
    ++impl_->stats.transfers_submitted;
    if (t->grid->count() == 0) {
      impl_->active[t->id] = t;
      c = impl_->Finish(t, OkStatus());
    } else if (!impl_->RunsInline(*t)) {
      impl_->Enqueue(t);
    }
  }
  if (!c.transfer && t->phase == Phase::kWaiting && impl_->RunsInline(*t)) {
    c = impl_->RunInline(t);
  }
  c.Run();
  return Transfer(t);
}

Result<Path> Runtime::Plan(const InstanceRef& src, const InstanceRef& dst) const {
  return impl_->MakePath(src, dst, src.shape.bounds, {});
}

PlanExplanation ExplainGrid(Path path, const ChunkGrid& grid, uint64_t entry_bytes,
                            int slots_per_buffer) {
  PlanExplanation e;
  e.path = std::move(path);
  e.chunks = grid.count();
  e.chunk_bytes = grid.full_chunk().volume() * entry_bytes;
  for (size_t i = 1; i + 1 < e.path.nodes.size(); ++i) {
    e.buffer_bytes.push_back(grid.SlotBytes(e.path.nodes[i].layout, entry_bytes) *
                             static_cast<uint64_t>(slots_per_buffer));
  }
  return e;
}

Result<PlanExplanation> Runtime::Explain(const InstanceRef& src, const InstanceRef& dst) const {
  ISO_ASSIGN_OR_RETURN(Path path, impl_->MakePath(src, dst, src.shape.bounds, {}));
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid, impl_->GridFor(path, src.shape.bounds, src.shape.fields));
  return ExplainGrid(std::move(path), grid, src.shape.fields.total_bytes(),
                     impl_->config.slots_per_buffer);
}

Result<Calibration> Runtime::Recalibrate() {
  std::lock_guard lock(impl_->calibrate_mu);
  ISO_ASSIGN_OR_RETURN(Calibration cal, impl_->LoadOrMeasure(/*force=*/true));
  ISO_RETURN_IF_ERROR(impl_->ApplyCalibration(cal));
  return cal;
}

std::vector<MemoryUsage> Runtime::Memories() const {
  std::lock_guard lock(impl_->mu);
  std::vector<MemoryUsage> out;
  for (size_t i = 0; i < impl_->pools.size(); ++i) {
    const StagingPool& p = impl_->pools[i];
    const TopologyMemory& m = impl_->topo.memories[i];
    out.push_back({m.name, m.id, m.kind, p.budget(), p.used(), p.peak(), p.largest()});
  }
  return out;
}

std::vector<ChannelStats> Runtime::Channels() const {
  std::lock_guard lock(impl_->mu);
  std::vector<ChannelStats> out;
  for (auto& w : impl_->workers) {
    ChannelStats s;
    s.name = impl_->channels[w->channel]->caps().name;
    for (const XdState* x : w->pool) {
      if (x->done_count < x->transfer->grid->count()) ++s.xds_queued;
    }
    s.requests_in_flight = w->in_flight;
    s.requests_done = w->requests_done;
    s.bytes_done = w->bytes_done;
    s.dispatch_seq = w->dispatch_seq;
    s.threads_or_slots = w->max_in_flight;
    for (const XdState* x : w->pool) {
      if (x->done_count >= x->transfer->grid->count()) continue;
      const int p = x->transfer->priority;
      if (s.queued_by_priority.empty() || s.queued_by_priority.back().first != p) {
        s.queued_by_priority.emplace_back(p, 0);
      }
      ++s.queued_by_priority.back().second;
    }
    out.push_back(s);
  }
  return out;
}

RuntimeStats Runtime::Stats() const {
  RuntimeStats s;
  {
    std::lock_guard lock(impl_->mu);
    s = impl_->stats;
  }
  s.program_cache_hits = impl_->cache.hits();
  s.program_cache_misses = impl_->cache.misses();
  s.program_cache_bytes = impl_->cache.bytes();
  const PlannerStats p = impl_->CurrentPlanner()->stats();
  s.plan_cache_hits = p.cache_hits;
  s.plan_cache_misses = p.cache_misses;
  s.plans_simple = p.simple_plans;
  s.plans_full = p.full_plans;
  return s;
}

const Topology& Runtime::topology() const { return impl_->topo; }
const RuntimeConfig& Runtime::config() const { return impl_->config; }

// ---- Transfer ----

uint64_t Transfer::id() const { return state_->id; }

Status Transfer::Wait() const {
  std::unique_lock lock(state_->done_mu);
  state_->done_cv.wait(lock, [&] { return state_->finished; });
  return state_->status;
}

std::optional<Status> Transfer::WaitFor(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(state_->done_mu);
  if (!state_->done_cv.wait_for(lock, timeout, [&] { return state_->finished; })) {
    return std::nullopt;
  }
  return state_->status;
}

std::optional<Status> Transfer::Poll() const {
  std::lock_guard lock(state_->done_mu);
  if (!state_->finished) return std::nullopt;
  return state_->status;
}

void Transfer::Cancel() const { state_->runtime->impl_->Cancel(state_); }

void Transfer::Abort(Status why) const { state_->runtime->impl_->AbortNow(state_, std::move(why)); }

TransferTimes Transfer::times() const {
  {
    std::lock_guard lock(state_->done_mu);
    if (state_->finished) return state_->final_times;
  }
  // Never holds done_mu while taking the runtime lock (Finish nests them the
  // other way round).
  std::lock_guard lock(state_->runtime->impl_->mu);
  return state_->times;
}

const Path& Transfer::path() const { return state_->path; }

std::vector<uint64_t> Transfer::HopsDone() const {
  std::lock_guard lock(state_->runtime->impl_->mu);
  std::vector<uint64_t> done;
  for (const auto& x : state_->xds) done.push_back(x->done_count);
  return done;
}

uint64_t Transfer::chunks() const { return state_->grid->count(); }
int Transfer::priority() const { return state_->priority; }
uint64_t Transfer::bytes() const {
  return state_->box.volume() * state_->src.shape.fields.total_bytes();
}

}  // namespace isometry
