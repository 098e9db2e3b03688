// The memories and channels the daemon adds to a written config, each by
// the channel folder whose kind it is: the network channels of the
// [[peer]]s (channels/tcp), the GPU memories and channels of the GPUs the
// machine has (channels/cuda), and a disk memory with its channels for
// tests and benchmarks (channels/disk). The config itself knows no kind
// (config/ sits below channels/), so these live here.
//
// Pure: config and inventory in, config out; any thread.
#pragma once

#include <string>
#include <vector>

#include "config/gpu_config.h"
#include "config/runtime_config.h"
#include "core/status.h"

namespace isometry {

// The network channels of a node with peers: one remote_memcpy channel per
// peer, named "tcp:<peer>" (what isoctl shows), with the cluster's data
// connections, chunk size and rate cap; with etcd, one more ("tcp:etcd",
// peer kAnyPeer) for the peers learnt there.
std::vector<ChannelConfig> PeerChannels(const ClusterConfig& cluster);

// Applies the GPU inventory to `config`:
//  - with GPUs: checks every FBM memory's device exists (memory[i].device)
//    and its staging fits the device (memory[i].staging); with
//    gpu.auto_memories and no FBM memory configured, adds gpu<i> for each
//    device, and the GPU channels of each kind nobody configured (gpu_copy
//    with self-loops and the pairs with peer access);
//  - without: refuses any FBM memory (memory[i].kind) or gpu_* channel
//    (channel[i].kind), naming the key and the probe's reason.
// Errors are ConfigKeyErrors. Returns what it added, for the log ("" if
// nothing).
Result<std::string> ResolveGpus(RuntimeConfig& config, const GpuConfig& gpu,
                                const GpuInventory& inventory);

// Adds DSK memory `dsk0` on `directory` and the channels to reach it,
// `disk_read0` and `disk_write0`, with the first channel's settings (for
// tests and benchmarks of files as memories).
void AddDiskMemory(RuntimeConfig& config, const std::string& directory);

}  // namespace isometry
