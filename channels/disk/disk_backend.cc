// The disk_read and disk_write kinds' descriptors (channels/channel_backend.h),
// and the disk memory tests and benchmarks add (AddDiskMemory).
#include <spdlog/spdlog.h>

#include "channels/added_channels.h"
#include "channels/channel_backend.h"
#include "channels/disk/disk_channel.h"
#include "channels/disk/uring.h"

namespace isometry {
namespace {

bool ServesRead(MemoryKind src, MemoryKind dst) {
  return src == MemoryKind::kDsk && IsHostMemory(dst);
}
bool ServesWrite(MemoryKind src, MemoryKind dst) {
  return IsHostMemory(src) && dst == MemoryKind::kDsk;
}

// A fixed cost per request, so the planner keeps small requests (and
// layout changes) off disks (Isometry fig. 9b).
EdgeRateModel Model(MemoryKind, MemoryKind) { return {{1e9, 100e-6}, std::nullopt}; }

// Only a channel that reaches a DSK memory has a file to measure through.
bool SpendsBudget(const CalibrationSite& site) { return !site.disk_directory.empty(); }

// On a scratch file in the first DSK directory the channel serves. A
// directory that refuses it keeps the model, not the start-up.
Status Calibrate(Channel& ch, const CalibrationSite& site, std::chrono::milliseconds budget,
                 Calibration& cal) {
  if (site.disk_directory.empty()) return OkStatus();
  auto measured = MeasureDiskChannel(ch, site.disk_directory, budget);
  if (!measured.ok()) {
    spdlog::warn("calibration: channel '{}' keeps the 1 GB/s model: {}", ch.caps().name,
                 measured.status().ToString());
    return OkStatus();
  }
  cal[ch.caps().name] = std::move(measured->samples);
  if (!measured->unsynced.empty()) {
    cal[UnsyncedCurve(ch.caps().name)] = std::move(measured->unsynced);
  }
  return OkStatus();
}

// The disk channels each own a ring: a small one here shows whether the
// kernel (sysctl, seccomp, memlock) lets this process have them.
ChannelAvailability Probe(ChannelKind kind, const ChannelContext&) {
  auto ring = Uring::Create({.entries = 2});
  if (!ring.ok()) return KindAbsent(kind, StrCat("io_uring refused: ", ring.status().message()));
  return KindAvailable(kind, ring->info().Describe());
}

Result<std::unique_ptr<Channel>> Make(const ChannelConfig& c, const ChannelContext&) {
  return MakeDiskChannel(c);
}

// The two disk kinds differ only in their direction.
// Disk hops move whole runs between a file and memory (one I/O per run):
// a layout change there is an I/O per tiny run, so they never convert.
constexpr ChannelBackend DiskBackend(ChannelKind kind, const char* name,
                                     bool (*serves)(MemoryKind, MemoryKind)) {
  return ChannelBackend{
      .kind = kind,
      .name = name,
      .serves = serves,
      .edge_traits = {.converts_layout = false},
      .model = Model,
      .spends_budget = SpendsBudget,
      .calibrate = Calibrate,
      .describe = DescribeDiskChannel,
      .probe = Probe,
      .make = Make,
  };
}

}  // namespace

const ChannelBackend& DiskReadBackend() {
  static constexpr ChannelBackend kBackend =
      DiskBackend(ChannelKind::kDiskRead, "disk_read", ServesRead);
  return kBackend;
}

const ChannelBackend& DiskWriteBackend() {
  static constexpr ChannelBackend kBackend =
      DiskBackend(ChannelKind::kDiskWrite, "disk_write", ServesWrite);
  return kBackend;
}

void AddDiskMemory(RuntimeConfig& config, const std::string& directory) {
  MemoryConfig dsk;
  dsk.name = "dsk0";
  dsk.kind = MemoryKind::kDsk;
  dsk.staging_bytes = 0;
  dsk.directory = directory;
  config.memories.push_back(dsk);
  ChannelConfig read = config.channels.front(), write = config.channels.front();
  read.name = "disk_read0";
  read.kind = ChannelKind::kDiskRead;
  read.edges.clear();
  write.name = "disk_write0";
  write.kind = ChannelKind::kDiskWrite;
  write.edges.clear();
  config.channels.push_back(read);
  config.channels.push_back(write);
}

}  // namespace isometry
