// The halves of cross-node copies that run on this node, whoever
// initiated them: started through the runtime, awaited and aborted by the
// initiator (or by this node's own CrossOp).
#include <chrono>
#include <tuple>

#include "daemon/cluster/cluster_impl.h"
#include "daemon/node/copies.h"
#include "daemon/node/traffic_classes.h"

namespace isometry {

using cluster::Clock;

Status Cluster::Impl::StartLocalHalf(uint64_t key, RemotePart part, const CrossEnd& end,
                                     const InstanceShape& other, std::optional<Box> box,
                                     CopyOptions options, const std::string& initiator,
                                     uint64_t source_transfer,
                                     const std::function<void(Status)>& on_done,
                                     uint32_t* rdma_tag) {
  auto h = std::make_shared<Half>();
  h->key = key;
  h->partner = part.peer;
  h->initiator = initiator;
  h->source_transfer = source_transfer;
  h->sending = part.sending;
  h->net_hop = part.net_hop;
  h->path = part.path;
  h->priority = options.priority;
  CopyRequest req;
  const MemoryId other_mem =
      part.sending ? part.path.nodes.back().memory : part.path.nodes.front().memory;
  InstanceRef other_ref{other_mem, nullptr, 0, other};
  ISO_ASSIGN_OR_RETURN(other_ref.form, FarEndForm(end.local.form.get()));
  box = CopyBox(end.local.form.get(), box);
  req.src = part.sending ? end.local : other_ref;
  req.dst = part.sending ? other_ref : end.local;
  const MemoryId mine =
      part.sending ? part.path.nodes.front().memory : part.path.nodes.back().memory;
  if (end.local.memory != mine) {
    return InvalidArgument("cross-node copy ", key, ": the instance lives in memory '",
                           MemoryName(end.local.memory), "', the plan says '", MemoryName(mine),
                           "'");
  }
  part.names = QualifiedNames(part.path);
  h->names = part.names;
  part.copy_id = source_transfer;
  req.box = box;
  req.options = options;
  req.qos_class = part.qos_class;
  RouteOverRdma(h, part, rdma_tag ? *rdma_tag : 0);
  const bool receiving = !part.sending;
  req.remote = std::move(part);
  ISO_RETURN_IF_ERROR(RunHalf(h, std::move(req), {&end}, on_done));
  if (rdma_tag && receiving) {
    absl::MutexLock lock(&mu);
    *rdma_tag = h->rdma_tag;
  }
  return OkStatus();
}

namespace {

// How long an ended half stays findable, and how many at most.
constexpr auto kEndedHalfKept = std::chrono::minutes(5);
constexpr size_t kMaxEndedHalves = size_t{1} << 14;

// `ended` behind the watches of `active` (Active Access): each applies and
// logs its bytes before the next, and the half ends after the last.
std::function<void(const Status&)> ThroughWatches(std::vector<std::shared_ptr<ActiveEnd>> active,
                                                  std::function<void(const Status&)> ended) {
  if (active.empty()) return ended;
  std::shared_ptr<ActiveEnd> first = std::move(active.back());
  active.pop_back();
  std::function<void(const Status&)> rest = ThroughWatches(std::move(active), std::move(ended));
  return
      [first, rest](const Status& s) { first->Finish(s, [rest](const Status& fs) { rest(fs); }); };
}

}  // namespace

Status Cluster::Impl::RunHalf(const std::shared_ptr<Half>& h, CopyRequest req,
                              const std::vector<const CrossEnd*>& ends,
                              const std::function<void(Status)>& on_done) {
  std::vector<std::shared_ptr<const void>> keep;
  std::vector<std::shared_ptr<ActiveEnd>> active;
  for (const CrossEnd* e : ends) {
    keep.push_back(e->keep);
    if (e->active) active.push_back(e->active);
  }
  Impl* impl = this;
  std::function<void(const Status&)> ended = [impl, h, keep, on_done](const Status& s) {
    std::vector<std::function<void(const Status&)>> waiters;
    bool routed;
    {
      absl::MutexLock lock(&impl->mu);
      routed = h->rdma_tag != 0;
      h->finished = true;
      h->status = s;
      h->finished_at = Clock::now();
      impl->ended_halves.emplace_back(h->finished_at, h->key);
      waiters.swap(h->waiters);
    }
    // Its network hop's RDMA tag is free again (both halves unroute).
    if (routed) impl->net_routes->Unroute(h->partner, h->key);
    for (auto& w : waiters) w(s);
    if (on_done) on_done(s);
  };
  // A watched end: the half ends once the watch has applied and logged
  // its bytes, so the copy completes after that.
  req.on_complete = ThroughWatches(std::move(active), std::move(ended));
  const uint64_t key = h->key;
  {
    absl::MutexLock lock(&mu);
    PruneEndedHalvesLocked(Clock::now());
    if (auto it = halves.find(key); it != halves.end()) {
      if (it->second->transfer || it->second->finished) {
        return absl::AlreadyExistsError(StrCat("half ", key, " exists"));
      }
      h->aborted = it->second->aborted;  // a tombstone: AbortHalf came first
    }
    halves[key] = h;
    halves_of_copy.emplace(h->source_transfer, key);
  }
  auto t = node->runtime().Copy(std::move(req));
  // A forwarded copy's plan is this node's own; listed (HalfReports) once
  // its transfer is set, so set before that.
  Path path;
  std::map<MemoryId, std::string> names;
  if (t.ok() && h->whole) {
    path = t->path();
    names = QualifiedNames(path);
  }
  Status aborted;
  bool routed_failed = false;
  {
    absl::MutexLock lock(&mu);
    if (!t.ok()) {
      if (auto it = halves.find(key); it != halves.end()) EraseHalfLocked(it);
      routed_failed = h->rdma_tag != 0;
    } else {
      if (h->whole) {
        h->path = std::move(path);
        h->names = std::move(names);
      }
      h->transfer = *t;
      aborted = h->aborted;
    }
  }
  if (!t.ok()) {
    // Built and routed, then refused (shutting down): the route goes.
    if (routed_failed) net_routes->Unroute(h->partner, key);
    return t.status();
  }
  if (!aborted.ok()) t->Abort(aborted);
  return OkStatus();
}

Status Cluster::Impl::StartForwardedHalf(const std::string& caller, cluster::HalfRequest req) {
  // A datatype copy: both ends by their forms (checked like a half's).
  std::shared_ptr<const EndForm> src_form, dst_form;
  if (req.form_hash != 0) {
    ISO_ASSIGN_OR_RETURN(src_form, PeerEndForm(caller, req));
    ISO_ASSIGN_OR_RETURN(std::shared_ptr<const CanonicalForm> form,
                         forms.Resolve(caller, req.dst_form_hash, req.dst_form));
    auto made =
        MakeFormEnd(*form, req.dst_form_span,
                    StrCat("canonical form ", req.dst_form_hash, " from node '", caller, "'"));
    if (!made.ok()) return InvalidArgument(made.status().message());
    dst_form = *std::move(made);
    ISO_RETURN_IF_ERROR(MatchForms(src_form.get(), dst_form.get(), /*has_box=*/false));
  }
  const std::optional<Box> box = CopyBox(src_form.get(), req.box);
  PeerAccess access = AccessOf(caller, req.source, box);
  access.sending = true;
  ISO_ASSIGN_OR_RETURN(CrossEnd src,
                       node->copies().ResolveForPeer(req.local, std::move(src_form), &access));
  access.sending = false;
  ISO_ASSIGN_OR_RETURN(
      CrossEnd dst, node->copies().ResolveForPeer(*req.forward_dst, std::move(dst_form), &access));
  auto h = std::make_shared<Half>();
  h->key = req.part.key;
  h->initiator = caller;
  h->source_transfer = req.source.transfer;
  h->whole = true;
  h->priority = req.options.priority;
  CopyRequest creq;
  creq.src = src.local;
  creq.dst = dst.local;
  creq.box = box;
  creq.options = req.options;
  creq.qos_class = req.part.qos_class;
  return RunHalf(h, std::move(creq), {&src, &dst}, nullptr);
}

Result<std::shared_ptr<const EndForm>> Cluster::Impl::PeerEndForm(const std::string& caller,
                                                                  const cluster::HalfRequest& req) {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const CanonicalForm> form,
                       forms.Resolve(caller, req.form_hash, req.form));
  auto made = MakeFormEnd(*form, req.form_span,
                          StrCat("canonical form ", req.form_hash, " from node '", caller, "'"));
  // Whatever is wrong with it came from the peer: its request is invalid.
  if (!made.ok()) return InvalidArgument(made.status().message());
  if (!(req.other.bounds == StreamShape((*made)->bytes).bounds)) {
    return InvalidArgument("canonical form ", req.form_hash, " from node '", caller, "' packs ",
                           (*made)->bytes, " bytes; the other end has ",
                           ToString(req.other.bounds));
  }
  return made;
}

PeerAccess Cluster::Impl::AccessOf(const std::string& caller, const CopySource& source,
                                   const std::optional<Box>& box) const {
  PeerAccess access;
  access.box = box;
  access.source = source;
  absl::MutexLock lock(&mu);
  if (auto s = sessions.find(caller); s != sessions.end()) access.node = s->second.node;
  return access;
}

// Every memory node-qualified: a half's messages reach the other nodes'
// clients too, where a bare "sys0" would name the wrong memory.
std::map<MemoryId, std::string> Cluster::Impl::QualifiedNames(const Path& path) const {
  std::map<MemoryId, std::string> names;
  for (const PathNode& n : path.nodes) {
    const std::string name = MemoryName(n.memory);
    names[n.memory] = name.find(':') == std::string::npos ? StrCat(self(), ":", name) : name;
  }
  return names;
}

Status Cluster::Impl::StartRelayHalf(const std::string& caller, cluster::HalfRequest req) {
  RemotePart& part = req.part;
  if (!FindPeer(part.relay_peer)) {
    return NotFound("node '", part.relay_peer, "' is not a peer of node '", self(), "'");
  }
  auto h = std::make_shared<Half>();
  h->key = part.key;
  h->partner = part.peer;
  h->initiator = caller;
  h->source_transfer = req.source.transfer;
  h->net_hop = part.net_hop;
  h->relay_hop = part.relay_hop;
  h->relay_partner = part.relay_peer;
  h->path = part.path;
  h->priority = req.options.priority;
  part.names = QualifiedNames(part.path);
  part.copy_id = req.source.transfer;
  h->names = part.names;
  CopyRequest creq;
  // Neither end is here: their shapes, on the nodes the plan puts them.
  creq.src = InstanceRef{part.path.nodes.front().memory, nullptr, 0, req.local.shape};
  creq.dst = InstanceRef{part.path.nodes.back().memory, nullptr, 0, req.other};
  creq.box = req.box;
  creq.options = req.options;
  creq.qos_class = part.qos_class;
  creq.remote = std::move(part);
  return RunHalf(h, std::move(creq), {}, nullptr);
}

Status Cluster::Impl::StartPeerHalf(const std::string& caller, cluster::HalfRequest req,
                                    uint32_t* rdma_tag) {
  // This node's class for the half, by its own rules for peers, and the
  // priority within that class's ceiling (docs/guides/qos.md).
  std::tie(req.part.qos_class, req.options.priority) =
      node->traffic_classes().QosForPeerHalf(caller, req.remote_qos_class, req.options.priority);
  if (req.forward_dst) return StartForwardedHalf(caller, std::move(req));
  if (req.part.relays()) {
    req.part.peer = req.partner;
    return StartRelayHalf(caller, std::move(req));
  }
  req.part.peer = req.partner;
  std::shared_ptr<const EndForm> end_form;
  if (req.form_hash != 0) {
    ISO_ASSIGN_OR_RETURN(end_form, PeerEndForm(caller, req));
    req.other = StreamShape(end_form->bytes);
  }
  PeerAccess access = AccessOf(caller, req.source, req.box);
  access.sending = req.part.sending;
  ISO_ASSIGN_OR_RETURN(CrossEnd end,
                       node->copies().ResolveForPeer(req.local, std::move(end_form), &access));
  const uint64_t key = req.part.key;
  const bool sending = req.part.sending;
  uint32_t tag = req.rdma_tag;  // sending: the receiver's; receiving: set here
  ISO_RETURN_IF_ERROR(StartLocalHalf(key, std::move(req.part), end, req.other, req.box, req.options,
                                     caller, req.source.transfer, nullptr, &tag));
  if (rdma_tag && !sending) *rdma_tag = tag;
  return OkStatus();
}

void Cluster::Impl::PruneEndedHalvesLocked(Clock::time_point now) {
  // Ended halves stay a while for a late AwaitHalf (and for isoctl's
  // listing of recent ones), at most kMaxEndedHalves of them (each holds
  // a few KiB); the record is in the order they ended, so each call looks
  // only at what it drops (a scan of every half, at every start, made a
  // node's small copies slower with each one in the last five minutes).
  const Clock::time_point cutoff = now - kEndedHalfKept;
  while (!ended_halves.empty() &&
         (ended_halves.front().first < cutoff || ended_halves.size() > kMaxEndedHalves)) {
    const auto [ended_at, key] = ended_halves.front();
    ended_halves.pop_front();
    auto it = halves.find(key);
    if (it == halves.end()) continue;
    // Over: finished, or a tombstone (an abort for a half that never
    // started); a half still starting has neither and stays. One that
    // ended again since (a tombstone its start replaced) has a later
    // record of its own.
    const Half& old = *it->second;
    const bool over = old.finished || (!old.transfer && !old.aborted.ok());
    if (over && old.finished_at <= ended_at) EraseHalfLocked(it);
  }
}

void Cluster::Impl::EraseHalfLocked(std::map<uint64_t, std::shared_ptr<Half>>::iterator it) {
  const uint64_t copy = it->second->source_transfer;
  for (auto [i, end] = halves_of_copy.equal_range(copy); i != end; ++i) {
    if (i->second == it->first) {
      halves_of_copy.erase(i);
      break;
    }
  }
  halves.erase(it);
}

Status Cluster::Impl::AwaitHalf(uint64_t key, std::function<void(const Status&)> on_end) {
  Status ended;  // the half's end, when it has ended
  bool over = false;
  {
    absl::MutexLock lock(&mu);
    auto it = halves.find(key);
    if (it == halves.end()) return NotFound("no half ", key, " on node '", self(), "'");
    const Half& h = *it->second;
    if (!h.transfer && !h.finished && !h.aborted.ok()) {  // a tombstone
      ended = h.aborted;
      over = true;
    } else if (h.finished) {
      ended = h.status;
      over = true;
    } else {
      it->second->waiters.push_back(std::move(on_end));
    }
  }
  // on_end was moved only in the branch that leaves `over` false.
  if (over) on_end(ended);  // NOLINT(bugprone-use-after-move)
  return OkStatus();
}

void Cluster::Impl::AbortHalf(const std::string& caller, uint64_t key, const Status& why) {
  std::optional<Transfer> t;
  std::string routed_with;  // a receiving half routed over RDMA: its partner
  {
    absl::MutexLock lock(&mu);
    auto& h = halves[key];
    if (!h) {  // not started yet: a tombstone its start will find
      h = std::make_shared<Half>();
      h->key = key;
      h->initiator = caller;
      h->finished_at = Clock::now();
      ended_halves.emplace_back(h->finished_at, key);
    }
    if (h->aborted.ok()) h->aborted = why;
    t = h->transfer;
    if (h->rdma_tag != 0 && !h->sending) routed_with = h->partner;
  }
  if (t) t->Abort(why);
  // Its sender may have refused the route for want of a link there.
  if (!routed_with.empty()) RdmaRefused(routed_with, why);
}

void Cluster::Impl::AbortHalvesWith(const std::string& peer, const Status& why) {
  std::vector<Transfer> ts;
  {
    absl::MutexLock lock(&mu);
    for (auto& [key, h] : halves) {
      if (h->finished || (h->partner != peer && h->initiator != peer && h->relay_partner != peer)) {
        continue;
      }
      if (h->aborted.ok()) h->aborted = why;
      if (h->transfer) ts.push_back(*h->transfer);
    }
  }
  for (Transfer& t : ts) t.Abort(why);
}

}  // namespace isometry
