// Reliable-connected queue pairs: creation and the state changes that
// connect two of them (RESET -> INIT -> RTR -> RTS), and the reset that
// recovers one after a completion error. What the two ends exchange
// (QpAddress) travels in the peer service; nothing here talks to a peer.
//
// Thread safety: none of these may run concurrently on the same QP.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "core/status.h"
#include "net/rdma/verbs.h"

namespace isometry::rdma {

// What the other end needs to reach a QP.
struct QpAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // first packet sequence number (24 bits)
  uint16_t lid = 0;  // InfiniBand; 0 on RoCE
  ibv_gid gid{};     // RoCE (and routed IB)
  ibv_mtu mtu = IBV_MTU_1024;
};

// The local port a QP uses, as ResolvePort found it.
struct PortAddress {
  uint8_t port = 1;
  int gid_index = 0;
  uint16_t lid = 0;
  ibv_gid gid{};
  ibv_mtu active_mtu = IBV_MTU_1024;
  bool roce = false;
};

// The first ACTIVE port of `context` and its GID entry: `gid_index` when
// >= 0, else the first RoCE v2 entry (then RoCE v1, then entry 0).
Result<PortAddress> ResolvePort(ibv_context* context, int gid_index);

struct CompletionQueue {
  CompChannelPtr channel;  // for blocking waits; may be null (polling only)
  CqPtr cq;
};
Result<CompletionQueue> CreateCq(ibv_context* context, int entries, bool with_channel);

// An RC QP in RESET with room for `send_wr` / `recv_wr` work requests.
Result<QpPtr> CreateRcQp(ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, uint32_t send_wr,
                         uint32_t recv_wr);

// Takes a QP in RESET to RTS, connected to `remote`: INIT with remote
// read and write allowed, RTR toward `remote` (path MTU: the smaller of
// both ends'), RTS with `local_psn`. An error names the state and errno.
Status ConnectRc(ibv_qp* qp, const PortAddress& local, uint32_t local_psn, const QpAddress& remote);

// Back to RESET (from ERROR after a failed completion), to be connected
// again with ConnectRc; work requests still queued are flushed.
Status ResetQp(ibv_qp* qp);

// This QP's address for the other end.
QpAddress AddressOf(const ibv_qp* qp, const PortAddress& local, uint32_t psn);

// "remote access error (status 10, vendor error 0x88) on wr 7" from a work
// completion, for a failed transfer's message.
std::string DescribeCompletion(const ibv_wc& wc);

}  // namespace isometry::rdma
