// Runtime::Impl, calibration (Isometry §4.1): measuring every channel's
// throughput function, keeping the figures, and planning with them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "channels/calibrate.h"
#include "channels/cma/cma_channel.h"
#include "daemon/runtime/calibration_store.h"
#include "daemon/runtime/runtime_impl.h"

namespace isometry {
namespace {

// The CMA cost model as a throughput function of the run size r (one
// iovec per contiguous run): r / (per_iovec + r / bandwidth), sampled at
// powers of two from 8 B to 1 GiB.
std::vector<RateSample> CmaSamples(const CmaCost& cost) {
  std::vector<RateSample> samples;
  for (uint64_t r = 8; r <= (1ull << 30); r *= 2) {
    const double seconds =
        cost.per_iovec_seconds + static_cast<double>(r) / std::max(cost.bytes_per_second, 1.0);
    samples.push_back({r, static_cast<double>(r) / std::max(seconds, 1e-12)});
  }
  return samples;
}

bool IsGpu(ChannelKind k) {
  return k == ChannelKind::kGpuRead || k == ChannelKind::kGpuWrite || k == ChannelKind::kGpuCopy;
}

// The node's curves, from the first Memcpy channel's `budget`: every core
// copying at once (1/20), and a pipelined pair of hops through a ring of
// slots_per_buffer chunks of this channel's request size, at most a slot
// (GridFor), with cached and with streaming ring writes (1/20 each).
Status MeasureNode(const RuntimeConfig& config, const ChannelCaps& caps,
                   std::chrono::milliseconds budget, Calibration& cal) {
  ISO_ASSIGN_OR_RETURN(RateSample node, MeasureNodeCopy(budget / 20));
  cal[kNodeCopyCurve] = {node};
  const uint64_t slot_limit =
      config.space_threshold / static_cast<uint64_t>(std::max(config.slots_per_buffer, 1));
  const uint64_t chunk =
      std::min(caps.request_bytes > 0 ? caps.request_bytes : slot_limit, slot_limit);
  ISO_ASSIGN_OR_RETURN(RateSample pipe,
                       MeasureNodePipe(chunk, config.slots_per_buffer, budget / 20));
  ISO_ASSIGN_OR_RETURN(RateSample streamed, MeasureNodePipe(chunk, config.slots_per_buffer,
                                                            budget / 20, /*stream_ring=*/true));
  cal[kNodePipeCurve] = {pipe};
  cal[kNodePipeStreamedCurve] = {streamed};
  return OkStatus();
}

}  // namespace

// Measures every channel (budget shared evenly), or reuses the file.
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
  // The budget is shared by the channels that spend it (the CMA model and
  // channels nobody measures take none).
  int timed = 0;
  for (size_t c = 0; c < channels.size(); ++c) {
    const ChannelKind kind = channels[c]->caps().kind;
    const bool disk = kind == ChannelKind::kDiskRead || kind == ChannelKind::kDiskWrite;
    if (kind == ChannelKind::kMemcpy || (disk && !DiskDirectoryOf(static_cast<int>(c)).empty()) ||
        (IsGpu(kind) && gpu)) {
      ++timed;
    }
  }
  const auto budget = std::chrono::milliseconds(config.calibration_budget_ms) / std::max(timed, 1);
  for (size_t c = 0; c < channels.size(); ++c) {
    Channel& ch = *channels[c];
    const ChannelKind kind = ch.caps().kind;
    if (kind == ChannelKind::kMemcpy) {
      // Conversions by run size (two fields; eight, for the runs up to
      // kFields8MaxRun where the field count matters), and plain copies by size (their
      // own store path and request stream): 8/20, 4/20 and 5/20 of the
      // share, about the same time per sample; the first channel also
      // spends 1/20 on the node's parallel copy rate and 2/20 on a
      // pipelined pair, half with each way of writing its ring (a steady
      // state needs the longer sample).
      const std::string& name = ch.caps().name;
      ISO_ASSIGN_OR_RETURN(cal[name], MeasureChannel(ch, budget * 8 / 20));
      ISO_ASSIGN_OR_RETURN(cal[Fields8Curve(name)],
                           MeasureChannel(ch, budget * 4 / 20, /*fields=*/8, kFields8MaxRun));
      ISO_ASSIGN_OR_RETURN(cal[ContiguousCurve(name)], MeasureContiguous(ch, budget * 5 / 20));
      if (!cal.contains(kNodeCopyCurve)) {  // once per node, from the first channel's share
        ISO_RETURN_IF_ERROR(MeasureNode(config, ch.caps(), budget, cal));
      }
    } else if (kind == ChannelKind::kCma) {
      // Not by copies between two host buffers (MeasureChannel): its ends
      // are other processes. A failed measurement keeps the default model.
      auto measured = MeasureCmaCost();
      if (!measured.ok()) {
        spdlog::warn("calibration: channel '{}' keeps the 0.4 us/iovec model: {}", ch.caps().name,
                     measured.status().ToString());
        continue;
      }
      cal[ch.caps().name] = CmaSamples(*measured);
      spdlog::info("calibration: channel '{}' costs {:.2f} us per iovec (run), {:.2f} GB/s",
                   ch.caps().name, measured->per_iovec_seconds * 1e6,
                   measured->bytes_per_second / 1e9);
    } else if (IsGpu(kind)) {
      // Only where a GPU exists (`gpu`); a failed measurement keeps the
      // model (daemon/runtime/local_topology.h).
      if (!gpu) continue;
      Status s = MeasureGpu(static_cast<int>(c), budget, cal);
      if (!s.ok()) {
        spdlog::warn("calibration: channel '{}' keeps the model: {}", ch.caps().name, s.ToString());
      }
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
      cal[ch.caps().name] = std::move(measured->samples);
      if (!measured->unsynced.empty()) {
        cal[UnsyncedCurve(ch.caps().name)] = std::move(measured->unsynced);
      }
    }
  }
  if (!config.calibration_file.empty()) {
    Status s = SaveCalibration(config.calibration_file, fp, cal);
    if (!s.ok()) spdlog::warn("calibration: not kept: {}", s.ToString());
  }
  return cal;
}

// GPU channel `c` on the device of the first FBM memory it reaches, with
// a pinned host end where it serves a ZCM memory and a pageable one where
// it serves another host memory (GpuHostCurve).
Status Runtime::Impl::MeasureGpu(int c, std::chrono::milliseconds budget, Calibration& cal) {
  Channel& ch = *channels[static_cast<size_t>(c)];
  const std::string& name = ch.caps().name;
  int device = -1;
  bool pinned = false, pageable = false;
  for (const TopologyEdge& e : topo.edges) {
    if (e.channel != c) continue;
    for (const MemoryId id : {e.src, e.dst}) {
      const MemoryConfig& m = config.memories[id.memory];
      if (m.kind == MemoryKind::kFbm && device < 0) device = m.device;
      pinned |= m.kind == MemoryKind::kZcm;
      pageable |= m.kind == MemoryKind::kSys || m.kind == MemoryKind::kReg;
    }
  }
  if (device < 0) return OkStatus();
  if (ch.caps().kind == ChannelKind::kGpuCopy) {
    ISO_ASSIGN_OR_RETURN(GpuCurves g, MeasureGpuChannel(ch, *gpu, device, false, budget));
    cal[name] = std::move(g.runs);
    cal[ContiguousCurve(name)] = std::move(g.contiguous);
    return OkStatus();
  }
  const int ends = (pinned ? 1 : 0) + (pageable ? 1 : 0);
  for (const bool p : {true, false}) {
    if (p ? !pinned : !pageable) continue;
    ISO_ASSIGN_OR_RETURN(GpuCurves g,
                         MeasureGpuChannel(ch, *gpu, device, p, budget / std::max(ends, 1)));
    cal[GpuHostCurve(name, p)] = std::move(g.runs);
    cal[ContiguousCurve(GpuHostCurve(name, p))] = std::move(g.contiguous);
  }
  return OkStatus();
}

// The directory of the first DSK memory an edge of channel `c` reaches;
// "" if none.
std::string Runtime::Impl::DiskDirectoryOf(int c) const {
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
    // A GPU edge with a host end reads the curve of its kind of host end.
    std::string name = e.channel_name;
    if ((e.kind == ChannelKind::kGpuWrite || e.kind == ChannelKind::kGpuRead) && IsLocal(e.src) &&
        IsLocal(e.dst)) {
      const MemoryId host = e.kind == ChannelKind::kGpuWrite ? e.src : e.dst;
      name = GpuHostCurve(name, config.memories[host.memory].kind == MemoryKind::kZcm);
    }
    ISO_ASSIGN_OR_RETURN(std::optional<ThroughputFunction> tp, curve(name));
    if (!tp) continue;
    e.tp = *std::move(tp);
    // Absent from files written before they were measured.
    ISO_ASSIGN_OR_RETURN(std::optional<ThroughputFunction> plain, curve(ContiguousCurve(name)));
    if (plain || !IsGpu(e.kind)) e.tp_contiguous = std::move(plain);
    ISO_ASSIGN_OR_RETURN(e.tp_fields8, curve(Fields8Curve(e.channel_name)));
    ISO_ASSIGN_OR_RETURN(e.tp_unsynced, curve(UnsyncedCurve(e.channel_name)));
  }
  if (auto it = cal.find(kNodeCopyCurve); it != cal.end() && !it->second.empty()) {
    const double node_bps = it->second.front().bytes_per_s;
    for (TopologyEdge& e : topo.edges) {
      if (e.kind == ChannelKind::kMemcpy && IsLocal(e.src) && IsLocal(e.dst)) {
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
    stream_ring_writes.store(streams, std::memory_order_relaxed);
    for (TopologyEdge& e : topo.edges) {
      if (e.kind == ChannelKind::kMemcpy && IsLocal(e.src) && IsLocal(e.dst)) {
        e.node_pipe_bps = std::max(pipe.bytes_per_s, streamed_bps);
      }
    }
    spdlog::info(
        "calibration: two memcpy hops pipelined through a ring of {} KiB slots move {:.2f} GB/s "
        "writing the ring with cached stores, {:.2f} with streaming ones: rings are written with "
        "{} stores",
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
}

}  // namespace isometry
