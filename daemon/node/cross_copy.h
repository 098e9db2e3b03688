// What the node hands to the cluster layer for a copy whose ends are not
// both on this node (daemon/cluster/cluster.h implements CrossCopier).
// Kept protocol-free so the node does not depend on gRPC.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/copy_options.h"
#include "core/status.h"
#include "daemon/node/node_distributed.h"
#include "daemon/runtime/runtime.h"

namespace isometry {

// A memory by cluster-wide name: "node:memory", or "memory" for one of
// this node's (`self`).
struct NodeMemory {
  std::string node, memory;
};
inline NodeMemory SplitNodeMemory(const std::string& name, const std::string& self) {
  const size_t colon = name.find(':');
  if (colon == std::string::npos) return {self, name};
  return {name.substr(0, colon), name.substr(colon + 1)};
}

// A cross-node copy's end on this node that touches watched regions of a
// pool allocation (docs/guides/active-access.md, "Active Access"): a put's half writes into a
// scratch buffer (the end's `local` already points there), a get's half
// reads the allocation. Once the half's runtime copy has ended with `s`,
// Finish hands the access to the allocation's watch, which applies and
// logs it piece by piece; `done` runs once with the half's final outcome,
// after the log entries are published (or at once with `s` when it is an
// error: nothing of a put is then applied). Made by the node; the cluster
// layer only calls Finish, once.
class ActiveEnd {
 public:
  virtual ~ActiveEnd() = default;
  virtual void Finish(Status s, std::function<void(Status)> done) = 0;
};

// Who asked for a cross-node copy, for the log entries of a watched end
// (0s: unknown).
struct CopySource {
  uint64_t session = 0;   // the client's session on the initiating node
  uint64_t transfer = 0;  // the copy's transfer id there
};

// One end of a cross-node copy.
struct CrossEnd {
  std::string node;  // empty: this node
  // This node's end. Of a datatype copy, local.form is set on
  // both ends, the other node's too (its form, to send there), and
  // `shape` is StreamShape of the stream's bytes.
  InstanceRef local;
  std::shared_ptr<const void> keep;   // keeps this node's allocation alive
  std::shared_ptr<ActiveEnd> active;  // this node's end touches watched regions
  // Another node's end: allocation (published there) or memory + file;
  // shape in `shape`.
  uint64_t allocation = 0;
  uint64_t offset = 0;
  std::string memory;  // without the node prefix
  std::string file;
  // Instead of allocation or file: rank `distributed_rank`'s local
  // instance of distributed instance `distributed` (namespace + name) on
  // that node, a redistribution piece's destination (`memory` names its
  // memory there).
  std::string distributed;
  uint64_t distributed_rank = 0;
  InstanceShape shape;
};

struct CrossCopySpec {
  CrossEnd src, dst;
  std::optional<Box> box;
  CopyOptions options;
  std::string qos_class;  // the session's traffic class here; peers map it
  CopySource source;
};

struct PlanHopReport {
  std::string src_memory, dst_memory, channel, src_layout, dst_layout;
  uint64_t request_bytes = 0;
  uint64_t buffer_bytes = 0;
  double predicted_bytes_per_s = 0;
  uint64_t run_bytes = 0;  // contiguous runs of the hop (0: not computed)
};
// A path the planner could have taken (planner/alternatives.h): hops with
// their layouts and the model's rates (request and buffer sizes 0).
struct PlanAlternativeReport {
  std::string text;
  std::vector<PlanHopReport> hops;
  double predicted_bytes_per_s = 0;  // 0: the model rejects it
  bool chosen = false;
  std::string verdict;  // chosen: what limits it; else why it was not taken
};
struct PlanReport {
  std::string algorithm;
  std::vector<PlanHopReport> hops;
  std::string text;
  double predicted_bytes_per_s = 0;
  uint64_t chunks = 0;
  uint64_t chunk_bytes = 0;
  std::string why;  // datatype plans: the forms and what their runs cost
  std::vector<PlanAlternativeReport> alternatives;  // the path first
  uint64_t alternatives_weighed = 0;                // candidates besides the path
};

// One hop of a transfer and how far it is (isoctl transfers).
struct HopReport {
  std::string src_memory, dst_memory, channel, src_layout, dst_layout;
  uint64_t chunks_done = 0;
  uint64_t chunks_total = 0;
};

// A half of a cross-node copy that runs on this node, for `isoctl
// transfers` on either node: `id` is the copy's transfer id on the node
// that started it (0: an initiator too old to send it), so the same id
// finds both halves. Memory names are node-qualified ("a:sys0").
struct HalfReport {
  uint64_t id = 0;
  std::string initiator;  // the node that started the copy
  std::string partner;    // the node at the other end of the network hop
  bool sending = false;
  bool forwarded = false;  // the whole copy runs here (both ends on this node)
  std::string relay_to;    // a relay: receives from partner, sends on to this node
  bool remote = false;     // started by another node
  bool finished = false;
  Status status;
  int priority = 0;
  uint64_t bytes = 0;
  double elapsed_s = 0;
  std::string path;             // the whole path, both nodes' hops
  std::vector<HopReport> hops;  // this node's hops
};

// A running cross-node copy, as the initiating node sees it.
class CrossTransfer {
 public:
  virtual ~CrossTransfer() = default;
  virtual void Cancel() = 0;
  // Ends it with `why` (a cancellation by default).
  virtual void Abort(const Status& why) {
    (void)why;
    Cancel();
  }
  virtual std::string PathText() const = 0;
  virtual uint64_t bytes() const = 0;
  virtual std::chrono::steady_clock::time_point started() const = 0;
  // The plan's predicted bytes/s over the joined graph (0: no estimate).
  virtual double predicted_bytes_per_s() const = 0;
};

// Exchange-once of canonical forms with peers (daemon/cluster/
// form_exchange.h), for `isoctl status`.
struct FormExchangeStats {
  uint64_t sent = 0, referred = 0, resent = 0;            // as sender
  uint64_t received = 0, memo_hits = 0, memo_misses = 0;  // as receiver
  uint64_t memo_bytes = 0;
};

class CrossCopier {
 public:
  virtual ~CrossCopier() = default;
  virtual FormExchangeStats FormStats() const { return {}; }
  // The halves of cross-node copies this node runs (or ran in the last
  // minutes), whoever started them: those of copy `id` only (0: all), and
  // only those still running if `running_only`. Takes the cluster's lock:
  // never call it holding the node's.
  virtual std::vector<HalfReport> Halves(uint64_t id, bool running_only) const {
    (void)id;
    (void)running_only;
    return {};
  }
  // The memories the network channel with `peer` connects, as
  // "sys0->b:sys0" (both directions); empty while the peer's graph is not
  // known.
  virtual std::vector<std::string> LinkEdges(const std::string& peer) const {
    (void)peer;
    return {};
  }
  // Plans and starts the copy; `done` runs once with its final status.
  // Errors (unknown or unreachable node, bad ends) return here.
  virtual Result<std::shared_ptr<CrossTransfer>> Copy(CrossCopySpec spec,
                                                      std::function<void(Status)> done) = 0;
  // Whether `node` names a peer of this node's cluster.
  virtual bool KnowsNode(const std::string& node) const = 0;
  // The plan of a copy between "node:memory" memories (isoctl plan).
  virtual Result<PlanReport> Explain(const std::string& src_memory, const Layout& src_layout,
                                     const std::string& dst_memory, const Layout& dst_layout,
                                     const Box& bounds, const FieldSpace& fields) = 0;
  // The plan of a datatype copy between "node:memory" memories whose ends
  // pack as `src` and `dst` (isoctl plan with a datatype).
  virtual Result<PlanReport> ExplainForms(const std::string& src_memory,
                                          const std::string& dst_memory, const EndForm& src,
                                          const EndForm& dst) = 0;

  // ---- distributed instances across nodes (node_distributed.h) ----

  // The ranks every peer that is up holds of distributed instance `key`
  // (namespace + name); an error names a peer that is up but did not
  // answer.
  virtual Result<std::vector<DistributedRanks>> QueryDistributed(
      const std::string& key, const std::string& grant_digest) = 0;
  // Runs `part` on peer `node`; `done` runs once with the part's end (its
  // status and the bytes its pieces moved). Cancel() aborts it there.
  virtual Result<std::shared_ptr<CrossTransfer>> RunRedistributePart(
      const std::string& node, const RedistributePart& part,
      std::function<void(Status, uint64_t)> done) = 0;
  // Tells `peers` that distributed instance `key` ended here (best
  // effort: a peer that is down learns nothing, and a redistribution
  // reaching it fails on the missing rank).
  virtual void AnnounceDistributedEnded(const std::string& key, const std::set<std::string>& peers,
                                        const std::string& why) = 0;
};

}  // namespace isometry
