#include "channels/channel_factory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/synchronization/mutex.h"
#include "channels/cma/cma_channel.h"
#include "channels/cuda/gpu_backend.h"
#include "channels/disk/disk_channel.h"
#include "channels/memcpy/memcpy_channel.h"
#include "channels/rdma/net_routes.h"
#include "channels/tcp/tcp_channel.h"
#include "net/rdma/rdma_probe.h"
#ifdef ISOMETRY_HAVE_CUDA
#include "channels/cuda/cuda_channel.h"
#include "channels/cuda/cuda_memory.h"
#include "channels/cuda/cuda_probe.h"
#endif

namespace isometry {
namespace {

// remote_memcpy: the TCP channel, and RDMA beside it: copies routed over
// an RDMA link leave through it.
Result<std::unique_ptr<Channel>> MakeNetwork(const ChannelConfig& c,
                                             const ChannelContext& context) {
  ISO_ASSIGN_OR_RETURN(std::unique_ptr<Channel> tcp, TcpBackend().make(c, context));
  if (context.rdma_routes) return rdma::MakeNetChannel(std::move(tcp), context.rdma_routes);
  return tcp;
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
  if (probe.gpus.empty()) return KindAbsent(kind, probe.error);
  return KindAvailable(kind, StrCat("CUDA streams on ", probe.gpus.size(), " GPU(s)"));
}
std::string GpuSummary() { return cuda::CachedGpuProbe().Summary(); }
constexpr auto kMakeGpu = MakeGpu;
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
  return KindAbsent(kind, GpuSummary());
}
constexpr decltype(ChannelBackend::make) kMakeGpu = nullptr;
GpuInventory GpuInventoryOfMachine() { return {{}, {}, GpuSummary()}; }
Result<std::shared_ptr<GpuMemory>> GpuMemoryOfMachine() { return FailedPrecondition(GpuSummary()); }
#endif

// `backend` made and probed by the given functions instead of its own.
ChannelBackend With(const ChannelBackend& backend, decltype(ChannelBackend::probe) probe,
                    decltype(ChannelBackend::make) make) {
  ChannelBackend b = backend;
  b.probe = probe;
  b.make = make;
  return b;
}

// The table: one row per kind, in ChannelKind order. A new channel adds
// its row here (under its build switch, if it has one) and nowhere else;
// its folder holds everything else (docs/development/adding-a-channel.md).
const std::vector<ChannelBackend>& BuiltInBackends() {
  static const std::vector<ChannelBackend> kBackends = {
      MemcpyBackend(),
      CmaBackend(),
      With(GpuReadBackend(), ProbeGpu, kMakeGpu),
      With(GpuWriteBackend(), ProbeGpu, kMakeGpu),
      With(GpuCopyBackend(), ProbeGpu, kMakeGpu),
      DiskReadBackend(),
      DiskWriteBackend(),
      With(TcpBackend(), TcpBackend().probe, MakeNetwork),
  };
  return kBackends;
}

// Descriptors tests registered (TestBackendRegistration), after the table's.
ABSL_CONST_INIT absl::Mutex test_backends_mu(absl::kConstInit);
std::vector<const ChannelBackend*>& TestBackends() ABSL_EXCLUSIVE_LOCKS_REQUIRED(test_backends_mu) {
  static std::vector<const ChannelBackend*> backends;
  return backends;
}

}  // namespace

std::vector<const ChannelBackend*> ChannelBackends() {
  std::vector<const ChannelBackend*> out;
  for (const ChannelBackend& b : BuiltInBackends()) out.push_back(&b);
  absl::MutexLock lock(&test_backends_mu);
  for (const ChannelBackend* b : TestBackends()) out.push_back(b);
  return out;
}

const ChannelBackend* FindBackend(ChannelKind kind) {
  for (const ChannelBackend& b : BuiltInBackends()) {
    if (b.kind == kind) return &b;
  }
  absl::MutexLock lock(&test_backends_mu);
  for (const ChannelBackend* b : TestBackends()) {
    if (b->kind == kind) return b;
  }
  return nullptr;
}

EdgeTraits EdgeTraitsOf(ChannelKind kind) {
  const ChannelBackend* b = FindBackend(kind);
  return b ? b->edge_traits : EdgeTraits{};
}

const ChannelBackend& NetworkBackend() {
  for (const ChannelBackend& b : BuiltInBackends()) {
    if (b.per_peer) return b;
  }
  spdlog::critical("no built-in channel kind is made per peer");
  std::abort();
}

TestBackendRegistration::TestBackendRegistration(const ChannelBackend& backend)
    : backend_(&backend) {
  if (FindBackend(backend.kind)) {
    spdlog::critical("TestBackendRegistration: kind {} is already listed", backend.name);
    std::abort();
  }
  absl::MutexLock lock(&test_backends_mu);
  TestBackends().push_back(backend_);
}

TestBackendRegistration::~TestBackendRegistration() {
  absl::MutexLock lock(&test_backends_mu);
  std::vector<const ChannelBackend*>& list = TestBackends();
  list.erase(std::remove(list.begin(), list.end(), backend_), list.end());
}

std::vector<ChannelAvailability> ProbeChannels(const ChannelContext& context) {
  std::vector<ChannelAvailability> out;
  for (const ChannelBackend* b : ChannelBackends()) out.push_back(b->probe(b->kind, context));
  return out;
}

void LogChannelAvailability(const std::vector<ChannelAvailability>& found) {
  for (const ChannelAvailability& a : found) {
    const ChannelBackend* b = FindBackend(a.kind);
    const std::string_view name = b ? std::string_view(b->name) : ChannelKindName(a.kind);
    if (a.available) {
      spdlog::info("channel kind {}: available; {}", name, a.detail);
    } else {
      spdlog::info("channel kind {}: absent: {}", name, a.detail);
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
  const ChannelBackend* b = FindBackend(config.kind);
  if (!b || !b->make) {
    const std::string_view name = b ? std::string_view(b->name) : ChannelKindName(config.kind);
    return FailedPrecondition("channel '", config.name, "': kind ", name,
                              " is not available in this build");
  }
  return b->make(config, context);
}

}  // namespace isometry
