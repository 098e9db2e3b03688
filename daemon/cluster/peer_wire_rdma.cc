#include <cstring>

#include "daemon/cluster/peer_wire.h"
#include "daemon/cluster/secret.h"

namespace isometry::cluster {

void ToProto(const rdma::LinkParams& p, peer_api::PeerRdmaLink* out) {
  for (const rdma::QpAddress& q : p.qps) {
    peer_api::PeerRdmaQp* o = out->add_qps();
    o->set_qpn(q.qpn);
    o->set_psn(q.psn);
    o->set_lid(q.lid);
    o->set_gid(reinterpret_cast<const char*>(q.gid.raw), sizeof q.gid.raw);
    o->set_mtu_bytes(static_cast<uint32_t>(rdma::MtuBytes(q.mtu)));
  }
  peer_api::PeerRdmaRing* r = out->mutable_ring();
  r->set_addr(p.ring.addr);
  r->set_rkey(p.ring.rkey);
  r->set_slot_bytes(p.ring.slot_bytes);
  r->set_slots(p.ring.slots);
  r->set_region_addr(p.ring.region_addr);
  r->set_region_length(p.ring.region_length);
  out->set_generation(p.generation);
}

Result<rdma::LinkParams> FromProto(const peer_api::PeerRdmaLink& in, uint32_t qps) {
  rdma::LinkParams p;
  for (int i = 0; i < in.qps_size(); ++i) {
    const peer_api::PeerRdmaQp& q = in.qps(i);
    rdma::QpAddress a;
    a.qpn = q.qpn();
    a.psn = q.psn();
    if (q.lid() > 0xFFFF) return InvalidArgument("RDMA link: qps[", i, "] has LID ", q.lid());
    a.lid = static_cast<uint16_t>(q.lid());
    if (q.gid().size() != sizeof a.gid.raw) {
      return InvalidArgument("RDMA link: qps[", i, "] has a GID of ", q.gid().size(),
                             " bytes (16)");
    }
    std::memcpy(a.gid.raw, q.gid().data(), sizeof a.gid.raw);
    if (!rdma::MtuFromBytes(q.mtu_bytes(), a.mtu)) {
      return InvalidArgument("RDMA link: qps[", i, "] has an MTU of ", q.mtu_bytes(),
                             " bytes (256, 512, 1024, 2048 or 4096)");
    }
    p.qps.push_back(a);
  }
  const peer_api::PeerRdmaRing& r = in.ring();
  p.ring = {r.addr(), r.rkey(), r.slot_bytes(), r.slots(), r.region_addr(), r.region_length()};
  p.generation = in.generation();
  ISO_RETURN_IF_ERROR(rdma::ValidateLinkParams(p, qps));
  return p;
}

std::string RdmaAnswerMac(std::string_view key, std::string_view nonce,
                          const peer_api::PeerRdmaLink& answer) {
  peer_api::PeerRdmaLink bare = answer;
  bare.clear_mac();
  return Hmac(key, {"rdma", std::string(nonce), bare.SerializeAsString()});
}

Result<rdma::LinkParams> CheckedRdmaAnswer(std::string_view key, std::string_view nonce,
                                           const peer_api::PeerRdmaLink& answer, uint32_t qps) {
  if (answer.mac().empty() || !SameSecret(RdmaAnswerMac(key, nonce, answer), answer.mac())) {
    return absl::UnauthenticatedError(
        "the peer's RDMA answer does not carry the session's proof (altered, or not for this "
        "request)");
  }
  return FromProto(answer, qps);
}

}  // namespace isometry::cluster
