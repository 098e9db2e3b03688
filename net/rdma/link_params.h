// What two daemons exchange to join their RDMA links (the peer service's
// ConnectRdma call carries it; daemon/cluster/peer_wire_rdma.cc translates):
// one address per RC queue pair (rdma.qps_per_peer of them, paired in
// order), and where the sender may write: the receive ring's address,
// rkey, slot size and count, inside the memory region that rkey covers.
//
// Everything in it comes from another machine: ValidateLinkParams is the
// only gate between the message and ibv_modify_qp / RDMA WRITE, and it
// refuses what could make this node write outside the peer's ring or
// connect to a QP that cannot exist. Pure logic; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "net/rdma/qp.h"

namespace isometry::rdma {

// The receiver's ring as a remote writer sees it.
struct RingAddress {
  uint64_t addr = 0;  // slot 0
  uint32_t rkey = 0;
  uint64_t slot_bytes = 0;
  uint32_t slots = 0;
  // The registered region `rkey` covers; the ring lies inside it.
  uint64_t region_addr = 0;
  uint64_t region_length = 0;
};

struct LinkParams {
  std::vector<QpAddress> qps;
  RingAddress ring;
  // Counts the times this side connected the link (a recovery after an
  // error connects again): a peer answering an older one is ignored.
  uint64_t generation = 0;
};

// `qps`: how many QPs this node expects (its rdma.qps_per_peer; both ends
// must agree). InvalidArgument naming the first bad field: a QP number of
// 0 or beyond 24 bits, the same QP twice, a PSN beyond 24 bits, an MTU
// that is not 256..4096, neither a LID nor a GID, a ring with no slots or
// more than kMaxSlots, slots of 0 bytes or more than 4 GiB, a ring whose
// size or end overflows 64 bits, or one not inside its region.
Status ValidateLinkParams(const LinkParams& p, uint32_t qps);

// MTU in bytes (256..4096) to verbs' enum and back; 0 / false when not
// one of the five.
int MtuBytes(ibv_mtu mtu);
bool MtuFromBytes(uint32_t bytes, ibv_mtu& out);

}  // namespace isometry::rdma
