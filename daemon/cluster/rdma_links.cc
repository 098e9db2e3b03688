// The RDMA link with each peer (cluster_impl.h, "RDMA links"): offered by
// the node whose name sorts first after each of its hellos, accepted by
// the other; both ends then hold an rdma::RdmaLink connected to the
// other's. Runs only where both nodes use RDMA (a device, and [rdma]
// enable not off); elsewhere the network line says why hops take TCP.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/cluster/secret.h"

namespace isometry {

namespace {

// While no RDMA data path runs hops, a connected link still leaves them
// on TCP; the line says so.
std::string Connected(const std::string& peer, const rdma::RdmaLink& link) {
  return StrCat("TCP: RDMA link with peer '", peer, "' connected (", link.Describe(),
                "), but this isometryd has no RDMA data path yet");
}

}  // namespace

rdma::LinkOptions Cluster::Impl::RdmaLinkOptions() const {
  rdma::LinkOptions o;
  o.device = node->rdma().devices.empty() ? "" : node->rdma().devices.front();
  o.gid_index = config.rdma.gid_index;
  o.qps = static_cast<uint32_t>(config.rdma.qps_per_peer);
  return o;
}

std::string Cluster::Impl::OfferRdma(Peer& p, const rdma::PeerRdma& theirs) {
  const std::string& name = p.config.name;
  if (!node->rdma().use || !theirs.usable) {
    return rdma::NetworkTransportWhy(node->rdma(), name, theirs);
  }
  if (self() > name) {
    absl::MutexLock lock(&rdma_mu);
    auto it = rdma_links.find(name);
    if (it != rdma_links.end() && it->second->connected()) return Connected(name, *it->second);
    return StrCat("TCP: waiting for peer '", name,
                  "' to offer its RDMA link (the node whose name sorts first offers it)");
  }
  auto fail = [&](const Status& s) {
    spdlog::warn("RDMA link with peer '{}' not connected: {}", ForLog(name),
                 ForLog(s.ToString(), 512));
    absl::MutexLock lock(&rdma_mu);
    rdma_links.erase(name);
    return StrCat("TCP: the RDMA link with peer '", name, "' failed: ", s.message());
  };
  auto made = rdma::RdmaLink::Create(RdmaLinkOptions());
  if (!made.ok()) return fail(made.status());
  std::shared_ptr<rdma::RdmaLink> link = std::move(*made);
  v1::PeerRdmaLink offer;
  cluster::ToProto(link->Local(), &offer);
  offer.set_nonce(RandomHex(16));
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
  Authorize(ctx, p, "ConnectRdma", offer);
  v1::PeerRdmaLink answer;
  grpc::Status g = p.stub->ConnectRdma(&ctx, offer, &answer);
  if (!g.ok()) return fail(cluster::FromGrpc(g, StrCat("ConnectRdma to peer '", name, "'")));
  std::string key;
  {
    absl::MutexLock lock(&mu);
    key = StateLocked(p).session_key;
  }
  auto remote = cluster::CheckedRdmaAnswer(key, offer.nonce(), answer, RdmaLinkOptions().qps);
  if (!remote.ok()) return fail(remote.status());
  if (Status s = link->Connect(*remote); !s.ok()) return fail(s);
  spdlog::info("RDMA link with peer '{}' connected: {}", ForLog(name), link->Describe());
  std::string line = Connected(name, *link);
  absl::MutexLock lock(&rdma_mu);
  rdma_links[name] = std::move(link);
  return line;
}

Result<v1::PeerRdmaLink> Cluster::Impl::AcceptRdma(const std::string& caller,
                                                   const v1::PeerRdmaLink& offer) {
  if (!node->rdma().use) {
    return FailedPrecondition("node '", self(), "' does not use RDMA: ", node->rdma().why);
  }
  if (self() < caller) {
    return FailedPrecondition("node '", self(), "' offers the RDMA link with '", caller,
                              "' itself (its name sorts first)");
  }
  const rdma::LinkOptions options = RdmaLinkOptions();
  ISO_ASSIGN_OR_RETURN(rdma::LinkParams remote, cluster::FromProto(offer, options.qps));
  ISO_ASSIGN_OR_RETURN(std::unique_ptr<rdma::RdmaLink> made, rdma::RdmaLink::Create(options));
  std::shared_ptr<rdma::RdmaLink> link = std::move(made);
  v1::PeerRdmaLink answer;
  cluster::ToProto(link->Local(), &answer);  // before Connect: its PSNs are the ones Connect uses
  ISO_RETURN_IF_ERROR(link->Connect(remote));
  std::string key;
  {
    absl::MutexLock lock(&mu);
    auto it = sessions.find(caller);
    if (it == sessions.end()) return absl::UnauthenticatedError("no session with the caller");
    key = it->second.key;
  }
  answer.set_mac(cluster::RdmaAnswerMac(key, offer.nonce(), answer));
  spdlog::info("RDMA link with peer '{}' connected (its offer): {}", ForLog(caller),
               link->Describe());
  const std::string line = Connected(caller, *link);
  {
    absl::MutexLock lock(&rdma_mu);
    rdma_links[caller] = std::move(link);
  }
  if (Peer* p = FindPeer(caller)) {
    absl::MutexLock lock(&mu);
    StateLocked(*p).network = line;
  }
  return answer;
}

}  // namespace isometry
