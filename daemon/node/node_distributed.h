// Distributed instances and M:N redistribution (issue #18) as the node
// sees them; docs/guides/redistribution.md, "Redistributing between jobs (M:N)".
//
// A distributed instance is a name, a Distribution of a global index space
// (redistribution/distribution.h), an element size, and per rank a local
// instance some session of that rank registered on this node. Ranks join
// one at a time (node::Distributed::JoinDistributed); every join must name the same
// distribution and element size. Names live per uid (sessions whose uid
// the kernel told us) or in one shared namespace for gRPC sessions (gRPC
// does not tell the daemon who its peer is), at most
// daemon.max_distributed_per_uid per namespace.
//
// Lifetime: the whole distributed instance ends when the session of any of
// its ranks ends; a redistribution using it at that moment fails with
// ABORTED naming the rank, and later ones with NOT_FOUND.
//
// node::Distributed::Redistribute(producer, consumer) is one transfer (an id that
// GetTransfer, Wait, Cancel and ListTransfers know): for each producer
// rank, ASPEN computes what it shares with every consumer rank; each
// non-empty piece becomes a packed copy between the two local instances,
// both ends enumerating the piece's elements in row-major global order, so
// the two local layouts only change where each element lies. At most
// daemon.redistribute_concurrency piece copies run at once; the first
// failure cancels the rest and ends the whole with that failure.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/instance.h"
#include "redistribution/distribution.h"

namespace isometry {

// One rank's join (node::Distributed::JoinDistributed).
struct DistributedJoin {
  std::string name;  // 1..128 bytes, printable ASCII
  redistribution::DistributionSpec spec;
  uint64_t element_bytes = 0;  // = the local instance's field space bytes
  uint64_t rank = 0;
  uint64_t instance = 0;  // registered by the joining session, on this node
  std::string grant;      // gRPC namespace: the job's secret (see DistributedGrant)
};

struct DistributedReport {
  std::string name;
  std::string distribution;  // Distribution::ToString()
  uint64_t element_bytes = 0;
  uint64_t ranks = 0;
  uint64_t joined = 0;  // complete when joined == ranks
};

// ---- across nodes (the cluster layer carries these between daemons) ----
//
// A distributed instance may have ranks on several nodes: each node keeps
// the ranks that joined there, and the node a Redistribute call reaches
// (the coordinator) asks every peer for theirs (QueryDistributed). Every
// rank must have joined on exactly one node. The coordinator then asks
// each node holding producer ranks to run those ranks' pieces (a part);
// a piece whose consumer rank lives on another node is a cross-node
// datatype copy into that rank's local instance. When a rank's session
// ends, its node ends the instance and tells its peers, which end theirs.

// A rank's local instance, where it lies.
struct RankPlace {
  uint64_t rank = 0;
  std::string node;    // empty: this node
  std::string memory;  // its memory on that node ("sys0", "proc")
  InstanceShape shape;
  bool empty = false;  // the rank holds no element
};

// One node's ranks of a distributed instance (QueryDistributed).
struct DistributedRanks {
  std::string node;  // who answered
  bool found = false;
  redistribution::DistributionSpec spec;
  uint64_t element_bytes = 0;
  std::vector<RankPlace> ranks;
  std::string grant_digest;  // DistributedInstance::grant_digest there
};

// The pieces of the producer ranks on one node (RedistributePart).
struct RedistributePart {
  uint64_t key = 0;
  std::string producer, consumer;  // namespace + name
  redistribution::DistributionSpec producer_spec, consumer_spec;
  uint64_t element_bytes = 0;
  std::vector<RankPlace> consumers;  // every consumer rank, node set
  uint32_t concurrency = 1;          // piece copies at once (the node's own bound caps it)
};

// ---- the node's own records (node_impl.h holds a table of these) ----

class CrossTransfer;  // cross_copy.h

struct DistributedMember {
  uint64_t session = 0;  // the joining session's public number
  uint64_t instance = 0;
};

struct DistributedInstance {
  std::string name;
  redistribution::Distribution dist;
  redistribution::DistributionSpec spec;  // what made `dist` (sent to peers)
  uint64_t element_bytes = 0;
  std::vector<std::optional<DistributedMember>> members;  // by rank
  uint64_t joined = 0;
  // Redistributions (or parts of one) reading or writing it, aborted when
  // it ends.
  std::vector<std::weak_ptr<CrossTransfer>> running;
  // Other nodes known to hold ranks of it (learned by QueryDistributed,
  // asked or answered): told when it ends here, and only they can end it.
  std::set<std::string> peers;
  // gRPC namespace: SHA-256 of the grant it was made with (empty: made
  // without one, so only its member sessions may join or redistribute it).
  std::string grant_digest;
};

// The namespace of gRPC sessions' distributed instances (keys start so).
inline constexpr std::string_view kGrpcDistributedNamespace = "grpc/";

// Who may join or redistribute a distributed instance of the gRPC
// namespace, where sessions have no uid to tell jobs apart: the sessions
// that joined it, and any session presenting the grant (the job's secret)
// it was made with. In a uid namespace every session of the uid may, as
// for its other resources.
//
// The digest of `grant` (SHA-256; empty for an empty grant), INVALID_ARGUMENT
// for a grant shorter than 16 or longer than 256 bytes.
Result<std::string> DistributedGrantDigest(const std::string& grant);
// Whether `digest` (of a presented grant) equals `d`'s, in constant time;
// never true for an instance made without a grant.
bool GrantMatches(const DistributedInstance& d, const std::string& digest);
bool GrantDigestsEqual(const std::string& a, const std::string& b);
// Whether a session (its public number) joined a rank of `d`.
bool IsMember(const DistributedInstance& d, uint64_t session);

// The grants a Redistribute call presents for the sides it joined no rank
// of (RedistributeRequest.producer_grant, consumer_grant).
struct RedistributeGrants {
  std::string producer, consumer;
};

// A distributed instance that ended here, and the peers to tell.
struct EndedDistributed {
  std::string key;  // namespace + name
  std::set<std::string> peers;
};

// Ends `ops` with `why`. Called without the node lock.
void AbortRedistributions(const std::vector<std::shared_ptr<CrossTransfer>>& ops,
                          const Status& why);

}  // namespace isometry
