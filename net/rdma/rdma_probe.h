// What libibverbs sees on this machine: RDMA devices, their ports (state,
// link layer, GID table), where they sit (NUMA node), how much one memory
// region may hold, and whether GPU memory could be registered. Asked once
// at start by the channel factory, which logs Summary(); ChooseRdma turns
// it and the [rdma] settings into "use RDMA" or the reason not to.
//
// Never fails: without kernel support, without a device, or with a device
// that cannot be opened, `devices` holds what could be read and `error`
// says why nothing is usable ("no RDMA devices: ibv_get_device_list
// returned 0 (is rdma_rxe or a NIC driver loaded?)"). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/rdma_config.h"
#include "core/status.h"

namespace isometry::rdma {

struct GidEntry {
  uint32_t index = 0;
  std::string gid;   // "fe80:0000:0000:0000:0202:c9ff:fe00:0001"
  std::string type;  // "IB", "RoCE v1", "RoCE v2"
};

struct PortInfo {
  uint32_t number = 0;         // from 1, as verbs counts
  std::string state;           // ibv_port_state_str: "PORT_ACTIVE", "PORT_DOWN", ...
  bool active = false;         // IBV_PORT_ACTIVE
  std::string link_layer;      // "InfiniBand" or "Ethernet" (RoCE)
  uint16_t lid = 0;            // InfiniBand only
  int active_mtu = 0;          // bytes
  std::vector<GidEntry> gids;  // the valid entries (at most 16 kept)
};

struct DeviceInfo {
  std::string name;          // "mlx5_0", "rxe0"
  int numa_node = -1;        // from sysfs; -1: unknown or none
  uint64_t max_mr_size = 0;  // ibv_device_attr.max_mr_size
  uint32_t max_qp = 0;
  std::vector<PortInfo> ports;
  std::string error;  // why it could not be opened or queried; empty if it could

  bool usable() const;  // opened, with an ACTIVE port
};

struct RdmaProbe {
  std::vector<DeviceInfo> devices;
  // GPU memory registration: nvidia-peermem (or the older nv_peer_mem) in
  // /sys/module, and whether this libibverbs has ibv_reg_dmabuf_mr (the
  // provider's support shows only when a registration is tried).
  bool peermem_module = false;
  bool dmabuf_api = false;
  std::string error;  // why no device is usable; empty when one is

  bool usable() const { return error.empty(); }
  // One line: "1 device: rxe0 (NUMA 0, max MR 16 EiB, port 1 PORT_ACTIVE
  // Ethernet/RoCE v2, mtu 1024, 2 GIDs); GPU memory: ..." or the error and
  // the GPU line.
  std::string Summary() const;
};

// Queries libibverbs (and sysfs for NUMA nodes and kernel modules).
RdmaProbe ProbeRdma();

// The probe of this process, taken at its first call.
const RdmaProbe& CachedRdmaProbe();

// What this node does with RDMA, from the probe and [rdma].
struct RdmaChoice {
  bool use = false;
  std::vector<std::string> devices;  // the usable devices chosen, when use
  std::string why;                   // "rxe0 port 1" or why not, for the log and isoctl
};

// enable = off: not used ("[rdma] enable = off"). auto: used when a
// usable device is left after the `devices` filter, else not used with the
// probe's reason. on: as auto, but no usable device is an error naming
// rdma.enable (the daemon refuses to start); so is a listed device the
// probe did not find.
Result<RdmaChoice> ChooseRdma(const RdmaProbe& probe, const RdmaConfig& config);

// What a peer said of its RDMA in the hello exchange.
struct PeerRdma {
  bool reported = false;  // false: a daemon older than the RDMA probe
  bool usable = false;
  std::string detail;
};

// Which transport network hops between this node and `peer` take, and
// why, for the log and isoctl peers: "TCP: no RDMA device on this node
// (...)", "TCP: peer 'b' has no RDMA device (...)", ...
std::string NetworkTransportWhy(const RdmaChoice& self, std::string_view peer,
                                const PeerRdma& theirs);

}  // namespace isometry::rdma
