// The memcpy kind's descriptor (channels/channel_backend.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "channels/channel_backend.h"
#include "channels/memcpy/memcpy_channel.h"

namespace isometry {
namespace {

bool Serves(MemoryKind src, MemoryKind dst) { return IsHostMemory(src) && IsHostMemory(dst); }

// Unmeasured: the planner's placeholder; calibration replaces it.
EdgeRateModel Model(MemoryKind, MemoryKind) { return {}; }

bool SpendsBudget(const CalibrationSite&) { return true; }

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
  Result<RateSample> pipe = MeasureNodePipe(chunk, config.slots_per_buffer, budget / 20);
  Result<RateSample> streamed =
      MeasureNodePipe(chunk, config.slots_per_buffer, budget / 20, /*stream_ring=*/true);
  // A pipeline that other work starved is left unmeasured rather than
  // failing the daemon's start: without these curves the planner keeps
  // its default for pipelined hops and rings are written with cached stores.
  for (const Result<RateSample>* r : {&pipe, &streamed}) {
    if (!r->ok()) {
      spdlog::warn("{}; pipelined hops keep their default rate", r->status().ToString());
      return OkStatus();
    }
  }
  cal[kNodePipeCurve] = {*pipe};
  cal[kNodePipeStreamedCurve] = {*streamed};
  return OkStatus();
}

// Conversions by run size (two fields; eight, for the runs up to
// kCalibrationFields8MaxRun where the field count matters), and plain copies by size
// (their own store path and request stream): 8/20, 4/20 and 5/20 of the
// share, about the same time per sample; the first channel also spends
// 1/20 on the node's parallel copy rate and 2/20 on a pipelined pair, half
// with each way of writing its ring (a steady state needs the longer
// sample).
Status Calibrate(Channel& ch, const CalibrationSite& site, std::chrono::milliseconds budget,
                 Calibration& cal) {
  const std::string& name = ch.caps().name;
  ISO_ASSIGN_OR_RETURN(cal[name], MeasureChannel(ch, budget * 8 / 20));
  ISO_ASSIGN_OR_RETURN(cal[Fields8Curve(name)], MeasureChannel(ch, budget * 4 / 20, /*fields=*/8,
                                                               kCalibrationFields8MaxRun));
  ISO_ASSIGN_OR_RETURN(cal[ContiguousCurve(name)], MeasureContiguous(ch, budget * 5 / 20));
  if (!cal.contains(kNodeCopyCurve)) {  // once per node, from the first channel's share
    ISO_RETURN_IF_ERROR(MeasureNode(*site.config, ch.caps(), budget, cal));
  }
  return OkStatus();
}

ChannelAvailability Probe(ChannelKind kind, const ChannelContext&) {
  return KindAvailable(kind, "host memory copies on the channel's threads");
}

Result<std::unique_ptr<Channel>> Make(const ChannelConfig& c, const ChannelContext&) {
  return MakeMemcpyChannel(c);
}

}  // namespace

const ChannelBackend& MemcpyBackend() {
  static constexpr ChannelBackend kBackend{
      .kind = ChannelKind::kMemcpy,
      .name = "memcpy",
      .serves = Serves,
      .edge_traits = {.simple_converter = true, .shares_node_memory = true},
      .model = Model,
      .spends_budget = SpendsBudget,
      .calibrate = Calibrate,
      .probe = Probe,
      .make = Make,
  };
  return kBackend;
}

}  // namespace isometry
