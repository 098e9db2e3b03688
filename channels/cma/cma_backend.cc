// The cma kind's descriptor (channels/channel_backend.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "channels/channel_backend.h"
#include "channels/cma/cma_channel.h"

namespace isometry {
namespace {

// No configured pair: its ends are the clients' PROCESS memories
// (reaches_process_memory).
bool Serves(MemoryKind, MemoryKind) { return false; }

// One iovec per contiguous run: the per-run cost dominates small runs.
// Calibration measures both figures (MeasureCmaCost).
EdgeRateModel Model(MemoryKind, MemoryKind) { return {{8e9, 0.4e-6}, std::nullopt}; }

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

// Not by copies between two host buffers (MeasureChannel): its ends are
// other processes. A failed measurement keeps the default model. Takes
// no share of the budget (no spends_budget).
Status Calibrate(Channel& ch, const CalibrationSite&, std::chrono::milliseconds, Calibration& cal) {
  auto measured = MeasureCmaCost();
  if (!measured.ok()) {
    spdlog::warn("calibration: channel '{}' keeps the 0.4 us/iovec model: {}", ch.caps().name,
                 measured.status().ToString());
    return OkStatus();
  }
  cal[ch.caps().name] = CmaSamples(*measured);
  spdlog::info("calibration: channel '{}' costs {:.2f} us per iovec (run), {:.2f} GB/s",
               ch.caps().name, measured->per_iovec_seconds * 1e6, measured->bytes_per_second / 1e9);
  return OkStatus();
}

// A read of this process shows whether seccomp, the kernel build or the
// ptrace policy let the daemon use process_vm_*; another uid's process
// also needs CAP_SYS_PTRACE (channels/cma/client_process.h).
ChannelAvailability Probe(ChannelKind kind, const ChannelContext&) {
  const Status s = ProbeCma();
  if (!s.ok()) return KindAbsent(kind, std::string(s.message()));
  const int scope = YamaPtraceScope();
  return KindAvailable(
      kind, StrCat("process_vm_readv/writev and pidfd_open work; ",
                   scope < 0 ? std::string("no Yama") : StrCat("kernel.yama.ptrace_scope ", scope),
                   "; reaching clients' processes needs CAP_SYS_PTRACE (or "
                   "ptrace_scope 0 and the daemon's own uid)"));
}

Result<std::unique_ptr<Channel>> Make(const ChannelConfig& c, const ChannelContext&) {
  return MakeCmaChannel(c);
}

}  // namespace

const ChannelBackend& CmaBackend() {
  static constexpr ChannelBackend kBackend{
      .kind = ChannelKind::kCma,
      .name = "cma",
      .serves = Serves,
      .edge_traits = {.tp_is_per_run = true},
      .reaches_process_memory = true,
      .takes_rate_limit = false,
      .model = Model,
      .calibrate = Calibrate,
      .probe = Probe,
      .make = Make,
  };
  return kBackend;
}

}  // namespace isometry
