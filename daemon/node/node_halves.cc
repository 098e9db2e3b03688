// Cross-node copies as isoctl shows them on every node they touch: the
// initiator's record gains its own half's hops, and a half another node
// started is listed (and found by GetTransfer) under that node's id for
// the copy, marked "remote half of ...". The halves live in the cluster
// layer (CrossCopier::Halves), asked before the node's lock is taken.
#include "core/strings.h"
#include "daemon/node/node_impl.h"

namespace isometry {

namespace {

std::string Size(uint64_t bytes) {
  if (bytes % (1ull << 20) == 0) return StrCat(bytes >> 20, " MiB");
  if (bytes % (1ull << 10) == 0) return StrCat(bytes >> 10, " KiB");
  return StrCat(bytes, " B");
}

TransferReport RemoteHalfReport(const HalfReport& h) {
  TransferReport rep;
  rep.id = h.id;
  rep.status = h.status;
  if (!h.finished) {
    rep.state = "running";
  } else if (h.status.ok()) {
    rep.state = "done";
  } else {
    rep.state = absl::IsCancelled(h.status) ? "cancelled" : "failed";
  }
  rep.priority = h.priority;
  rep.requested_priority = h.priority;
  rep.bytes = h.bytes;
  rep.elapsed_s = h.elapsed_s;
  rep.path = h.path;
  rep.hops = h.hops;
  rep.owner.client = StrCat("node ", h.initiator);
  if (h.forwarded) {
    rep.remote_half =
        StrCat("forwarded copy of ", h.initiator, ":", h.id, ", run whole on this node");
  } else if (!h.relay_to.empty()) {
    rep.remote_half = StrCat("relay of ", h.initiator, ":", h.id, ", receiving from ", h.partner,
                             ", sending to ", h.relay_to);
  } else {
    rep.remote_half = StrCat("remote half of ", h.initiator, ":", h.id,
                             h.sending ? ", sending to " : ", receiving from ", h.partner);
  }
  return rep;
}

// This node's own half of the initiator's copy `rep`: its hops.
void AddOwnHops(TransferReport& rep, const std::vector<HalfReport>& halves) {
  for (const HalfReport& h : halves) {
    if (!h.remote && h.id == rep.id) rep.hops.insert(rep.hops.end(), h.hops.begin(), h.hops.end());
  }
}

}  // namespace

std::string NetworkLimits(const ClusterConfig& c) {
  std::string s = StrCat(c.data_connections, " connections each way, ", Size(c.request_bytes),
                         " chunks, one credit per chunk");
  if (c.rate_limit_bytes_per_s) {
    StrAppend(&s, ", sending capped at ", Size(c.rate_limit_bytes_per_s), "/s");
  }
  return s;
}

std::vector<HalfReport> Node::Impl::Halves(uint64_t id, bool running_only) const {
  return cross ? cross->Halves(id, running_only) : std::vector<HalfReport>{};
}

uint64_t Node::Impl::RunningRemoteHalves() const {
  uint64_t n = 0;
  for (const HalfReport& h : Halves(0, true)) n += h.remote ? 1 : 0;
  return n;
}

std::vector<TransferReport> node::Copies::ListTransfers() const {
  const std::vector<HalfReport> halves = impl_->Halves(0, true);
  std::vector<TransferReport> out;
  {
    absl::MutexLock lock(&impl_->mu);
    for (const auto& [id, r] : impl_->active) {
      out.push_back(impl_->BuildReport(*r));
      if (r->cross) AddOwnHops(out.back(), halves);
    }
  }
  for (const HalfReport& h : halves) {
    if (h.remote) out.push_back(RemoteHalfReport(h));
  }
  return out;
}

std::vector<TransferReport> node::Copies::RecentTransfers(SessionRef session,
                                                          bool is_operator) const {
  absl::MutexLock lock(&impl_->mu);
  std::vector<TransferReport> out;
  out.reserve(impl_->history.size());
  for (const KeptTransfer& kept : impl_->history.NewestFirst()) {
    out.push_back(*kept.report);
    // Formatted once per plan (TextOfLocked), when asked for.
    if (kept.path) out.back().path = impl_->TextOfLocked(kept.path).path;
  }
  if (is_operator) return out;
  const Session* caller = impl_->FindSessionOrNull(session);
  for (TransferReport& r : out) {
    if (!r.status.ok() && !(caller && caller->id == r.owner.session)) {
      r.status =
          Status(r.status.code(), StrCat("another client's transfer: its message needs the "
                                         "operator token (",
                                         impl_->config.daemon.state_dir, "/operator.token)"));
    }
  }
  return out;
}

Result<TransferReport> node::Copies::GetTransfer(SessionRef session, uint64_t transfer,
                                                 bool is_operator) const {
  // Only a cross-node copy's id can name a half (kCrossTransferBit).
  const std::vector<HalfReport> halves =
      (transfer & kCrossTransferBit) ? impl_->Halves(transfer, false) : std::vector<HalfReport>{};
  {
    absl::MutexLock lock(&impl_->mu);
    Result<FoundTransfer> f = impl_->TouchableLocked(session, transfer, is_operator, "inspecting");
    if (f.ok()) {
      TransferReport rep = impl_->BuildReport(*f->record);
      if (f->record->cross) AddOwnHops(rep, halves);
      return rep;
    }
    if (!absl::IsNotFound(f.status())) return f.status();
  }
  // Another node's copy: its half here is public, as in ListTransfers.
  for (const HalfReport& h : halves) {
    if (h.remote) return RemoteHalfReport(h);
  }
  return NotFound("no transfer ", transfer, " (finished transfers are kept for the last ",
                  Node::Impl::kFinishedKept,
                  "; halves of other nodes' copies for 5 minutes, the last 16384 at most)");
}

}  // namespace isometry
