// Copies: queue them, follow them to the end, explain their paths; and the ends peers ask for
// (node_copies.cc, node_explain.cc, node_datatypes.cc, node.cc).
// Node::copies() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Copies {
 public:
  explicit Copies(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // This node's end of a cross-node copy a peer asked for: a published
  // allocation, or a file of a DSK memory (spec.memory without prefix).
  // With `end_form` (a datatype copy's end, its form checked), spec.shape is
  // ignored: the end is StreamShape(end_form->bytes) over end_form->span bytes.
  // With `access`, an allocation end that touches watched regions is
  // served as an active put (the half receives) or get (it sends): its
  // CrossEnd::active finishes the half through the watch; a region that
  // denies the access refuses the half (PERMISSION_DENIED).
  Result<CrossEnd> ResolveForPeer(const InstanceSpec& spec,
                                  std::shared_ptr<const EndForm> end_form = nullptr,
                                  const PeerAccess* access = nullptr) const;

  // Queues a copy between two instances the session registered. `on_done`
  // (optional) runs once when it ends, instead of the session callback:
  // the caller answers this transfer itself.
  // `terms`, if given, is told what the copy runs at.
  Result<uint64_t> Copy(SessionRef session, const CopySpec& spec,
                        TransferCallback on_done = nullptr, CopyTerms* terms = nullptr);

  // Copy() whose `on_done` only posts an answer (it takes no lock but its
  // own, and calls nothing of the node's), so it may run under the node's
  // lock. A copy that ends inside the call (an inline one) is answered
  // before its bookkeeping (report, history, metrics) rather than after,
  // still under that lock: whoever looks the transfer up meanwhile waits
  // for it and finds the transfer ended. `on_done` gets a report of the
  // id, state and status only in that case.
  Result<uint64_t> CopyAnsweredEarly(SessionRef session, const CopySpec& spec,
                                     TransferCallback on_done);

  // A session may cancel, inspect and wait on its own transfers; the
  // operator (who holds the token in state_dir/operator.token) on any.
  // Others get PERMISSION_DENIED, also for transfers that have ended.
  // Cancelling one's own ended transfer answers OK (nothing to do).
  Status Cancel(SessionRef session, uint64_t transfer, bool is_operator = false);

  Result<TransferReport> GetTransfer(SessionRef session, uint64_t transfer,
                                     bool is_operator = false) const;

  // Runs `cb` once the transfer has ended (at once if it already has).
  Status WhenDone(SessionRef session, uint64_t transfer, bool is_operator, TransferCallback cb);

  // Every transfer in flight, with its owner (never a credential).
  std::vector<TransferReport> ListTransfers() const;

  // The final reports of the last daemon.transfer_history transfers of
  // this node's own that ended, newest first (no hops; no halves of other
  // nodes' copies). Anyone may list them, as ListTransfers; the message of
  // a transfer that ended badly (it may name another client's file) only
  // its session and the operator see, others its code alone.
  std::vector<TransferReport> RecentTransfers(SessionRef session, bool is_operator = false) const;

  // Why a transfer took its path (isoctl explain), for whoever may inspect
  // it; FAILED_PRECONDITION for a cross-node copy.
  Result<TransferExplanation> ExplainTransfer(SessionRef session, uint64_t transfer,
                                              bool is_operator = false) const;

  Result<PlanReport> Explain(const std::string& src_memory, const Layout& src_layout,
                             const std::string& dst_memory, const Layout& dst_layout,
                             const Box& bounds, const FieldSpace& fields) const;

  // The same with a datatype on either side (node_datatypes.cc); the plan
  // says why (forms, runs, the cost of each end) in PlanReport::why.
  Result<PlanReport> Explain(const PlanSide& src, const PlanSide& dst, const Box& bounds,
                             const FieldSpace& fields) const;

 private:
  Result<uint64_t> Start(SessionRef session, const CopySpec& spec, TransferCallback on_done,
                         CopyTerms* terms, bool answer_early);

  Node::Impl* impl_;
};

}  // namespace isometry::node
