// The cluster layer of isometryd: peer daemons, their topology, and copies
// whose ends live on different nodes (DESIGN.md, "Cluster").
//
//  - Peers: one loop per configured peer says hello over gRPC (protocol
//    version; HMAC proofs of the shared secret both ways; topology and data
//    address in the reply), opens the data connections, pings every
//    keepalive_ms (the round trip shows in `isoctl peers`), and after
//    peer_timeout_ms of silence or a broken data connection declares the
//    peer down: every transfer involving it fails with UNAVAILABLE and frees
//    its buffers; then it says hello again with backoff (0.1 s doubling to
//    5 s), so a restarted peer serves new copies without restarting anyone.
//  - Cross-node copies: the initiating node plans the whole path over the
//    two nodes' graphs joined by the network edge, then sets up the halves
//    (the receiving one first): its own through its runtime, a peer's with
//    StartHalf. Each node runs the hops that live on it; the initiator
//    learns a remote half's end with AwaitHalf. The first failure of any
//    half aborts the others; the copy ends when every half has ended.
//    A third-party copy (this node asks B to send to C) has no local half.
//    A datatype copy moves packed bytes: each node packs or unpacks its
//    own end by that end's canonical form, which the initiator sends to
//    the other node once per (peer, form hash) (form_exchange.h).
#pragma once

#include <memory>

#include "config/runtime_config.h"
#include "daemon/cluster/fault_injection.h"
#include "daemon/node/node.h"
#include "isometry.grpc.pb.h"

namespace isometry {

class Cluster final : public CrossCopier {
 public:
  // Reads the secret and the TLS files and binds the data listener;
  // starts nothing.
  // `faults`: what tests inject (daemon/cluster/fault_injection.h); none in
  // production.
  static Result<std::unique_ptr<Cluster>> Create(const Config& config,
                                                 const FaultInjection& faults);
  ~Cluster() override;

  // For Node::Create: the data plane the network channel of each peer
  // uses; valid while the cluster lives.
  ChannelContext channel_context();
  // Serves peers and starts the peer loops (after the node exists).
  void Start(Node* node);
  // Stops the loops and the data plane; cross-node transfers fail. Call
  // before the node is destroyed.
  void Stop();

  grpc::Service* service();
  // Its full name ("isometry.peer.v4.IsometryPeer"), which health checks
  // and reflection answer for.
  static const char* service_name();
  // What the peer service's TCP port listens with: mutual TLS when
  // [cluster.tls] is set, else insecure (the shared secret's MACs
  // authenticate the calls).
  std::shared_ptr<grpc::ServerCredentials> server_credentials() const;
  v1::ListPeersResponse ListPeers() const;

  Result<std::shared_ptr<CrossTransfer>> Copy(CrossCopySpec spec,
                                              std::function<void(Status)> done) override;
  bool KnowsNode(const std::string& node) const override;
  FormExchangeStats FormStats() const override;
  std::vector<HalfReport> Halves(uint64_t id, bool running_only) const override;
  std::vector<std::string> LinkEdges(const std::string& peer) const override;
  Result<PlanReport> Explain(const std::string& src_memory, const Layout& src_layout,
                             const std::string& dst_memory, const Layout& dst_layout,
                             const Box& bounds, const FieldSpace& fields) override;
  Result<PlanReport> ExplainForms(const std::string& src_memory, const std::string& dst_memory,
                                  const EndForm& src, const EndForm& dst) override;
  Result<std::vector<DistributedRanks>> QueryDistributed(const std::string& key,
                                                         const std::string& grant_digest) override;
  Result<std::shared_ptr<CrossTransfer>> RunRedistributePart(
      const std::string& node, const RedistributePart& part,
      std::function<void(Status, uint64_t)> done) override;
  void AnnounceDistributedEnded(const std::string& key, const std::set<std::string>& peers,
                                const std::string& why) override;

  struct Impl;

 private:
  explicit Cluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace isometry
