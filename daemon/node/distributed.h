// Distributed instances and M:N redistribution, for clients and for peers (node_distributed.cc,
// node_redistribute*.cc).
// Node::distributed() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Distributed {
 public:
  explicit Distributed(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // Distributed instances and M:N redistribution (node_distributed.h).
  // A rank joins `join.name` with its local instance; the answer says how
  // many ranks have joined. INVALID_ARGUMENT when the join disagrees with
  // earlier ones or the instance does not fit the rank's local extents,
  // ALREADY_EXISTS for a rank joined twice, UNIMPLEMENTED for storage that
  // is not strided or lives on another node.
  Result<DistributedReport> JoinDistributed(SessionRef session, const DistributedJoin& join);

  // Starts the redistribution of `producer` into `consumer` (both complete,
  // same global extents and element size, the caller a rank of either) as
  // one transfer owned by the caller's session; `on_done` as for Copy. A
  // gRPC session (no uid) must present the grant of a side it is no rank
  // of (PERMISSION_DENIED otherwise).
  Result<uint64_t> Redistribute(SessionRef session, const std::string& producer,
                                const std::string& consumer, const RedistributeGrants& grants = {},
                                TransferCallback on_done = nullptr);

  // For peers (the cluster layer), with distributed instances named by
  // namespace + name: the ranks joined here; the pieces of this node's
  // producer ranks that node `caller` asks for (`done` once, with the
  // bytes moved); the end of an instance a rank on `caller` left.
  // A gRPC-namespace instance is answered only to a query carrying the
  // digest of the grant it was made with (else: not found here).
  DistributedRanks DistributedRanksForPeer(const std::string& caller, const std::string& key,
                                           const std::string& grant_digest);

  Result<std::shared_ptr<CrossTransfer>> RunPartForPeer(
      const std::string& caller, const RedistributePart& part,
      const std::function<void(Status, uint64_t)>& done);

  void DistributedEndedByPeer(const std::string& caller, const std::string& key,
                              const std::string& why);

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
