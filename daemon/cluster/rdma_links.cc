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
#include "daemon/node/introspection.h"

namespace isometry {

namespace {

// A connected link carries the network hops of direct copies whose chunks
// fit in a ring slot; the line says which go over TCP still.
std::string Connected(const std::string& peer, const rdma::RdmaLink& link) {
  return StrCat("RDMA: link with peer '", peer, "' connected (", link.Describe(),
                "); copies whose chunks fit in a ring slot take it, relayed copies TCP");
}

}  // namespace

rdma::LinkOptions Cluster::Impl::RdmaLinkOptions() const {
  rdma::LinkOptions o;
  o.device = node->introspection().rdma().devices.empty()
                 ? ""
                 : node->introspection().rdma().devices.front();
  o.gid_index = config.rdma.gid_index;
  o.qps = static_cast<uint32_t>(config.rdma.qps_per_peer);
  o.slots = config.rdma.ring_slots;
  o.slot_bytes = config.rdma.slot_bytes();
  return o;
}

std::string Cluster::Impl::OfferRdma(Peer& p, const rdma::PeerRdma& theirs) {
  const std::string& name = p.config.name;
  if (!node->introspection().rdma().use || !theirs.usable) {
    return rdma::NetworkTransportWhy(node->introspection().rdma(), name, theirs);
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
    net_routes->Detach(name);
    return StrCat("TCP: the RDMA link with peer '", name, "' failed: ", s.message());
  };
  auto made = rdma::RdmaLink::Create(RdmaLinkOptions());
  if (!made.ok()) return fail(made.status());
  std::shared_ptr<rdma::RdmaLink> link = std::move(*made);
  peer_api::PeerRdmaLink offer;
  cluster::ToProto(link->Local(), &offer);
  offer.set_nonce(RandomHex(16));
  grpc::ClientContext ctx;
  cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
  Authorize(ctx, p, "ConnectRdma", offer);
  peer_api::PeerRdmaLink answer;
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
  return AttachRdma(name, link);
}

Result<peer_api::PeerRdmaLink> Cluster::Impl::AcceptRdma(const std::string& caller,
                                                         const peer_api::PeerRdmaLink& offer) {
  if (!node->introspection().rdma().use) {
    return FailedPrecondition("node '", self(),
                              "' does not use RDMA: ", node->introspection().rdma().why);
  }
  if (self() < caller) {
    return FailedPrecondition("node '", self(), "' offers the RDMA link with '", caller,
                              "' itself (its name sorts first)");
  }
  const rdma::LinkOptions options = RdmaLinkOptions();
  ISO_ASSIGN_OR_RETURN(rdma::LinkParams remote, cluster::FromProto(offer, options.qps));
  ISO_ASSIGN_OR_RETURN(std::unique_ptr<rdma::RdmaLink> made, rdma::RdmaLink::Create(options));
  std::shared_ptr<rdma::RdmaLink> link = std::move(made);
  peer_api::PeerRdmaLink answer;
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
  const std::string line = AttachRdma(caller, link);
  if (Peer* p = FindPeer(caller)) {
    absl::MutexLock lock(&mu);
    StateLocked(*p).network = line;
  }
  return answer;
}

std::string Cluster::Impl::AttachRdma(const std::string& peer,
                                      const std::shared_ptr<rdma::RdmaLink>& link) {
  ChannelConfig cc;
  cc.name = StrCat("rdma:", peer);
  cc.request_bytes = config.rdma.slot_bytes();
  const rdma::LinkOptions options = RdmaLinkOptions();
  auto fabric = link->MakeFabric();
  std::weak_ptr<rdma::RdmaLink> weak = link;
  auto on_error = [this, peer, weak](const Status& s) {
    // On the channel's thread: the rest on the cluster's worker.
    Post([this, peer, weak, s] {
      auto l = weak.lock();
      if (!l) return;  // replaced already
      DropRdma(peer, l.get(),
               Unavailable("the RDMA link with peer '", peer, "' broke: ", s.message()),
               /*offer_again=*/true);
    });
  };
  Result<std::unique_ptr<rdma::RdmaChannel>> channel =
      fabric.ok()
          ? rdma::MakeRdmaChannel(cc, *std::move(fabric), {options.slots, options.slot_bytes},
                                  options.qps, nullptr, on_error)
          : Result<std::unique_ptr<rdma::RdmaChannel>>(fabric.status());
  absl::MutexLock lock(&rdma_mu);
  if (!channel.ok()) {
    spdlog::warn("RDMA link with peer '{}' connected, but its channel failed: {}", ForLog(peer),
                 ForLog(channel.status().ToString(), 512));
    rdma_links.erase(peer);
    net_routes->Detach(peer);
    return StrCat("TCP: the RDMA link with peer '", peer,
                  "' connected, but its channel failed: ", channel.status().message());
  }
  rdma_links[peer] = link;
  net_routes->Attach(peer, *std::move(channel), options.slot_bytes, link);
  return Connected(peer, *link);
}

void Cluster::Impl::DropRdma(const std::string& peer, const rdma::RdmaLink* link, const Status& why,
                             bool offer_again) {
  {
    absl::MutexLock lock(&rdma_mu);
    auto it = rdma_links.find(peer);
    // A newer link replaced this one meanwhile: nothing to drop.
    if (it == rdma_links.end() || (link && it->second.get() != link)) return;
    rdma_links.erase(it);
    net_routes->Detach(peer);
  }
  spdlog::warn("{}; new copies with peer '{}' take TCP until a new RDMA link connects",
               ForLog(std::string(why.message()), 512), ForLog(peer));
  Peer* p = FindPeer(peer);
  if (!p) return;
  bool up;
  {
    absl::MutexLock lock(&mu);
    StateLocked(*p).network =
        StrCat("TCP: ", why.message(), " (RDMA again once a new link connects)");
    up = StateLocked(*p).up;
  }
  // Only the node whose name sorts first offers; the other waits for it
  // (its refusals of routed copies make that node drop and offer).
  if (!offer_again || !up || self() > peer) return;
  {
    absl::MutexLock lock(&rdma_mu);
    Clock::time_point& last = rdma_offered_again[peer];
    if (Clock::now() - last < std::chrono::seconds(10)) return;  // until its next hello
    last = Clock::now();
  }
  Post([this, p] {
    // Both nodes used RDMA when the link connected.
    const std::string line = OfferRdma(*p, {true, true, ""});
    absl::MutexLock lock(&mu);
    StateLocked(*p).network = line;
  });
}

std::string Cluster::Impl::NetworkLine(const std::string& peer, std::string line) const {
  absl::MutexLock lock(&rdma_mu);
  auto it = rdma_links.find(peer);
  if (it != rdma_links.end() && it->second->connected()) return Connected(peer, *it->second);
  return line;
}

void Cluster::Impl::RdmaRefused(const std::string& peer, const Status& why) {
  if (why.message().find(rdma::kNoLinkHere) == std::string_view::npos) return;
  DropRdma(peer, nullptr,
           Unavailable("peer '", peer,
                       "' has no RDMA link with this node (it refused a copy routed over it)"),
           /*offer_again=*/true);
}

void Cluster::Impl::RouteOverRdma(const std::shared_ptr<Half>& h, RemotePart& part, uint32_t tag) {
  if (part.relays() || (part.sending && tag == 0)) return;
  if (!part.sending && !net_routes->Attached(part.peer)) return;  // TCP
  std::weak_ptr<Half> weak = h;
  Impl* impl = this;
  part.on_grid = [impl, weak, routes = net_routes, peer = part.peer, key = part.key,
                  sending = part.sending, tag](uint64_t chunks, uint64_t wire) -> Status {
    uint32_t routed = tag;
    if (sending) {
      ISO_RETURN_IF_ERROR(routes->RouteSending(peer, key, tag, chunks));
    } else {
      std::string why;
      ISO_ASSIGN_OR_RETURN(routed, routes->RouteReceiving(peer, key, chunks, wire, &why));
      if (routed == 0) {
        spdlog::debug("copy {}: the network hop from peer '{}' takes TCP: {}", key, ForLog(peer),
                      ForLog(why, 512));
        return OkStatus();
      }
    }
    if (auto half = weak.lock()) {
      absl::MutexLock lock(&impl->mu);
      half->rdma_tag = routed;
    }
    return OkStatus();
  };
}

}  // namespace isometry
