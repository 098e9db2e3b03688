// One node's end of the RDMA link with one peer: the device opened, one
// completion queue, rdma.qps_per_peer RC queue pairs, and the receive ring
// (page-aligned host memory registered for remote write) the peer writes
// chunks into (credits.h says how slots are granted and given back).
//
// Life: Create() opens and allocates everything (or fails, naming the
// device and the call); Local() is what the peer needs (link_params.h),
// sent through the peer service; Connect() takes the peer's parameters,
// checks them (ValidateLinkParams) and brings every QP from RESET to RTS
// toward its pair. After a completion error the QPs are in ERROR: the
// link is connected again with fresh PSNs by calling Connect() with the
// peer's new parameters (the initiator exchanges them again, generation +
// 1), which resets every QP first.
//
// Thread safety: Create, Local and Describe may run anywhere; Connect must
// not run concurrently with itself or with work posted on the QPs.
// Needs a device: without one Create fails with the probe's reason.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/rdma/link_params.h"
#include "net/rdma/rdma_stream.h"

namespace isometry::rdma {

struct LinkOptions {
  std::string device;             // as the probe names it ("mlx5_0", "rxe0")
  int gid_index = -1;             // rdma.gid_index; -1: the best RoCE entry
  uint32_t qps = 2;               // rdma.qps_per_peer
  uint32_t slots = 32;            // the receive ring: slots of slot_bytes
  uint64_t slot_bytes = 1 << 20;  // (the peer's must have the same shape)
  uint32_t send_depth = 128;      // work requests per QP
};

class RdmaLink {
 public:
  static Result<std::unique_ptr<RdmaLink>> Create(const LinkOptions& options);
  ~RdmaLink();
  RdmaLink(const RdmaLink&) = delete;
  RdmaLink& operator=(const RdmaLink&) = delete;

  // This end's QPs (with the PSNs of the next Connect: take it before
  // Connect, and send it to the peer) and ring.
  LinkParams Local() const;
  // Connects to the peer's end; an error names the QP and the state that
  // failed (the link is then unusable until the next Connect).
  Status Connect(const LinkParams& remote);
  bool connected() const { return connected_; }
  const LinkParams& remote() const { return remote_; }
  // The fabric an RdmaStream drives over this link once connected: RDMA
  // WRITE with immediate to the peer's ring (sources registered on first
  // use, through a registration cache), credits as SEND with immediate,
  // every QP's receive queue kept stocked, the link's one CQ polled. It
  // refers to the link, which must outlive it; Connect() again (recovery)
  // needs a new fabric. Same thread rules as RdmaStream.
  Result<std::unique_ptr<Fabric>> MakeFabric();
  // "2 QPs on rxe0 port 1 (RoCE, mtu 1024), ring 32 x 1 MiB".
  std::string Describe() const;

  struct Resources;  // the verbs handles and the ring (rdma_link.cc)

 private:
  explicit RdmaLink(std::unique_ptr<Resources> r);
  std::unique_ptr<Resources> r_;
  LinkParams remote_;
  bool connected_ = false;
  uint64_t generation_ = 0;
};

}  // namespace isometry::rdma
