// The node: start (runtime, client pools), what peers may reach of it,
// introspection for isoctl and the gRPC API, and drain at shutdown. The
// rest lives in the files named in node_impl.h.
#include "daemon/node/node.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "channels/added_channels.h"
#include "channels/channel_factory.h"
#include "channels/host_pages.h"
#include "core/memory_limit.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/runtime/disk_endpoint.h"
#include "net/rdma/rdma_probe.h"

namespace isometry {

Node::Node(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Node::~Node() {
  // Destroying the runtime below waits for every request in flight.
  (void)Drain(std::chrono::milliseconds(0), std::chrono::hours(24 * 365));
}

void Node::Impl::MakeBudgets() {
  const DaemonConfig& dc = config.daemon;
  scratch_all =
      std::make_shared<ByteBudget>("daemon.max_watch_scratch_bytes", dc.max_watch_scratch_bytes);
  datatypes_all = std::make_shared<ByteBudget>("daemon.max_datatype_bytes", dc.max_datatype_bytes);
}

namespace {

// Pools are committed only as clients allocate, so a config whose host
// pools and staging exceed what the daemon may use (its cgroup's memory
// limit: a container's, a unit's MemoryMax=) still starts; but a client
// that fills its pool would then get the daemon killed by the kernel, with
// every session's copies. Said once at start, so the operator can size one
// or the other.
void WarnIfOverMemoryLimit(const RuntimeConfig& rc) {
  uint64_t pools = 0, staging = 0;
  for (const MemoryConfig& m : rc.memories) {
    if (!IsHostMemory(m.kind)) continue;
    pools += m.pool_bytes;
    staging += m.staging_bytes;
  }
  const uint64_t limit = MemoryLimitBytes();
  if (pools + staging <= limit) return;
  spdlog::warn(
      "memory: the host memories' client pools ({} MiB) and staging ({} MiB) exceed the {} MiB "
      "this daemon may use (its cgroup's memory limit, or the machine's memory): clients that "
      "fill the pools would get the daemon killed by the kernel; lower memory.pool or raise the "
      "limit",
      pools >> 20, staging >> 20, limit >> 20);
}

}  // namespace

Result<std::unique_ptr<Node>> Node::Create(const Config& config, const ChannelContext& context) {
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->MakeBudgets();
  {
    absl::MutexLock lock(&impl->mu);
    impl->next_cross = TransferIdBase(config.runtime.node) | kCrossTransferBit;
    // Sized for the whole history now: growing it rehashes every kept
    // record on the thread that finishes a copy.
    impl->finished.reserve(Impl::kFinishedKept + 1);
    impl->history = decltype(impl->history)(config.daemon.transfer_history);
    impl->qos = config.qos;  // the runtime gets it once made, below
  }
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
  LogChannelAvailability(ProbeChannels(context));
  // GPU memories: one FBM memory per detected GPU (gpu.auto_memories), or
  // the file's refused without a GPU (the start check saw the same).
  const GpuInventory gpus = DetectGpus();
  ISO_ASSIGN_OR_RETURN(const std::string added, ResolveGpus(rc, config.gpu, gpus));
  if (!added.empty()) {
    spdlog::info("GPU memories: added {}", added);
  } else if (gpus.memory_bytes.empty()) {
    spdlog::info("GPU memories: none ({})", gpus.why_none);
  }
  impl->config.runtime.memories = rc.memories;
  impl->config.runtime.channels = rc.channels;
  WarnIfOverMemoryLimit(rc);
  // enable = "on" without a usable device fails here (and in the start
  // check before it); otherwise the log says whether RDMA is used and why.
  ISO_ASSIGN_OR_RETURN(impl->rdma, rdma::ChooseRdma(rdma::CachedRdmaProbe(), config.rdma));
  spdlog::info("RDMA for network hops: {}: {}", impl->rdma.use ? "used" : "not used",
               impl->rdma.why);
  ChannelMaker maker = [context](const ChannelConfig& c) { return MakeChannel(c, context); };
  ISO_ASSIGN_OR_RETURN(impl->runtime, Runtime::Create(rc, maker));
  impl->runtime->SetQos(config.qos);
  bool pools_huge = false;  // a probe allocation got 2 MiB pages
  for (size_t i = 0; i < rc.memories.size(); ++i) {
    const MemoryConfig& m = rc.memories[i];
    auto p = std::make_shared<PoolAccount>();
    p->memory = i;
    p->name = m.name;
    p->capacity = m.pool_bytes;
    p->quota = m.client_quota ? m.client_quota : m.pool_bytes;
    p->hugetlb = m.hugetlb;
    impl->pools.push_back(p);
    if (p->capacity == 0) continue;
    if (m.kind == MemoryKind::kZcm && !gpus.memory_bytes.empty()) {
      if (Result<std::shared_ptr<GpuMemory>> g = MakeGpuMemory(); g.ok()) p->gpu = *std::move(g);
      spdlog::info("memory '{}': client allocations {}", m.name,
                   p->gpu ? "pinned and mapped for the GPUs (ZCM)" : "not pinned");
    }
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
    if (probe->huge_bytes() > 0) pools_huge = true;
    spdlog::info(
        "memory '{}': client pool of {} MiB; allocations are populated when made "
        "({} MiB in {:.1f} ms, {:.0f} ms per GiB{})",
        m.name, p->capacity >> 20, probe_bytes >> 20, ms,
        ms * static_cast<double>(1ull << 30) / static_cast<double>(probe_bytes),
        probe->used_hugetlb()     ? ", hugetlb"
        : probe->huge_bytes() > 0 ? ", 2 MiB pages"
                                  : ", 4 KiB pages");
  }
  // Pool pages size every O_DIRECT or socket request from client memory:
  // one segment per page. Say so once when nothing gives large pages.
  const bool any_hugetlb =
      std::any_of(config.runtime.memories.begin(), config.runtime.memories.end(),
                  [](const MemoryConfig& m) { return m.hugetlb; });
  if (!any_hugetlb && !pools_huge && ShmemHugePageMode() == "never") {
    spdlog::info(
        "client pools use 4 KiB pages (transparent_hugepage/shmem_enabled is 'never'); "
        "disk paths from pool memory run faster with 'advise' or with memory.hugetlb "
        "(docs/operations/tuning.md)");
  }
  {
    absl::MutexLock lock(&impl->mu);  // not shared yet; the analysis wants it
    impl->samples.push_back({NodeClock::now(), std::vector<uint64_t>(rc.channels.size(), 0)});
    impl->current_bps.assign(rc.channels.size(), 0);
    impl->peak_bps.assign(rc.channels.size(), 0);
  }
  return std::unique_ptr<Node>(new Node(std::move(impl)));
}

const Config& Node::config() const { return impl_->config; }

const rdma::RdmaChoice& node::Introspection::rdma() const { return impl_->rdma; }

void Node::SetCrossCopier(CrossCopier* copier) { impl_->cross = copier; }

Runtime& Node::runtime() { return *impl_->runtime; }

node::Sessions& Node::sessions() const { return impl_->services.sessions; }
node::Pools& Node::pools() const { return impl_->services.pools; }
node::Instances& Node::instances() const { return impl_->services.instances; }
node::Distributed& Node::distributed() const { return impl_->services.distributed; }
node::Watches& Node::watches() const { return impl_->services.watches; }
node::Copies& Node::copies() const { return impl_->services.copies; }
node::TrafficClasses& Node::traffic_classes() const { return impl_->services.traffic_classes; }
node::Introspection& Node::introspection() const { return impl_->services.introspection; }

Result<CrossEnd> node::Copies::ResolveForPeer(const InstanceSpec& spec,
                                              std::shared_ptr<const EndForm> end_form,
                                              const PeerAccess* access) const {
  const InstanceShape shape = end_form ? StreamShape(end_form->bytes) : spec.shape;
  ISO_RETURN_IF_ERROR(shape.Validate("instance"));
  const uint64_t total = StorageBytes(shape, end_form.get());
  ISO_RETURN_IF_ERROR(CheckInstanceEnd(spec.offset, total));
  if (!spec.distributed.empty()) return impl_->ResolveRankForPeer(spec, std::move(end_form));
  CrossEnd end;
  if (!spec.file.empty()) {
    ISO_ASSIGN_OR_RETURN(MemoryId m, impl_->runtime->FindMemory(spec.memory));
    if (impl_->runtime->topology().FindMemory(m)->kind != MemoryKind::kDsk) {
      return InvalidArgument("memory '", spec.memory, "' is not a DSK memory");
    }
    ISO_RETURN_IF_ERROR(CheckRelativePath(spec.file));
    end.local = InstanceRef{m, nullptr, 0, shape};
    end.local.file = spec.file;
    end.local.file_offset = spec.offset;
    end.local.form = std::move(end_form);
    return end;
  }
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->allocations.find(spec.allocation);
  if (it == impl_->allocations.end() || !it->second->published) {
    return PermissionDenied(
        "allocation ", spec.allocation, " of node '", impl_->config.cluster.node_name,
        "' does not exist or is not published (peers reach published allocations only)");
  }
  const auto& a = it->second;
  if (spec.offset > a->shm.size() || total > a->shm.size() - spec.offset) {
    return OutOfRange("instance of ", total, " bytes at offset ", spec.offset,
                      " does not fit allocation ", spec.allocation, " of ", a->shm.size(),
                      " bytes on node '", impl_->config.cluster.node_name, "'");
  }
  const MemoryId mem = impl_->runtime->topology().memories[a->pool->memory].id;
  end.local = InstanceRef{mem, a->shm.data() + spec.offset, a->shm.size() - spec.offset, shape};
  end.local.form = std::move(end_form);
  end.keep = a;
  if (a->watch) {
    // Active Access: an access from another node acts as a local one.
    if (!access) {
      return FailedPrecondition("allocation ", spec.allocation, " of node '",
                                impl_->config.cluster.node_name,
                                "' has watched regions: only a copy's half reaches it");
    }
    const AccessSource source{access->source.session, access->node, access->source.transfer};
    ISO_ASSIGN_OR_RETURN(
        end.active,
        PrepareActiveEnd(a->watch, access->sending ? active::Op::kGet : active::Op::kPut, end.local,
                         spec.offset, access->box, source, {impl_->scratch_all}));
  }
  return end;
}

// ---- introspection ----

std::vector<MemoryReport> node::Introspection::ListMemories() const {
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

std::vector<ChannelReport> node::Introspection::ListChannels() const {
  const std::vector<ChannelStats> stats = impl_->runtime->Channels();
  const Topology& topo = impl_->runtime->topology();
  // A network channel's edges join two nodes' graphs: the cluster layer
  // knows them (not under mu: it takes its own lock).
  std::map<std::string, std::vector<std::string>> link_edges;
  if (impl_->cross) {
    for (const ChannelConfig& c : impl_->config.runtime.channels) {
      if (!c.peer.empty()) link_edges[c.peer] = impl_->cross->LinkEdges(c.peer);
    }
  }
  absl::MutexLock lock(&impl_->mu);
  std::vector<ChannelReport> out;
  for (size_t c = 0; c < stats.size(); ++c) {
    ChannelReport r;
    r.stats = stats[c];
    r.config = impl_->config.runtime.channels[c];
    if (!r.config.peer.empty()) {
      r.edges = link_edges[r.config.peer];
      r.limits = NetworkLimits(impl_->config.cluster);
    }
    for (const TopologyEdge& e : topo.edges) {
      if (e.channel == static_cast<int>(c) && r.config.peer.empty()) {
        r.edges.push_back(topo.FindMemory(e.src)->name + "->" + topo.FindMemory(e.dst)->name);
      }
    }
    r.current_bytes_per_s = impl_->current_bps[c];
    r.peak_bytes_per_s = impl_->peak_bps[c];
    out.push_back(r);
  }
  return out;
}

void node::Introspection::SampleThroughput() {
  const std::vector<ChannelStats> stats = impl_->runtime->Channels();
  absl::MutexLock lock(&impl_->mu);
  const auto now = NodeClock::now();
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

Result<PlanReport> node::Copies::Explain(const std::string& src_memory, const Layout& src_layout,
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
    PlanHopReport hop = ReportHop(path, h, topo);
    hop.request_bytes = ex.chunk_bytes;
    hop.buffer_bytes = h < ex.buffer_bytes.size() ? ex.buffer_bytes[h] : 0;
    rep.hops.push_back(hop);
  }
  ReportAlternatives(ex.alternatives, topo, rep);
  return rep;
}

Result<Calibration> node::Introspection::Calibrate() { return impl_->runtime->Recalibrate(); }

NodeStatus node::Introspection::GetStatus() const {
  NodeStatus s;
  s.runtime = impl_->runtime->Stats();
  if (impl_->cross) s.forms = impl_->cross->FormStats();  // not under mu: it locks its own
  const uint64_t remote_halves = impl_->RunningRemoteHalves();
  absl::MutexLock lock(&impl_->mu);
  s.node = impl_->config.runtime.node;
  s.rdma = StrCat(impl_->rdma.use ? "used: " : "not used: ", impl_->rdma.why);
  s.uptime_s = std::chrono::duration<double>(NodeClock::now() - impl_->started).count();
  s.sessions = static_cast<uint32_t>(impl_->sessions.size());
  // Halves of other nodes' copies count: the runtime counts their ends.
  s.transfers_active = impl_->active.size() + remote_halves;
  s.allocations = impl_->allocations.size();
  s.instances = impl_->instances.size();
  for (const auto& [id, session] : impl_->sessions) s.datatypes += session->datatypes.size();
  s.datatype_translations = impl_->translations;
  s.datatype_translations_memoized = impl_->translations_memoized;
  const OwnHopsTotals& h = *impl_->own_hops_totals;
  s.own_hops = {h.windows.load(), h.runs.load(),     h.fallbacks.load(),
                h.bogus.load(),   h.timeouts.load(), h.not_lent.load()};
  s.direct_reads = {impl_->leases.load(), impl_->leases_revoked.load(),
                    impl_->leases_refused.load()};
  s.ended = impl_->ended_metrics.Snapshot();
  for (const auto& [id, a] : impl_->allocations) {
    if (!a->watch) continue;
    ++s.watched_allocations;
    s.watched_regions += a->watch->Report().regions.size();
  }
  return s;
}

Node::DrainOutcome Node::Drain(std::chrono::milliseconds grace,
                               std::chrono::milliseconds cancel_bound) {
  Impl& n = *impl_;
  auto idle = [&n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(n.mu) { return n.active.empty(); };
  auto wait_idle = [&](std::chrono::milliseconds bound) ABSL_EXCLUSIVE_LOCKS_REQUIRED(n.mu) {
    const absl::Time deadline = absl::Now() + absl::FromChrono(bound);
    while (!idle()) {
      if (n.idle_cv.WaitWithDeadline(&n.mu, deadline)) break;
    }
    return idle();
  };
  DrainOutcome outcome;
  std::vector<Transfer> left;
  std::vector<std::shared_ptr<CrossTransfer>> cross;
  {
    absl::MutexLock lock(&n.mu);
    n.draining = true;
    if (wait_idle(grace)) return outcome;
    for (auto& [id, r] : n.active) {
      if (r->handle) left.push_back(*r->handle);
      if (r->cross) cross.push_back(r->cross);
    }
    outcome.cancelled = n.active.size();
  }
  spdlog::warn("shutdown: cancelling {} transfer(s) still running after {} ms", outcome.cancelled,
               grace.count());
  for (Transfer& t : left) t.Cancel();
  for (auto& c : cross) c->Cancel();
  absl::MutexLock lock(&n.mu);
  if (!wait_idle(cancel_bound)) {
    outcome.stuck = n.active.size();
    spdlog::error("shutdown: {} transfer(s) did not end within {} ms of being cancelled",
                  outcome.stuck, cancel_bound.count());
  }
  return outcome;
}

}  // namespace isometry
