// The one place that maps a channel config to an implementation, and says
// which kinds of channel this build and this machine offer. Build switches
// for optional backends (CUDA, ibverbs) live in channel_factory.cc's table
// and nowhere else; no caller chooses a backend by name.
//
// Thread safety: every function may be called from any thread; nothing here
// holds state between calls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "channels/channel.h"
#include "channels/gpu_memory.h"
#include "config/runtime_config.h"
#include "core/channel_kind.h"

namespace isometry {

namespace net {
class DataPlane;
}
namespace rdma {
class NetRoutes;
}

// What channels need beyond their config entry.
struct ChannelContext {
  // remote_memcpy channels move data over this node's data plane (the
  // links to its peers); null on a node without peers. Must outlive every
  // channel made with it.
  net::DataPlane* data_plane = nullptr;
  // Set where RDMA may carry network hops: each peer's network channel
  // then sends the copies routed over RDMA there (rdma/net_routes.h).
  std::shared_ptr<rdma::NetRoutes> rdma_routes;
};

// Whether this daemon can make channels of `kind`, and what the probe found
// or why not ("io_uring: sq=2 cq=4 ..."; "no RDMA device in
// /sys/class/infiniband").
struct ChannelAvailability {
  ChannelKind kind = ChannelKind::kMemcpy;
  bool available = false;
  std::string detail;
};

// Probes what each kind of channel needs (a ring for the disk channels, a
// data plane for the network ones, GPU and RDMA devices) and reports every
// kind, available or not. Cheap (tens of microseconds to a few ms): run it
// once at start.
std::vector<ChannelAvailability> ProbeChannels(const ChannelContext& context);

// Logs ProbeChannels' findings, one line per kind.
void LogChannelAvailability(const std::vector<ChannelAvailability>& found);

// The GPUs this build and machine offer, in the config's terms (for
// ResolveGpus, config/gpu_config.h): device memory sizes and peer access
// from the probe (run once per process), or why there are none ("GPU
// channels absent from this build: ..."; "no GPU: CUDA driver version is
// insufficient ...").
GpuInventory DetectGpus();

// Device memory and host pinning for the GPUs DetectGpus found
// (channels/gpu_memory.h); an error saying why where there are none.
Result<std::shared_ptr<GpuMemory>> MakeGpuMemory();

// Makes the channel `config` describes: a working channel or an error that
// names the channel and the cause (a kind this build lacks, a missing data
// plane, a ring the kernel refuses).
Result<std::unique_ptr<Channel>> MakeChannel(const ChannelConfig& config,
                                             const ChannelContext& context = {});

}  // namespace isometry
