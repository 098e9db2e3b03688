// The runtime's public face: Runtime (start, copy, plan, introspection,
// stop) and Transfer handles. The work itself is in the files named in
// runtime_impl.h.
#include "daemon/runtime/runtime.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <thread>

#include "channels/channel_edges.h"
#include "channels/channel_factory.h"
#include "channels/host_pages.h"
#include "core/thread_name.h"
#include "core/thread_slice.h"
#include "daemon/runtime/local_topology.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {

using Phase = TransferState::Phase;

// ---- Runtime ----

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->self = this; }

namespace {

// A cma channel serves clients' registered process memory, which no
// [[memory]] names: the runtime adds one PROCESS memory for all of it
// (no staging: it is only ever a path's end) and edges between it and
// every host memory, both ways.
Status AddProcessMemory(RuntimeConfig& config) {
  if (!ReachesProcessMemory(config)) return OkStatus();
  for (const MemoryConfig& m : config.memories) {
    if (m.name == kProcessMemoryName) {
      return InvalidArgument("config: memory name '", kProcessMemoryName,
                             "' is reserved for clients' process memory (a cma channel)");
    }
  }
  MemoryConfig proc;
  proc.name = std::string(kProcessMemoryName);
  proc.kind = MemoryKind::kProcess;
  proc.staging_bytes = 0;
  config.memories.push_back(std::move(proc));
  return OkStatus();
}

// FBM staging needs the GPUs' memory; ZCM staging is pinned for them
// where they exist, and plain host memory (with a log line) where not.
Result<std::shared_ptr<GpuMemory>> OpenGpuMemory(const RuntimeConfig& config) {
  bool fbm = false, zcm = false;
  for (const MemoryConfig& m : config.memories) {
    fbm |= m.kind == MemoryKind::kFbm;
    zcm |= m.kind == MemoryKind::kZcm;
  }
  if (!fbm && !zcm) return std::shared_ptr<GpuMemory>();
  Result<std::shared_ptr<GpuMemory>> gpu = MakeGpuMemory();
  if (gpu.ok()) return gpu;
  if (fbm) {
    return FailedPrecondition("config: FBM memories need a GPU: ", gpu.status().message());
  }
  spdlog::info("ZCM memories are plain host memory (not pinned): {}",
               std::string(gpu.status().message()));
  return std::shared_ptr<GpuMemory>();
}

StagingBacking StagingFor(GpuMemory* gpu, const MemoryConfig& m) {
  if (m.kind == MemoryKind::kFbm) return {gpu, m.device};
  if (m.kind == MemoryKind::kZcm) return {gpu, -1};
  return {};
}

}  // namespace

Result<std::unique_ptr<Runtime>> Runtime::Create(const RuntimeConfig& config_in, ChannelMaker maker,
                                                 std::shared_ptr<GpuMemory> gpu) {
  ISO_RETURN_IF_ERROR(config_in.Validate());
  ISO_RETURN_IF_ERROR(CheckChannelKinds(config_in));
  RuntimeConfig config = config_in;
  ISO_RETURN_IF_ERROR(AddProcessMemory(config));
  if (!maker) maker = [](const ChannelConfig& c) { return MakeChannel(c); };
  auto impl = std::make_unique<Impl>(config);
  if (gpu) {
    impl->gpu = std::move(gpu);
  } else {
    ISO_ASSIGN_OR_RETURN(impl->gpu, OpenGpuMemory(config));
  }
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
    {
      absl::MutexLock lock(&impl->mu);  // not shared yet; the analysis wants it
      impl->pools.emplace_back(id, m.staging_bytes, m.name, StagingFor(impl->gpu.get(), m));
    }
  }
  impl->topo = LocalTopology(config);
  bool thp_warned = false;
  for (size_t c = 0; c < config.channels.size(); ++c) {
    const ChannelConfig& cc = config.channels[c];
    ISO_ASSIGN_OR_RETURN(std::unique_ptr<Channel> ch, maker(cc));
    spdlog::info(
        "channel '{}' ({}): {} thread(s), {} request(s) in flight, requests of {} bytes{}", cc.name,
        ChannelKindName(cc.kind), cc.threads, ch->caps().max_in_flight, cc.request_bytes,
        cc.rate_limit_bytes_per_s ? StrCat(", capped at ", cc.rate_limit_bytes_per_s, " bytes/s")
                                  : std::string());
    // What the channel chose at run time (a disk channel's ring,
    // registrations, staging and its page size: what an operator checks
    // when a disk path is slower than fio).
    const ChannelBackend* backend = FindBackend(cc.kind);
    if (const std::string d = backend && backend->describe ? backend->describe(*ch) : "";
        !d.empty()) {
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
  absl::MutexLock lock(&p->mu);  // no worker runs yet; the analysis wants it
  for (size_t c = 0; c < p->channels.size(); ++c) {
    auto w = std::make_unique<DmaWorker>();
    w->channel = c;
    w->max_in_flight = p->channels[c]->caps().max_in_flight;
    w->express_lane = p->channels[c]->caps().express;
    p->workers.push_back(std::move(w));
  }
  p->InstallQos(QosTable::Make(QosConfig{}, p->ChannelKinds(), nullptr));
  for (auto& w : p->workers) {
    DmaWorker* wp = w.get();
    wp->thread = std::thread([p, wp, name = StrCat("dma:", p->channels[wp->channel]->caps().name)] {
      NameThisThread(name);
      RequestShortSlice();
      p->WorkerLoop(*wp);
    });
  }
  return rt;
}

Runtime::~Runtime() {
  std::vector<Completion> done;
  {
    absl::MutexLock lock(&impl_->mu);
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
  std::vector<DmaWorker*> workers;
  {
    absl::MutexLock lock(&impl_->mu);
    while (!impl_->active.empty()) impl_->drained_cv.Wait(&impl_->mu);
    impl_->NotifyWorkers();
    for (auto& w : impl_->workers) workers.push_back(w.get());
  }
  // The workers see `stopping` and an empty pool and return; the vector of
  // workers itself is no longer changed by anyone.
  for (DmaWorker* w : workers) w->thread.join();
  impl_->channels.clear();
}

Result<MemoryId> Runtime::FindMemory(std::string_view name) const {
  for (const TopologyMemory& m : impl_->topo.memories) {
    if (m.name == name) return m.id;
  }
  return NotFound("no memory named '", name, "'");
}

Result<std::shared_ptr<DiskMemory>> Runtime::FindDisk(std::string_view name) const {
  ISO_ASSIGN_OR_RETURN(MemoryId id, FindMemory(name));
  const std::shared_ptr<DiskMemory>& d = impl_->DiskOf(id);
  if (!d) return InvalidArgument("memory '", name, "' is not a DSK memory");
  return d;
}

Result<Transfer> Runtime::Copy(CopyRequest&& request) {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<TransferState> t, impl_->Build(request));
  Completion c;
  bool run_inline = false;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->stopping) return Unavailable("runtime is shutting down");
    t->id = impl_->next_id++;
    t->qos = impl_->qos->Find(request.qos_class);
    t->qos_name = impl_->qos->classes[t->qos].name;
    if (request.clamp_priority) {
      t->options.priority =
          std::min<int>(t->options.priority, impl_->qos->classes[t->qos].max_priority);
    }
    t->times.submitted = RuntimeClock::now();
    ++impl_->stats.transfers_submitted;
    if (t->grid->count() == 0) {
      impl_->active[t->id] = t;
      c = impl_->Finish(t, OkStatus());
    } else {
      // A class capped on the channel is paced by its DMA worker.
      run_inline = impl_->RunsInline(*t) &&
                   !impl_->qos->classes[t->qos].per_channel[t->xds[0]->channel].capped();
      if (!run_inline) {
        // A small one-hop copy goes from this thread when its worker would
        // pick it next (IssueAtOnce); admitted later, it goes as any other.
        const bool at_once = impl_->IssuesAtOnce(*t);
        impl_->issued_by_submitter = at_once ? t.get() : nullptr;
        impl_->Enqueue(t);
        impl_->issued_by_submitter = nullptr;
        if (at_once && impl_->active.count(t->id)) impl_->IssueAtOnce(*t);
      }
    }
  }
  if (run_inline) c = impl_->RunInline(t);
  c.Run();
  return Transfer(t);
}

Result<Path> Runtime::Plan(const InstanceRef& src, const InstanceRef& dst, bool durable) const {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const Path> path,
                       impl_->MakePath(src, dst, src.shape.bounds, {}));
  if (!durable) {
    if (std::optional<Path> p = impl_->Unsynced(*path, src.shape.bounds, src.shape.fields)) {
      return *std::move(p);
    }
  }
  return *path;
}

int CrossNodeSlots(const RuntimeConfig& config) { return std::max(config.slots_per_buffer, 4); }

int CrossNodeSlotsFor(const RuntimeConfig& config, uint64_t slot_limit) {
  const uint64_t fit = config.space_threshold / std::max<uint64_t>(slot_limit, 1);
  return static_cast<int>(
      std::clamp<uint64_t>(fit, 1, static_cast<uint64_t>(CrossNodeSlots(config))));
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
  CopyRequest req;
  req.src = src;
  req.dst = dst;
  ISO_RETURN_IF_ERROR(impl_->MatchEnds(req));  // form ends: the stream's shape
  const InstanceShape& shape = req.src.shape;
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const Path> planned,
                       impl_->MakePath(req.src, req.dst, shape.bounds, {}));
  Path path = *planned;
  CostEnds(path, req.src.form.get(), req.dst.form.get(), impl_->topo);
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid, impl_->GridFor(path, shape.bounds, shape.fields));
  AlternativesRequest weigh;
  weigh.chosen = &path;
  weigh.bounds = shape.bounds;
  weigh.field_bytes = shape.fields.total_bytes();
  weigh.element_bytes = shape.fields.smallest_bytes();
  weigh.adjust = [&](Path& p) { CostEnds(p, req.src.form.get(), req.dst.form.get(), impl_->topo); };
  Alternatives alternatives = WeighAlternatives(*impl_->CurrentPlanner(), weigh);
  const int slots = impl_->SlotsFor(path);
  PlanExplanation e = ExplainGrid(std::move(path), grid, shape.fields.total_bytes(), slots);
  e.alternatives = std::move(alternatives);
  return e;
}

Alternatives Runtime::Weigh(const Path& chosen, const PlanInputs& inputs) const {
  if (inputs.remote) {
    Alternatives only;
    only.paths.push_back({chosen, true,
                          "one node's part of a cross-node copy: the node that started it "
                          "planned the whole path"});
    return only;
  }
  const std::shared_ptr<Planner> planner = impl_->CurrentPlanner();
  // The path's own figures, as the alternatives' are read: without a
  // datatype's forms, and with unsynced disk writes for a copy that asked.
  Path plain = chosen;
  if (inputs.datatype || !inputs.durable) {
    Result<Path> p = planner->Evaluate(chosen, inputs.box, inputs.entry_bytes, inputs.element_bytes,
                                       inputs.durable);
    if (p.ok()) plain = *std::move(p);
  }
  AlternativesRequest weigh;
  weigh.chosen = &plain;
  weigh.bounds = inputs.box;
  weigh.field_bytes = inputs.entry_bytes;
  weigh.element_bytes = inputs.element_bytes;
  weigh.durable = inputs.durable;
  return WeighAlternatives(*planner, weigh);
}

Result<Calibration> Runtime::Recalibrate() {
  absl::MutexLock lock(&impl_->calibrate_mu);
  ISO_ASSIGN_OR_RETURN(Calibration cal, impl_->LoadOrMeasure(/*force=*/true));
  ISO_RETURN_IF_ERROR(impl_->ApplyCalibration(cal));
  return cal;
}

std::vector<MemoryUsage> Runtime::Memories() const {
  absl::MutexLock lock(&impl_->mu);
  std::vector<MemoryUsage> out;
  for (size_t i = 0; i < impl_->pools.size(); ++i) {
    const StagingPool& p = impl_->pools[i];
    const TopologyMemory& m = impl_->topo.memories[i];
    out.push_back({m.name, m.id, m.kind, p.budget(), p.used(), p.peak(), p.largest(), p.cached()});
  }
  return out;
}

std::vector<ChannelStats> Runtime::Channels() const {
  absl::MutexLock lock(&impl_->mu);
  std::vector<ChannelStats> out;
  for (auto& w : impl_->workers) {
    ChannelStats s;
    s.name = impl_->channels[w->channel]->caps().name;
    for (const XdState* x : w->pool) {
      if (x->done_count < x->transfer->grid->count()) ++s.xds_queued;
    }
    s.requests_in_flight = w->in_flight + w->elsewhere + w->express_in_flight;
    s.requests_done = w->requests_done;
    s.bytes_done = w->bytes_done;
    s.errors = w->errors;
    s.dispatch_seq = w->dispatch_seq;
    s.threads_or_slots = w->max_in_flight;
    for (const XdState* x : w->pool) {
      if (x->done_count >= x->transfer->grid->count()) continue;
      const int p = x->transfer->options.priority;
      if (s.queued_by_priority.empty() || s.queued_by_priority.back().first != p) {
        s.queued_by_priority.emplace_back(p, 0);
      }
      ++s.queued_by_priority.back().second;
    }
    for (const auto& [priority, wait] : w->waits) {
      s.queue_wait.emplace_back(priority, wait->Counts());
    }
    out.push_back(s);
  }
  return out;
}

RuntimeStats Runtime::Stats() const {
  RuntimeStats s;
  {
    absl::MutexLock lock(&impl_->mu);
    s = impl_->stats;
    s.ring_epochs_timed = impl_->ring_stores.epochs_timed();
    s.ring_store_switches = impl_->ring_stores.switches();
    s.transfers_waiting = impl_->waiting.size();
    s.transfers_running = impl_->active.size();
  }
  const ProgramCache& layouts = impl_->compiler.layouts();
  s.program_cache_hits = layouts.hits();
  s.program_cache_misses = layouts.misses();
  s.program_cache_bytes = layouts.bytes();
  s.program_cache_entries = layouts.size();
  const FormProgramCache& forms = impl_->compiler.forms();
  s.form_cache_hits = forms.hits();
  s.form_cache_misses = forms.misses();
  s.form_cache_entries = forms.size();
  s.form_cache_bytes = forms.bytes();
  absl::MutexLock lock(&impl_->planner_stats_mu);
  const PlannerStats p = impl_->CurrentPlanner()->stats();
  const PlannerStats r = impl_->retired_planners;
  s.plan_cache_hits = p.cache_hits;
  s.plan_cache_misses = p.cache_misses;
  s.plan_cache_entries = p.cache_entries;
  s.plan_cache_bytes = p.cache_bytes;
  s.plans_simple = p.simple_plans;
  s.plans_full = p.full_plans;
  s.plan_cache_hits_since_start = r.cache_hits + p.cache_hits;
  s.plan_cache_misses_since_start = r.cache_misses + p.cache_misses;
  s.plans_simple_since_start = r.simple_plans + p.simple_plans;
  s.plans_full_since_start = r.full_plans + p.full_plans;
  return s;
}

const Topology& Runtime::topology() const { return impl_->topo; }
const RuntimeConfig& Runtime::config() const { return impl_->config; }

// ---- Transfer ----

uint64_t Transfer::id() const { return state_->id; }

Status Transfer::Wait() const {
  absl::MutexLock lock(&state_->done_mu);
  while (!state_->finished) state_->done_cv.Wait(&state_->done_mu);
  return state_->status;
}

std::optional<Status> Transfer::WaitFor(std::chrono::milliseconds timeout) const {
  const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
  absl::MutexLock lock(&state_->done_mu);
  while (!state_->finished) {
    if (state_->done_cv.WaitWithDeadline(&state_->done_mu, deadline)) break;
  }
  if (!state_->finished) return std::nullopt;
  return state_->status;
}

std::optional<Status> Transfer::Poll() const {
  absl::MutexLock lock(&state_->done_mu);
  if (!state_->finished) return std::nullopt;
  return state_->status;
}

void Transfer::Cancel() const { state_->runtime->impl_->Cancel(state_); }

void Transfer::Abort(Status why) const { state_->runtime->impl_->AbortNow(state_, std::move(why)); }

TransferTimes Transfer::times() const {
  {
    absl::MutexLock lock(&state_->done_mu);
    if (state_->finished) return state_->final_times;
  }
  // Never holds done_mu while taking the runtime lock (Finish nests them the
  // other way round).
  absl::MutexLock lock(&state_->runtime->impl_->mu);
  return state_->times;
}

const Path& Transfer::path() const { return state_->path(); }

std::vector<uint64_t> Transfer::HopsDone() const {
  absl::MutexLock lock(&state_->runtime->impl_->mu);
  std::vector<uint64_t> done;
  for (const auto& x : state_->xds) done.push_back(x->done_count);
  return done;
}

uint64_t Transfer::chunks() const { return state_->grid->count(); }

TransferSummary Transfer::Summary() const {
  TransferSummary s;
  s.priority = priority();
  s.qos_class = state_->qos_name;
  s.bytes = bytes();
  s.chunks = state_->grid ? state_->grid->count() : 0;
  bool ended = false;
  {
    absl::MutexLock lock(&state_->done_mu);
    ended = state_->finished;
    if (ended) s.times = state_->final_times;
  }
  if (ended) {
    // Final: Finish counted every hop's chunks under the runtime lock before
    // it set `finished` under done_mu, and nothing counts them after. One
    // lock for an ended copy's summary, not two.
    for (const auto& x : state_->xds) s.hops_done.push_back(x->done_count);
  } else {
    s.times = times();
    const std::vector<uint64_t> done = HopsDone();
    s.hops_done.assign(done.begin(), done.end());
  }
  s.path = state_->shared_path;
  s.predicted_bps = state_->predicted_bps;
  s.inputs.box = state_->box;
  s.inputs.entry_bytes = state_->src.shape.fields.total_bytes();
  s.inputs.element_bytes = state_->src.shape.fields.smallest_bytes();
  s.inputs.durable = state_->options.durable;
  s.inputs.datatype = state_->src.form != nullptr;
  s.inputs.remote = state_->remote.has_value();
  return s;
}

int Transfer::priority() const { return state_->options.priority; }
uint64_t Transfer::bytes() const {
  return state_->box.volume() * state_->src.shape.fields.total_bytes();
}

}  // namespace isometry
