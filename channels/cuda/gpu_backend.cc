#include "channels/cuda/gpu_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace isometry {
namespace {

bool ServesWrite(MemoryKind src, MemoryKind dst) {
  return IsHostMemory(src) && dst == MemoryKind::kFbm;
}
bool ServesRead(MemoryKind src, MemoryKind dst) {
  return src == MemoryKind::kFbm && IsHostMemory(dst);
}
bool ServesCopy(MemoryKind src, MemoryKind dst) {
  return src == MemoryKind::kFbm && dst == MemoryKind::kFbm;
}

// Host memory a GPU reaches by DMA: pinned (ZCM), or pageable (the rest).
bool Pinned(MemoryKind kind) { return kind == MemoryKind::kZcm; }

// The models before calibration (which replaces them where a GPU exists)
// are conservative guesses for PCIe 4 x16 and device memory that make the
// planner stage host <-> GPU hops through pinned ZCM memory, as Isometry
// §3.2 prescribes, and convert layouts between GPU instances on the GPU.
// A host edge: pinned memory is copied by DMA while the channel's thread
// moves on; pageable memory makes the copy wait on that thread.
EdgeRateModel HostModel(MemoryKind host) {
  const double peak = Pinned(host) ? 12e9 : 4e9;
  // A copy program's runs: a 2-D copy row or a pack-kernel thread each;
  // plain copies: one cudaMemcpyAsync per request (its launch and the
  // completion callback).
  return {{peak, 1e-9}, RateModel{peak, 10e-6}};
}
EdgeRateModel ModelWrite(MemoryKind src, MemoryKind) { return HostModel(src); }
EdgeRateModel ModelRead(MemoryKind, MemoryKind dst) { return HostModel(dst); }
// Within device memory a run costs a small fraction of one across the bus.
EdgeRateModel ModelCopy(MemoryKind, MemoryKind) {
  return {{100e9, 0.05e-9}, RateModel{100e9, 10e-6}};
}

// Only where a GPU exists; a site without a GPU memory measures nothing.
bool SpendsBudget(const CalibrationSite& site) { return site.gpu != nullptr; }

// The channel on the device of the first FBM memory it reaches, with a
// pinned host end where it serves a ZCM memory and a pageable one where it
// serves another host memory (GpuHostCurve).
Status MeasureGpu(Channel& ch, const CalibrationSite& site, std::chrono::milliseconds budget,
                  Calibration& cal) {
  const std::string& name = ch.caps().name;
  if (site.gpu_device < 0) return OkStatus();
  if (ch.caps().kind == ChannelKind::kGpuCopy) {
    ISO_ASSIGN_OR_RETURN(GpuCurves g,
                         MeasureGpuChannel(ch, *site.gpu, site.gpu_device, false, budget));
    cal[name] = std::move(g.runs);
    cal[ContiguousCurve(name)] = std::move(g.contiguous);
    return OkStatus();
  }
  const int ends = (site.pinned_host ? 1 : 0) + (site.pageable_host ? 1 : 0);
  for (const bool p : {true, false}) {
    if (p ? !site.pinned_host : !site.pageable_host) continue;
    ISO_ASSIGN_OR_RETURN(GpuCurves g, MeasureGpuChannel(ch, *site.gpu, site.gpu_device, p,
                                                        budget / std::max(ends, 1)));
    cal[GpuHostCurve(name, p)] = std::move(g.runs);
    cal[ContiguousCurve(GpuHostCurve(name, p))] = std::move(g.contiguous);
  }
  return OkStatus();
}

// A failed measurement keeps the model (channel_backend.h).
Status Calibrate(Channel& ch, const CalibrationSite& site, std::chrono::milliseconds budget,
                 Calibration& cal) {
  if (!site.gpu) return OkStatus();
  const Status s = MeasureGpu(ch, site, budget, cal);
  if (!s.ok()) {
    spdlog::warn("calibration: channel '{}' keeps the model: {}", ch.caps().name, s.ToString());
  }
  return OkStatus();
}

// A host edge reads the curve of its kind of host end.
std::string CurveWrite(const std::string& name, MemoryKind src, MemoryKind) {
  return GpuHostCurve(name, Pinned(src));
}
std::string CurveRead(const std::string& name, MemoryKind, MemoryKind dst) {
  return GpuHostCurve(name, Pinned(dst));
}

}  // namespace

const ChannelBackend& GpuReadBackend() {
  static constexpr ChannelBackend kBackend{
      .kind = ChannelKind::kGpuRead,
      .name = "gpu_read",
      .serves = ServesRead,
      .keeps_plain_model = true,
      .model = ModelRead,
      .spends_budget = SpendsBudget,
      .calibrate = Calibrate,
      .curve_of = CurveRead,
  };
  return kBackend;
}

const ChannelBackend& GpuWriteBackend() {
  static constexpr ChannelBackend kBackend{
      .kind = ChannelKind::kGpuWrite,
      .name = "gpu_write",
      .serves = ServesWrite,
      .keeps_plain_model = true,
      .model = ModelWrite,
      .spends_budget = SpendsBudget,
      .calibrate = Calibrate,
      .curve_of = CurveWrite,
  };
  return kBackend;
}

const ChannelBackend& GpuCopyBackend() {
  static constexpr ChannelBackend kBackend{
      .kind = ChannelKind::kGpuCopy,
      .name = "gpu_copy",
      .serves = ServesCopy,
      .within_one_device = true,
      .keeps_plain_model = true,
      .model = ModelCopy,
      .spends_budget = SpendsBudget,
      .calibrate = Calibrate,
  };
  return kBackend;
}

}  // namespace isometry
