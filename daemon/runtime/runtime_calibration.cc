// Runtime::Impl, calibration (Isometry §4.1): measuring every channel's
// throughput function, keeping the figures, and planning with them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "channels/calibrate.h"
#include "channels/channel_factory.h"
#include "daemon/runtime/calibration_store.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {

// Calibration measures the eight-field curve up to the run the planner
// reads it for.
static_assert(kCalibrationFields8MaxRun == kFields8MaxRun);

namespace {
// Every planner any runtime of this process has made, counted: a thread's
// kept planner (PlannerOfThread) never matches another runtime's number.
std::atomic<uint64_t> planner_generations{0};
}  // namespace

// Measures every channel (budget shared evenly), or reuses the file. How
// a channel is measured is its kind's (ChannelBackend::calibrate).
Result<Calibration> Runtime::Impl::LoadOrMeasure(bool force) {
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
  // The budget is shared by the channels that spend it (models and
  // channels nobody measures take none).
  std::vector<CalibrationSite> sites;
  int timed = 0;
  for (size_t c = 0; c < channels.size(); ++c) {
    sites.push_back(SiteOf(static_cast<int>(c)));
    const ChannelBackend* b = FindBackend(channels[c]->caps().kind);
    if (b && b->calibrate && b->spends_budget && b->spends_budget(sites.back())) ++timed;
  }
  const auto budget = std::chrono::milliseconds(config.calibration_budget_ms) / std::max(timed, 1);
  for (size_t c = 0; c < channels.size(); ++c) {
    Channel& ch = *channels[c];
    const ChannelBackend* b = FindBackend(ch.caps().kind);
    if (!b || !b->calibrate) continue;
    ISO_RETURN_IF_ERROR(b->calibrate(ch, sites[c], budget, cal));
  }
  if (!config.calibration_file.empty()) {
    Status s = SaveCalibration(config.calibration_file, fp, cal);
    if (!s.ok()) spdlog::warn("calibration: not kept: {}", s.ToString());
  }
  return cal;
}

// Where channel `c` sits, from the local memories its edges reach: the
// first DSK directory, the device of the first FBM memory, and which kinds
// of host memory (pinned ZCM; pageable SYS or REG).
CalibrationSite Runtime::Impl::SiteOf(int c) const {
  CalibrationSite site;
  site.config = &config;
  site.gpu = gpu.get();
  for (const TopologyEdge& e : topo.edges) {
    if (e.channel != c) continue;
    for (const MemoryId id : {e.src, e.dst}) {
      if (!IsLocal(id) || id.memory >= config.memories.size()) continue;
      const MemoryConfig& m = config.memories[id.memory];
      if (m.kind == MemoryKind::kDsk && site.disk_directory.empty()) {
        site.disk_directory = m.directory;
      }
      if (m.kind == MemoryKind::kFbm && site.gpu_device < 0) site.gpu_device = m.device;
      site.pinned_host |= m.kind == MemoryKind::kZcm;
      site.pageable_host |= m.kind == MemoryKind::kSys || m.kind == MemoryKind::kReg;
    }
  }
  return site;
}

// Puts measured throughput functions on the graph's edges and starts a
// fresh planner (its cache would describe the old figures).
Status Runtime::Impl::ApplyCalibration(const Calibration& cal) {
  auto curve = [&](const std::string& name) -> Result<std::optional<ThroughputFunction>> {
    auto it = cal.find(name);
    if (it == cal.end()) return std::optional<ThroughputFunction>();
    std::vector<ThroughputSample> samples;
    for (const RateSample& s : it->second) samples.push_back({s.request_bytes, s.bytes_per_s});
    ISO_ASSIGN_OR_RETURN(ThroughputFunction f, ThroughputFunction::FromSamples(std::move(samples)));
    return std::optional<ThroughputFunction>(std::move(f));
  };
  for (TopologyEdge& e : topo.edges) {
    const ChannelBackend* b = FindBackend(e.kind);
    // An edge may read a curve of its own (a GPU edge: its kind of host end).
    std::string name = e.channel_name;
    if (b && b->curve_of && IsLocal(e.src) && IsLocal(e.dst) &&
        e.src.memory < config.memories.size() && e.dst.memory < config.memories.size()) {
      name =
          b->curve_of(name, config.memories[e.src.memory].kind, config.memories[e.dst.memory].kind);
    }
    ISO_ASSIGN_OR_RETURN(std::optional<ThroughputFunction> tp, curve(name));
    if (!tp) continue;
    e.tp = *std::move(tp);
    // Absent from files written before they were measured.
    ISO_ASSIGN_OR_RETURN(std::optional<ThroughputFunction> plain, curve(ContiguousCurve(name)));
    if (plain || !(b && b->keeps_plain_model)) e.tp_contiguous = std::move(plain);
    ISO_ASSIGN_OR_RETURN(e.tp_fields8, curve(Fields8Curve(e.channel_name)));
    ISO_ASSIGN_OR_RETURN(e.tp_unsynced, curve(UnsyncedCurve(e.channel_name)));
  }
  if (auto it = cal.find(kNodeCopyCurve); it != cal.end() && !it->second.empty()) {
    const double node_bps = it->second.front().bytes_per_s;
    for (TopologyEdge& e : topo.edges) {
      if (e.traits.shares_node_memory && IsLocal(e.src) && IsLocal(e.dst)) {
        e.node_copy_bps = node_bps;
      }
    }
    spdlog::info("calibration: every core copying at once moves {:.2f} GB/s", node_bps / 1e9);
  }
  if (auto it = cal.find(kNodePipeCurve); it != cal.end() && !it->second.empty()) {
    const RateSample pipe = it->second.front();
    auto st = cal.find(kNodePipeStreamedCurve);
    const double streamed_bps =
        st != cal.end() && !st->second.empty() ? st->second.front().bytes_per_s : 0;
    // Where the cores share no cache to hand the ring over in, streaming
    // stores into the ring make a two-hop copy faster
    // (docs/benchmarks/design-measurements.md, "Copy loops and plans");
    // where they share one, cached ones keep the ring there for the next hop.
    const bool streams = streamed_bps > pipe.bytes_per_s;
    {
      absl::MutexLock lock(&mu);
      ring_stores.Restart(streams);
    }
    for (TopologyEdge& e : topo.edges) {
      if (e.traits.shares_node_memory && IsLocal(e.src) && IsLocal(e.dst)) {
        e.node_pipe_bps = std::max(pipe.bytes_per_s, streamed_bps);
      }
    }
    spdlog::info(
        "calibration: two memcpy hops pipelined through a ring of {} KiB slots move {:.2f} GB/s "
        "writing the ring with cached stores, {:.2f} with streaming ones: rings are written with "
        "{} stores first",
        pipe.request_bytes >> 10, pipe.bytes_per_s / 1e9, streamed_bps / 1e9,
        streams ? "streaming" : "cached");
  }
  for (const auto& [name, samples] : cal) {
    if (name == kNodeCopyCurve || name == kNodePipeCurve || name == kNodePipeStreamedCurve) {
      continue;
    }
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

void Runtime::Impl::MakePlanner() {
  PlannerOptions o;
  o.full_threshold = config.full_planner_threshold;
  o.space_threshold = config.space_threshold;
  o.cache_capacity = config.plan_cache_entries;
  absl::MutexLock lock(&planner_stats_mu);
  if (const std::shared_ptr<Planner> old = CurrentPlanner()) {
    const PlannerStats s = old->stats();
    retired_planners.cache_hits += s.cache_hits;
    retired_planners.cache_misses += s.cache_misses;
    retired_planners.simple_plans += s.simple_plans;
    retired_planners.full_plans += s.full_plans;
  }
  std::atomic_store(&planner, std::make_shared<Planner>(topo, o));
  planner_generation.store(planner_generations.fetch_add(1) + 1, std::memory_order_release);
}

Planner& Runtime::Impl::PlannerOfThread() const {
  struct Held {
    uint64_t generation = 0;
    std::shared_ptr<Planner> planner;
  };
  thread_local Held held;
  const uint64_t generation = planner_generation.load(std::memory_order_acquire);
  if (held.generation != generation || !held.planner) {
    held.planner = CurrentPlanner();
    held.generation = generation;
  }
  return *held.planner;
}

}  // namespace isometry
