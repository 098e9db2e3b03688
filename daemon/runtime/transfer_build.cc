// Runtime::Impl, building a transfer from a copy request, in named steps:
// check its ends and box, plan its path (or adopt a peer's plan), open its
// DSK ends, cut it into chunks and size its intermediate buffers, and make
// one XD per hop. Nothing here takes the runtime lock: it reads constant
// data only, and a transfer that fails to build changes nothing.
#include <algorithm>

#include "channels/channel_factory.h"
#include "channels/cma/client_process.h"
#include "core/cpu_cache.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {
namespace {

// The smallest piece GridFor cuts a one-hop copy into for its channel's
// threads.
constexpr uint64_t kMinSplitBytes = 512ull << 10;

// The least ring depth of a pipeline from memory into a file (SlotsFor).
constexpr int kFileWriteSlots = 4;

bool Overlaps(const InstanceRef& a, const InstanceRef& b) {
  if (a.memory != b.memory) return false;
  if (a.process || b.process) {
    // PROCESS memory: addresses in one process's space.
    if (!a.process || !b.process || a.process->pid() != b.process->pid()) return false;
    const uint64_t a_end = a.address + StorageBytes(a);
    const uint64_t b_end = b.address + StorageBytes(b);
    return a.address < b_end && b.address < a_end;
  }
  const std::byte* a_end = a.base + StorageBytes(a);
  const std::byte* b_end = b.base + StorageBytes(b);
  return a.base < b_end && b.base < a_end;
}

}  // namespace

// ---- names and lookups ----

bool Runtime::Impl::IsDisk(MemoryId id) const {
  const TopologyMemory* m = topo.FindMemory(id);
  return m && m->kind == MemoryKind::kDsk;
}

std::string Runtime::Impl::MemoryName(MemoryId id, const RemotePart* part) const {
  // A half's names first: node-qualified, as both nodes' users read them.
  if (part) {
    if (auto it = part->names.find(id); it != part->names.end()) return it->second;
  }
  if (const TopologyMemory* m = topo.FindMemory(id)) return m->name;
  return StrCat("memory ", id.memory, " of node ", id.node);
}

size_t Runtime::Impl::PoolIndex(MemoryId id) const {
  for (size_t i = 0; i < topo.memories.size(); ++i) {
    if (topo.memories[i].id == id) return i;
  }
  return topo.memories.size();
}

// ---- the steps ----

Result<std::shared_ptr<TransferState>> Runtime::Impl::Build(CopyRequest& req) {
  // A relay does both: neither end is on this node.
  const bool sending = req.remote && (req.remote->sending || req.remote->relays());
  const bool receiving = req.remote && !req.remote->sending;
  ISO_RETURN_IF_ERROR(MatchEnds(req));
  ISO_RETURN_IF_ERROR(CheckEnds(req, sending, receiving));
  ISO_ASSIGN_OR_RETURN(const Box box, CheckBox(req));
  const bool src_disk = !receiving && IsDisk(req.src.memory);
  const bool dst_disk = !sending && IsDisk(req.dst.memory);
  if (!req.remote && !src_disk && !dst_disk && Overlaps(req.src, req.dst)) {
    return InvalidArgument("copy: source and destination storage overlap in memory '",
                           MemoryName(req.src.memory), "'");
  }
  auto t = std::make_shared<TransferState>();
  t->options = req.options;
  t->share = req.share;
  t->box = box;
  t->on_complete = std::move(req.on_complete);
  t->runtime = self;
  ISO_RETURN_IF_ERROR(PlanPath(*t, req));
  const uint64_t stream_above =
      config.stream_above_bytes ? config.stream_above_bytes : LastLevelCacheBytes();
  t->stream_last_hop =
      !req.remote && box.volume() * req.src.shape.fields.total_bytes() > stream_above;
  ISO_RETURN_IF_ERROR(OpenDiskEnds(*t, req, src_disk, dst_disk));
  ISO_RETURN_IF_ERROR(SizeBuffers(*t, req));
  MakeXds(*t);
  if (req.remote && req.remote->on_grid) {
    const size_t h = req.remote->net_hop;
    const uint64_t entry = req.src.shape.fields.total_bytes();
    const uint64_t wire = std::max({t->grid->SlotBytes(t->path().nodes[h].layout, entry),
                                    t->grid->SlotBytes(t->path().nodes[h + 1].layout, entry),
                                    t->grid->full_chunk().volume() * entry});
    ISO_RETURN_IF_ERROR(req.remote->on_grid(t->grid->count(), wire));
  }
  // Taken last: the steps above read them from `req` (moved, not copied:
  // a copy counts every shared part of both ends up and down again).
  t->src = std::move(req.src);
  t->dst = std::move(req.dst);
  return t;
}

// The ends' forms agree (MatchForms). A copy between form ends is seen by
// the rest of the build as the stream both move (the shapes the caller
// gave are replaced), over its whole length.
Status Runtime::Impl::MatchEnds(CopyRequest& req) const {
  ISO_RETURN_IF_ERROR(MatchForms(req.src.form.get(), req.dst.form.get(), req.box.has_value()));
  if (!req.src.form) return OkStatus();
  if (!req.via.empty()) {
    return InvalidArgument("copy: forced hops are not supported for datatype copies");
  }
  req.src.shape = StreamShape(req.src.form->bytes);
  req.dst.shape = req.src.shape;
  return OkStatus();
}

// Each end is an instance this node holds, except the far end of a
// cross-node part (only its shape is known here).
Status Runtime::Impl::CheckEnds(const CopyRequest& req, bool sending, bool receiving) const {
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
  return OkStatus();
}

// The box to copy (the whole source by default), inside both index spaces.
Result<Box> Runtime::Impl::CheckBox(const CopyRequest& req) const {
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
  return box;
}

// A datatype against a layout described chunk by chunk, in one hop,
// would pair every run of every chunk (bounded per chunk): staged through
// a slot of host memory at either end instead, each hop is a compact
// program (the datatype's against dense bytes, then a layout program).
// Null when there is nothing to stage or no such memory.
std::shared_ptr<const Path> Runtime::Impl::StagedPath(const CopyRequest& req, const Path& planned,
                                                      const Box& box) const {
  if (planned.edges.size() != 1 || !PairsEveryRun(req.src.form.get(), req.dst.form.get())) {
    return nullptr;
  }
  for (const InstanceRef* end : {&req.dst, &req.src}) {
    const TopologyMemory* m = topo.FindMemory(end->memory);
    if (!m || !IsHostMemory(m->kind) || !IsLocal(end->memory)) continue;
    Result<std::shared_ptr<const Path>> p =
        MakePath(req.src, req.dst, box, {HopSpec{end->memory, req.src.shape.layout}});
    if (p.ok()) return *std::move(p);
  }
  return nullptr;
}

// This node's path: planned here, or a peer's plan checked and adopted.
Status Runtime::Impl::PlanPath(TransferState& t, const CopyRequest& req) const {
  if (req.remote) {
    ISO_RETURN_IF_ERROR(AdoptRemotePath(t, *req.remote));
    t.remote = req.remote;
    t.predicted_bps = t.path().predicted_bps;
    t.net_channel = t.path().edges[req.remote->net_hop].channel;
    if (req.remote->relays()) t.relay_channel = t.path().edges[req.remote->relay_hop].channel;
  } else {
    ISO_ASSIGN_OR_RETURN(t.shared_path, MakePath(req.src, req.dst, t.box, req.via));
    if (std::shared_ptr<const Path> staged = StagedPath(req, t.path(), t.box)) {
      t.shared_path = std::move(staged);
    }
    if (req.src.form) {
      Path costed = t.path();  // the cached path stays as planned
      CostEnds(costed, req.src.form.get(), req.dst.form.get(), topo);
      t.shared_path = std::make_shared<const Path>(std::move(costed));
    }
    std::optional<Path> unsynced =
        req.options.durable ? std::nullopt : Unsynced(t.path(), t.box, req.src.shape.fields);
    if (unsynced) CostEnds(*unsynced, req.src.form.get(), req.dst.form.get(), topo);
    t.predicted_bps = unsynced ? unsynced->predicted_bps : t.path().predicted_bps;
  }
  t.last_hop = !req.remote            ? t.path().edges.size() - 1
               : req.remote->sending  ? req.remote->net_hop
               : req.remote->relays() ? req.remote->relay_hop
                                      : t.path().edges.size() - 1;
  for (size_t i = 1; i + 1 < t.path().nodes.size() && !req.remote; ++i) {
    if (IsDisk(t.path().nodes[i].memory)) {
      return FailedPrecondition("the path ", t.path().ToString(topo),
                                " stages in a DSK memory; DSK memories are endpoints only");
    }
    const TopologyMemory* m = topo.FindMemory(t.path().nodes[i].memory);
    if (m && m->kind == MemoryKind::kProcess) {
      return FailedPrecondition("the path ", t.path().ToString(topo),
                                " stages in PROCESS memory; it is an endpoint only");
    }
  }
  return OkStatus();
}

Status Runtime::Impl::OpenDiskEnds(TransferState& t, const CopyRequest& req, bool src_disk,
                                   bool dst_disk) const {
  if (src_disk) {
    ISO_ASSIGN_OR_RETURN(t.src_disk, DiskEndpoint::OpenForRead(
                                         DiskOf(req.src.memory), req.src.file, req.src.file_offset,
                                         StorageBytes(req.src), req.disk_uid));
  }
  if (dst_disk) {
    // Only a copy that writes every byte of the instance may drop the
    // file's old content; any other keeps the bytes it does not write.
    const bool covers = CoversStorage(req.dst.shape, req.dst.form.get(), t.box);
    if (req.dst.file_in_place) {
      ISO_ASSIGN_OR_RETURN(
          t.dst_disk,
          DiskEndpoint::OpenInPlace(DiskOf(req.dst.memory), req.dst.file, req.dst.file_offset,
                                    StorageBytes(req.dst), req.disk_uid));
      return OkStatus();
    }
    ISO_ASSIGN_OR_RETURN(
        t.dst_disk,
        DiskEndpoint::OpenForWrite(DiskOf(req.dst.memory), req.dst.file, req.dst.file_offset,
                                   StorageBytes(req.dst), covers, req.disk_owner, req.disk_uid));
  }
  return OkStatus();
}

// Cuts the box into chunks and gives each intermediate memory of the path
// a ring buffer of slots; refuses a copy whose buffers could never fit.
Status Runtime::Impl::SizeBuffers(TransferState& t, const CopyRequest& req) const {
  const uint64_t entry = req.src.shape.fields.total_bytes();
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid,
                       req.remote ? GridAlong(t.path(), t.box, req.src.shape.fields,
                                              req.remote->chunk_target, req.remote->slot_limit)
                                  : GridOfCopy(t.shared_path, t.box, req.src.shape.fields));
  if (req.remote && grid.count() > (1ull << 22)) {
    return InvalidArgument("cross-node copy ", req.remote->key, ": ", grid.count(),
                           " chunks; at most 4194304 (raise cluster.request_size)");
  }
  t.grid = grid;
  if (t.path().nodes.size() <= 2) return OkStatus();  // one hop: no buffer between
  std::vector<uint64_t> need(topo.memories.size(), 0);
  for (size_t i = 1; i + 1 < t.path().nodes.size(); ++i) {
    RingBuffer b;
    b.memory = t.path().nodes[i].memory;
    b.layout = t.path().nodes[i].layout;
    if (!IsLocal(b.memory)) {  // the other node's buffer
      b.remote = true;
      t.buffers.push_back(b);
      continue;
    }
    b.pool = PoolIndex(b.memory);
    b.device =
        config.memories[b.pool].kind == MemoryKind::kFbm ? config.memories[b.pool].device : -1;
    b.slot_bytes = grid.SlotBytes(b.layout, entry);
    // A cross-node part's grid was cut for the cluster's slots (cross_plan.cc).
    b.slots = req.remote ? CrossNodeSlotsFor(config, req.remote->slot_limit) : SlotsFor(t.path());
    need[b.pool] += b.bytes();
    t.buffers.push_back(b);
  }
  // A client that runs its own hops: the buffer next to its end may live
  // in its window (the destination's first: writing a process run by run
  // costs the CMA channel most).
  // A GPU's buffer never moves into a window of host memory.
  if (!req.remote && !t.buffers.empty()) {
    if (req.dst.own_hops && t.buffers.back().device < 0) {
      t.buffers.back().own_hops = req.dst.own_hops.get();
    } else if (req.src.own_hops && t.buffers.front().device < 0) {
      t.buffers.front().own_hops = req.src.own_hops.get();
    }
  }
  for (size_t p = 0; p < need.size(); ++p) {
    // The budget is configuration (constant); pools[p] only tracks use.
    const uint64_t budget = config.memories[p].staging_bytes;
    if (need[p] > budget) {
      return ResourceExhausted("copy needs ", need[p], " bytes of staging in memory '",
                               topo.memories[p].name, "', whose budget is ", budget);
    }
  }
  return OkStatus();
}

// One XD per hop; hops of the other node are marked remote.
void Runtime::Impl::MakeXds(TransferState& t) const {
  for (size_t h = 0; h < t.path().edges.size(); ++h) {
    auto x = std::make_unique<XdState>();
    x->transfer = &t;
    x->hop = h;
    x->remote = t.path().edges[h].channel < 0;
    x->channel = x->remote ? 0 : static_cast<size_t>(t.path().edges[h].channel);
    x->done.assign(t.grid->count(), 0);
    t.xds.push_back(std::move(x));
  }
  for (size_t h = 0; h + 1 < t.xds.size(); ++h) {
    if (!TimesRing(t, h)) continue;
    const uint64_t epochs =
        (t.grid->count() + RingStores::kEpochChunks - 1) / RingStores::kEpochChunks;
    t.xds[h]->streamed.assign(epochs, 0);
  }
}

// Whether hop `h` of `t` writes a ring that hop h + 1 reads, both on
// channels that take the store hint (memcpy), in a copy large enough to
// stream at all and long enough to time three epochs: its ring's chunks
// choose their stores by the pace they kept (ring_stores.h).
bool Runtime::Impl::TimesRing(const TransferState& t, size_t h) const {
  if (t.remote || !t.stream_last_hop || h + 1 > t.last_hop) return false;
  if (t.grid->count() < 3 * RingStores::kEpochChunks) return false;
  for (size_t side : {h, h + 1}) {
    if (t.xds[side]->remote || !channels[t.xds[side]->channel]->caps().streams_stores) return false;
  }
  return true;
}

// ---- checks and planning ----

Status Runtime::Impl::CheckInstance(const InstanceRef& ref, std::string_view what) const {
  ISO_RETURN_IF_ERROR(ref.shape.Validate(what));
  const TopologyMemory* m = topo.FindMemory(ref.memory);
  if (!m) return NotFound(what, ": unknown memory ", ToString(ref.memory));
  if (m->kind == MemoryKind::kDsk) {
    if (ref.base != nullptr) {
      return InvalidArgument(what, ": memory '", m->name, "' is DSK: name a file, not a pointer");
    }
    return CheckRelativePath(ref.file);
  }
  if (m->kind == MemoryKind::kProcess) {
    if (!ref.process) {
      return InvalidArgument(what, ": memory '", m->name,
                             "' is PROCESS: name a client's registered private range");
    }
  } else if (ref.process) {
    return InvalidArgument(what, ": a private range lives in PROCESS memory, not '", m->name, "'");
  } else if (!IsHostMemory(m->kind)) {
    return InvalidArgument(what, ": memory '", m->name, "' is ", MemoryKindName(m->kind),
                           "; this runtime addresses host and DSK memories");
  }
  const uint64_t need = StorageBytes(ref);
  if (need > 0 && ref.base == nullptr && !ref.process) {
    return InvalidArgument(what, ": base pointer is null");
  }
  if (need > ref.capacity) {
    const std::string described = DescribeEnd(
        ref.form.get(),
        StrCat("layout '", ref.shape.layout.ToString(), "' over ", ToString(ref.shape.bounds)));
    return OutOfRange(what, ": ", described, " needs ", need, " bytes but the buffer holds ",
                      ref.capacity);
  }
  return OkStatus();
}

Result<std::shared_ptr<const Path>> Runtime::Impl::MakePath(const InstanceRef& src,
                                                            const InstanceRef& dst, const Box& box,
                                                            const std::vector<HopSpec>& via) const {
  if (via.empty()) {
    return PlannerOfThread().PlanShared(
        {src.memory, src.shape.layout}, {dst.memory, dst.shape.layout}, box,
        src.shape.fields.total_bytes(), src.shape.fields.smallest_bytes());
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
  // The model's figures for the forced path too, so its prediction can be
  // held against what it measures; a path the model rejects (a shuffle
  // over TH between two intermediates) still runs, without them.
  Result<Path> evaluated = PlannerOfThread().Evaluate(p, box, src.shape.fields.total_bytes(),
                                                      src.shape.fields.smallest_bytes());
  return std::make_shared<const Path>(evaluated.ok() ? *std::move(evaluated) : std::move(p));
}

std::optional<Path> Runtime::Impl::Unsynced(const Path& path, const Box& box,
                                            const FieldSpace& fields) const {
  // Only disk write edges have the curve (FullPlanner::Evaluate reads it).
  const bool writes = std::any_of(path.edges.begin(), path.edges.end(),
                                  [](const TopologyEdge& e) { return e.tp_unsynced.has_value(); });
  if (!writes) return std::nullopt;
  Result<Path> p = PlannerOfThread().Evaluate(path, box, fields.total_bytes(),
                                              fields.smallest_bytes(), /*durable=*/false);
  if (!p.ok()) return std::nullopt;
  return *std::move(p);
}

// A pipeline from memory into a file writes each slot of its last buffer
// as a few long I/Os, and the slot is refilled only once all of them have
// ended. With two slots the disk waits for that refill; four slots of half
// the size (the same staging) keep it busy, and a converting write then
// keeps pace with a plain durable write of the same bytes. A DSK -> DSK
// transpose keeps the configured depth: smaller slots cut its runs
// shorter, and it ran slower with four (docs/benchmarks/design-measurements.md,
// "Disk").
int Runtime::Impl::SlotsFor(const Path& path) const {
  const bool writes_file = path.edges.size() > 1 && IsDisk(path.nodes.back().memory) &&
                           !IsDisk(path.nodes.front().memory);
  return writes_file ? std::max(config.slots_per_buffer, kFileWriteSlots) : config.slots_per_buffer;
}

// The chunk sequence a path runs with: chunks of about the smallest
// preferred request of its channels, and, with intermediate buffers, no
// larger than one slot (TH / SlotsFor(path)).
Result<ChunkGrid> Runtime::Impl::GridFor(const Path& path, const Box& box,
                                         const FieldSpace& fields) const {
  const uint64_t slot_limit = config.space_threshold / static_cast<uint64_t>(SlotsFor(path));
  uint64_t target = UINT64_MAX;
  for (const TopologyEdge& e : path.edges) {
    target = std::min(target, channels[e.channel]->caps().request_bytes);
  }
  if (path.edges.size() > 1) target = std::min(target, slot_limit);
  // A one-hop copy of fewer requests than its channel has threads would
  // leave threads idle: it is cut into a chunk per thread, none smaller
  // than kMinSplitBytes (a smaller piece costs more in hand-offs than the
  // second thread saves) and never one small enough to run inline. Copies
  // of 1 to 4 MiB on the memcpy channel's two threads moved faster cut in
  // two (docs/benchmarks/design-measurements.md, "Copy loops and plans").
  if (path.edges.size() == 1) {
    const int threads = channels[path.edges[0].channel]->caps().threads;
    const uint64_t bytes = box.volume() * fields.total_bytes();
    const auto n = static_cast<uint64_t>(std::max(threads, 1));
    if (n > 1 && bytes > config.inline_bytes && bytes >= n * kMinSplitBytes && bytes < n * target) {
      target = (bytes + n - 1) / n;
    }
  }
  // A disk hop of a pipeline moves a chunk as runs of the file's layout,
  // and a layout change elsewhere on the path cuts those runs short (a
  // 16-row transpose: 16 runs of chunk/16 bytes). Larger chunks, up to a
  // slot, keep its I/Os long; at least 8 chunks keep the hops overlapped.
  // This took DSK -> DSK transposes and AOS -> SOA into a file from below
  // their staged baselines to above them (docs/benchmarks/design-measurements.md,
  // "Disk").
  // (DSK memories are only ever a path's ends: Build refuses others.)
  // A pipeline of memcpy hops alone gets the same: each chunk costs its
  // hops hand-offs between threads, which larger chunks pay less often
  // (docs/benchmarks/design-measurements.md, "Copy loops and plans").
  const bool disk_hop = IsDisk(path.nodes.front().memory) || IsDisk(path.nodes.back().memory);
  const bool memcpy_hops = std::all_of(path.edges.begin(), path.edges.end(), [&](const auto& e) {
    return e.channel >= 0 && channels[e.channel]->caps().streams_stores;
  });
  if ((disk_hop || memcpy_hops) && path.edges.size() > 1) {
    const uint64_t bytes = box.volume() * fields.total_bytes();
    target = std::max(target, std::min(slot_limit, bytes / 8));
  }
  return GridAlong(path, box, fields, target, slot_limit);
}

// GridFor, remembering the calling thread's last grid: a thread that
// repeats one copy (the ring thread serving a client's small copies)
// skips the path's layout list and the grid's arithmetic. What a grid
// depends on besides the path, box and fields (the channels' request
// sizes and threads, the runtime's config) is constant, and a path
// belongs to one runtime's planner; the path and field list are held, so
// no other can take their address.
Result<ChunkGrid> Runtime::Impl::GridOfCopy(const std::shared_ptr<const Path>& path, const Box& box,
                                            const FieldSpace& fields) const {
  struct LastGrid {
    std::shared_ptr<const Path> path;
    Box box;
    FieldSpace fields;
    ChunkGrid grid;
  };
  thread_local LastGrid last;
  if (last.path == path && last.box == box && last.fields.SharesListWith(fields)) {
    return last.grid;
  }
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid, GridFor(*path, box, fields));
  last = {path, box, fields, grid};
  return grid;
}

// Checks a cross-node part and puts its path on `t`: hops that live
// here get this node's channels, the network hop the peer's channel, and
// hops of the other node are marked remote.
// This node's network channel to `peer`: its own, else the shared one of
// etcd's peers.
Result<int> Runtime::Impl::NetChannel(uint64_t key, const std::string& peer) const {
  int net = -1, any = -1;
  for (size_t c = 0; c < config.channels.size(); ++c) {
    const ChannelBackend* b = FindBackend(config.channels[c].kind);
    if (!b || !b->per_peer) continue;
    if (config.channels[c].peer == peer) net = static_cast<int>(c);
    if (config.channels[c].peer == kAnyPeer) any = static_cast<int>(c);
  }
  if (net < 0) net = any;
  if (net < 0) {
    return FailedPrecondition("cross-node copy ", key, ": no network channel to peer '", peer,
                              "' on this node");
  }
  return net;
}

Status Runtime::Impl::AdoptRemotePath(TransferState& t, const RemotePart& part) const {
  const Path& path = part.path;
  if (path.edges.empty() || path.nodes.size() != path.edges.size() + 1 ||
      part.net_hop >= path.edges.size()) {
    return InvalidArgument("cross-node copy ", part.key, ": malformed path");
  }
  ISO_ASSIGN_OR_RETURN(const int net, NetChannel(part.key, part.peer));
  int relay = -1;
  if (part.relays()) {
    if (part.relay_hop >= path.edges.size() || part.sending) {
      return InvalidArgument("cross-node copy ", part.key, ": malformed relay");
    }
    ISO_ASSIGN_OR_RETURN(relay, NetChannel(part.key, part.relay_peer));
  }
  // The other node planned this path: check it as untrusted input.
  // Nodes on this side of the network hop must be this node's memories,
  // those on the other side another node's.
  for (size_t i = 0; i < path.nodes.size(); ++i) {
    const MemoryId m = path.nodes[i].memory;
    const bool here = part.relays()  ? i > part.net_hop && i <= part.relay_hop
                      : part.sending ? i <= part.net_hop
                                     : i > part.net_hop;
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
  Path adopted = path;
  for (size_t h = 0; h < path.edges.size(); ++h) {
    TopologyEdge& e = adopted.edges[h];
    const bool mine = part.Mine(h);
    const bool out = h == part.relay_hop && part.relays();  // a relay's sending hop
    if (h == part.net_hop || out) {
      const bool sends = part.sending || out;
      const MemoryId here = sends ? e.src : e.dst;
      if (!IsLocal(here) || IsLocal(sends ? e.dst : e.src)) {
        return InvalidArgument("cross-node copy ", part.key, ": hop ", h,
                               " does not cross from this node to another");
      }
      e.channel = out ? relay : net;
      continue;
    }
    if (!mine) {
      e.channel = -1;
      continue;
    }
    const TopologyEdge* local = topo.FindEdge(e.src, e.dst);
    if (!IsLocal(e.src) || !local) {
      return NotFound("cross-node copy ", part.key, ": no channel here connects ",
                      MemoryName(e.src, &part), " to ", MemoryName(e.dst, &part), " (hop ", h, ")");
    }
    e.channel = local->channel;
  }
  for (size_t i = 1; i + 1 < path.nodes.size(); ++i) {
    if (IsLocal(path.nodes[i].memory) && IsDisk(path.nodes[i].memory)) {
      return FailedPrecondition("cross-node copy ", part.key,
                                " stages in a DSK memory; DSK memories are endpoints only");
    }
  }
  t.shared_path = std::make_shared<const Path>(std::move(adopted));
  return OkStatus();
}

}  // namespace isometry
