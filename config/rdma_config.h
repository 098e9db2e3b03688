// The RDMA channel's settings ([rdma] in the config file). Parsed and
// validated here; what the machine offers is the probe's business
// (net/rdma/rdma_probe.h), and the two meet in rdma::ChooseRdma.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace isometry {

// Whether network hops may run over RDMA.
//   kAuto: where this node and the peer both have a usable device
//          (an ACTIVE port); TCP otherwise, and the log says why.
//   kOn:   as kAuto, but a node without a usable device refuses to start.
//   kOff:  never; the probe still runs and isoctl status shows what it saw.
enum class RdmaEnable { kAuto, kOn, kOff };

std::string_view RdmaEnableName(RdmaEnable e);  // "auto", "on", "off"

struct RdmaConfig {
  RdmaEnable enable = RdmaEnable::kAuto;
  // Device names (as in /sys/class/infiniband, e.g. "mlx5_0", "rxe0") the
  // daemon may use; empty: every device the probe finds.
  std::vector<std::string> devices;
  // Reliable-connected queue pairs per peer and direction; transfers are
  // striped over them.
  int qps_per_peer = 4;
  // The GID table entry used for RoCE addressing; -1: the first RoCE v2
  // entry of the port (then RoCE v1, then entry 0).
  int gid_index = -1;
  // Each link's receive ring: ring_slots slots of slot_kib KiB, pinned
  // and registered once per peer (both nodes of a link must agree). A
  // cross-node chunk goes over RDMA only when it fits in one slot.
  uint32_t ring_slots = 32;
  uint64_t slot_kib = 1024;
  uint64_t slot_bytes() const { return slot_kib << 10; }

  // Ranges only: device names are checked against the machine at start.
  Status Validate() const;
};

}  // namespace isometry
