// Membership through etcd ([cluster.etcd]; docs/guides/cluster.md, "Membership through etcd"):
// this node's record under the configured prefix, held by a lease it keeps alive, and the
// other nodes' records turned into peers (Cluster::Impl::AddPeer) and,
// when their keys go, peers that left (RemovePeer).
//
// etcd says where a node is, never that it may be trusted: a peer learnt
// here says hello and is checked exactly like a [[peer]] (the shared
// secret's proofs and/or its TLS certificate). An unreachable etcd changes
// no peer: the ones known stay, pinged directly; discovery resumes when
// etcd answers again.
#pragma once

#include <memory>

#include "daemon/cluster/cluster_impl.h"

namespace isometry::cluster {

class EtcdMembership {
 public:
  // Checks the configuration; contacts nothing yet.
  static Result<std::unique_ptr<EtcdMembership>> Create(Cluster::Impl* impl);
  virtual ~EtcdMembership() = default;

  // Registers this node and follows the prefix on a thread of its own.
  virtual void Start() = 0;
  // Revokes the lease (this node's record goes now, not after the TTL),
  // then joins. Idempotent.
  virtual void Stop() = 0;
  // Reads the prefix again soon (at most every 100 ms, however often this
  // is called): a hello from a name not seen yet may come from a node that
  // registered since the last read.
  virtual void Poke() = 0;
};

// A record's value: "node=<id>\naddress=<host:port>\nidentity=<name>\n".
std::string EtcdRecord(uint32_t node, const std::string& address, const std::string& identity);
// The peer a record names, or why it is not one (a record anyone with
// write access to etcd could have written: checked like any input).
Result<PeerConfig> ParseEtcdRecord(std::string_view name, std::string_view value);

}  // namespace isometry::cluster
