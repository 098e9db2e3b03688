#include "channels/channel_factory.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "channels/cma/cma_channel.h"
#include "channels/disk/disk_channel.h"
#include "channels/disk/uring.h"
#include "channels/memcpy/memcpy_channel.h"
#include "channels/rdma/net_routes.h"
#include "channels/rdma/rdma_probe.h"
#include "channels/tcp/data_plane.h"
#include "channels/tcp/tcp_channel.h"
#ifdef ISOMETRY_HAVE_CUDA
#include "channels/cuda/cuda_channel.h"
#include "channels/cuda/cuda_memory.h"
#include "channels/cuda/cuda_probe.h"
#endif

namespace isometry {
namespace {

using Maker = Result<std::unique_ptr<Channel>> (*)(const ChannelConfig&, const ChannelContext&);
using Probe = ChannelAvailability (*)(ChannelKind, const ChannelContext&);

ChannelAvailability Available(ChannelKind kind, std::string detail) {
  return {kind, true, std::move(detail)};
}
ChannelAvailability Absent(ChannelKind kind, std::string why) {
  return {kind, false, std::move(why)};
}

// ---- the backends of this build ----

Result<std::unique_ptr<Channel>> MakeMemcpy(const ChannelConfig& c, const ChannelContext&) {
  return MakeMemcpyChannel(c);
}
ChannelAvailability ProbeMemcpy(ChannelKind kind, const ChannelContext&) {
  return Available(kind, "host memory copies on the channel's threads");
}

Result<std::unique_ptr<Channel>> MakeDisk(const ChannelConfig& c, const ChannelContext&) {
  return MakeDiskChannel(c);
}
// The disk channels each own a ring: a small one here shows whether the
// kernel (sysctl, seccomp, memlock) lets this process have them.
ChannelAvailability ProbeDisk(ChannelKind kind, const ChannelContext&) {
  auto ring = Uring::Create({.entries = 2});
  if (!ring.ok()) return Absent(kind, StrCat("io_uring refused: ", ring.status().message()));
  return Available(kind, ring->info().Describe());
}

Result<std::unique_ptr<Channel>> MakeTcp(const ChannelConfig& c, const ChannelContext& context) {
  if (!context.data_plane) {
    return FailedPrecondition("channel '", c.name,
                              "': a remote_memcpy channel needs the cluster's data plane (this "
                              "node has no [[peer]])");
  }
  if (c.peer.empty()) {
    return InvalidArgument("channel '", c.name, "': a remote_memcpy channel names no peer");
  }
  std::unique_ptr<Channel> tcp = c.peer == kAnyPeer
                                     ? MakeAnyPeerTcpChannel(c, *context.data_plane)
                                     : MakeTcpChannel(c, context.data_plane->Link(c.peer));
  // RDMA beside TCP: copies routed over an RDMA link leave through it.
  if (context.rdma_routes) return rdma::MakeNetChannel(std::move(tcp), context.rdma_routes);
  return tcp;
}
ChannelAvailability ProbeTcp(ChannelKind kind, const ChannelContext& context) {
  if (!context.data_plane) return Absent(kind, "no [[peer]] configured");
  return Available(kind, StrCat("TCP data plane listening on ", context.data_plane->address()));
}

// GPURead, GPUWrite and GPUCopy: the one CUDA switch of the tree. With
// CUDA, the channels exist wherever the probe (run once per process) found
// a GPU; without, the kinds are absent and the log says why.
#ifdef ISOMETRY_HAVE_CUDA
Result<std::unique_ptr<Channel>> MakeGpu(const ChannelConfig& c, const ChannelContext&) {
  return cuda::MakeCudaChannel(c, cuda::CachedGpuProbe());
}
ChannelAvailability ProbeGpu(ChannelKind kind, const ChannelContext&) {
  const cuda::GpuProbe& probe = cuda::CachedGpuProbe();
  if (probe.gpus.empty()) return Absent(kind, probe.error);
  return Available(kind, StrCat("CUDA streams on ", probe.gpus.size(), " GPU(s)"));
}
std::string GpuSummary() { return cuda::CachedGpuProbe().Summary(); }
constexpr Maker kMakeGpu = MakeGpu;
GpuInventory GpuInventoryOfMachine() {
  const cuda::GpuProbe& probe = cuda::CachedGpuProbe();
  GpuInventory inv;
  for (const cuda::GpuInfo& g : probe.gpus) inv.memory_bytes.push_back(g.total_memory);
  inv.peer_access = probe.peer_access;
  inv.why_none = probe.error;
  return inv;
}
Result<std::shared_ptr<GpuMemory>> GpuMemoryOfMachine() {
  ISO_ASSIGN_OR_RETURN(std::unique_ptr<GpuMemory> m, cuda::MakeCudaMemory(cuda::CachedGpuProbe()));
  return std::shared_ptr<GpuMemory>(std::move(m));
}
#else
std::string GpuSummary() {
  std::error_code ec;
  const bool device = std::filesystem::exists("/dev/nvidia0", ec);
  return StrCat("GPU channels absent from this build: ", ISOMETRY_NO_CUDA_WHY,
                device ? " (an NVIDIA device node exists: /dev/nvidia0)" : "");
}
ChannelAvailability ProbeGpu(ChannelKind kind, const ChannelContext&) {
  return Absent(kind, GpuSummary());
}
constexpr Maker kMakeGpu = nullptr;
GpuInventory GpuInventoryOfMachine() { return {{}, {}, GpuSummary()}; }
Result<std::shared_ptr<GpuMemory>> GpuMemoryOfMachine() { return FailedPrecondition(GpuSummary()); }
#endif

Result<std::unique_ptr<Channel>> MakeCma(const ChannelConfig& c, const ChannelContext&) {
  return MakeCmaChannel(c);
}
// A read of this process shows whether seccomp, the kernel build or the
// ptrace policy let the daemon use process_vm_*; another uid's process
// also needs CAP_SYS_PTRACE (channels/cma/client_process.h).
ChannelAvailability ProbeCmaKind(ChannelKind kind, const ChannelContext&) {
  const Status s = ProbeCma();
  if (!s.ok()) return Absent(kind, std::string(s.message()));
  const int scope = YamaPtraceScope();
  return Available(
      kind, StrCat("process_vm_readv/writev and pidfd_open work; ",
                   scope < 0 ? std::string("no Yama") : StrCat("kernel.yama.ptrace_scope ", scope),
                   "; reaching clients' processes needs CAP_SYS_PTRACE (or "
                   "ptrace_scope 0 and the daemon's own uid)"));
}
struct Backend {
  ChannelKind kind;
  Probe probe;
  Maker make;  // null: not in this build
};

// The table: one row per kind. A new channel adds its row here (under its
// build switch, if it has one) and nowhere else.
constexpr Backend kBackends[] = {
    {ChannelKind::kMemcpy, ProbeMemcpy, MakeMemcpy},
    {ChannelKind::kCma, ProbeCmaKind, MakeCma},
    {ChannelKind::kGpuRead, ProbeGpu, kMakeGpu},
    {ChannelKind::kGpuWrite, ProbeGpu, kMakeGpu},
    {ChannelKind::kGpuCopy, ProbeGpu, kMakeGpu},
    {ChannelKind::kDiskRead, ProbeDisk, MakeDisk},
    {ChannelKind::kDiskWrite, ProbeDisk, MakeDisk},
    {ChannelKind::kRemoteMemcpy, ProbeTcp, MakeTcp},
};

const Backend* BackendOf(ChannelKind kind) {
  for (const Backend& b : kBackends) {
    if (b.kind == kind) return &b;
  }
  return nullptr;
}

}  // namespace

std::vector<ChannelAvailability> ProbeChannels(const ChannelContext& context) {
  std::vector<ChannelAvailability> out;
  for (const Backend& b : kBackends) out.push_back(b.probe(b.kind, context));
  return out;
}

void LogChannelAvailability(const std::vector<ChannelAvailability>& found) {
  for (const ChannelAvailability& a : found) {
    if (a.available) {
      spdlog::info("channel kind {}: available; {}", ChannelKindName(a.kind), a.detail);
    } else {
      spdlog::info("channel kind {}: absent: {}", ChannelKindName(a.kind), a.detail);
    }
  }
  spdlog::info("GPU: {}", GpuSummary());
  // RDMA is a backend of the remote_memcpy kind: what libibverbs found, or
  // why nothing (whether it is used is the daemon's choice: rdma::ChooseRdma).
  const rdma::RdmaProbe& rdma = rdma::CachedRdmaProbe();
  spdlog::info("RDMA: {}{}", rdma.usable() ? "" : "absent: ", rdma.Summary());
}

GpuInventory DetectGpus() { return GpuInventoryOfMachine(); }

Result<std::shared_ptr<GpuMemory>> MakeGpuMemory() { return GpuMemoryOfMachine(); }

Result<std::unique_ptr<Channel>> MakeChannel(const ChannelConfig& config,
                                             const ChannelContext& context) {
  const Backend* b = BackendOf(config.kind);
  if (!b || !b->make) {
    return FailedPrecondition("channel '", config.name, "': kind ", ChannelKindName(config.kind),
                              " is not available in this build");
  }
  return b->make(config, context);
}

}  // namespace isometry
