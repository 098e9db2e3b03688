// Distributed instances and M:N redistribution (issue #18) as the node
// sees them; README, "Redistributing between jobs (M:N)".
//
// A distributed instance is a name, a Distribution of a global index space
// (redistribution/distribution.h), an element size, and per rank a local
// instance some session of that rank registered on this node. Ranks join
// one at a time (Node::JoinDistributed); every join must name the same
// distribution and element size. Names live per uid (sessions whose uid
// the kernel told us) or in one shared namespace for gRPC sessions (gRPC
// does not tell the daemon who its peer is), at most
// daemon.max_distributed_per_uid per namespace.
//
// Lifetime: the whole distributed instance ends when the session of any of
// its ranks ends; a redistribution using it at that moment fails with
// ABORTED naming the rank, and later ones with NOT_FOUND.
//
// Node::Redistribute(producer, consumer) is one transfer (an id that
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
#include <string>
#include <vector>

#include "redistribution/distribution.h"

namespace isometry {

// One rank's join (Node::JoinDistributed).
struct DistributedJoin {
  std::string name;  // 1..128 bytes, printable ASCII
  redistribution::DistributionSpec spec;
  uint64_t element_bytes = 0;  // = the local instance's field space bytes
  uint64_t rank = 0;
  uint64_t instance = 0;  // registered by the joining session, on this node
};

struct DistributedReport {
  std::string name;
  std::string distribution;  // Distribution::ToString()
  uint64_t element_bytes = 0;
  uint64_t ranks = 0;
  uint64_t joined = 0;  // complete when joined == ranks
};

// ---- the node's own records (node_impl.h holds a table of these) ----

class RedistributionOp;  // node_distributed.cc

struct DistributedMember {
  uint64_t session = 0;  // the joining session's public number
  uint64_t instance = 0;
};

struct DistributedInstance {
  std::string name;
  redistribution::Distribution dist;
  uint64_t element_bytes = 0;
  std::vector<std::optional<DistributedMember>> members;  // by rank
  uint64_t joined = 0;
  // Redistributions reading or writing it, aborted when it ends.
  std::vector<std::weak_ptr<RedistributionOp>> running;
};

// Ends `ops` with ABORTED because `session` (a rank's) ended. Called
// without the node lock.
void AbortRedistributions(const std::vector<std::shared_ptr<RedistributionOp>>& ops,
                          uint64_t session);

}  // namespace isometry
