// Redistribution between distributed instances whose ranks joined on
// several nodes (node_distributed.h, "across nodes"): the coordinator asks
// its peers for their ranks, checks that every rank joined exactly once,
// and starts one part per node that holds producer ranks; each part runs
// its producers' pieces, those into another node's consumer rank as
// cross-node datatype copies. One transfer on the coordinator stands for
// all parts: the first part to fail aborts the others.
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/node/redistribute_op.h"

namespace isometry {
namespace {

using Dist = redistribution::Distribution;

// The parts of a redistribution across nodes, as one transfer.
class RedistributionAcross final : public CrossTransfer {
 public:
  RedistributionAcross(std::string what, uint64_t bytes, std::vector<std::string> nodes,
                       std::function<void(Status)> done)
      : what_(std::move(what)), bytes_(bytes), done_(std::move(done)) {
    absl::MutexLock lock(&mu_);
    parts_.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) parts_[i].node = std::move(nodes[i]);
    remaining_ = parts_.size();
  }

  // Part `i` started; it is aborted at once when the whole has failed.
  void SetPart(size_t i, const std::shared_ptr<CrossTransfer>& handle) {
    Status failed;
    {
      absl::MutexLock lock(&mu_);
      if (parts_[i].ended) return;
      parts_[i].handle = handle;
      failed = failure_;
    }
    if (!failed.ok()) handle->Abort(failed);
  }

  void PartDone(size_t i, const Status& s, uint64_t bytes) {
    std::vector<std::shared_ptr<CrossTransfer>> abort;
    std::function<void(Status)> done;
    Status final;
    {
      absl::MutexLock lock(&mu_);
      Part& p = parts_[i];
      if (p.ended) return;
      p.ended = true;
      p.handle.reset();
      bytes_done_ += bytes;
      if (!s.ok() && failure_.ok()) {
        failure_ = Status(s.code(), StrCat("redistribution ", what_, ": the part on node '", p.node,
                                           "' failed: ", s.message()));
        for (const Part& other : parts_) {
          if (other.handle) abort.push_back(other.handle);
        }
      }
      final = failure_;
      if (--remaining_ == 0) done = std::move(done_);
    }
    for (const auto& h : abort) h->Abort(final);
    if (done) done(final);
  }

  void Abort(const Status& why) override {
    std::vector<std::shared_ptr<CrossTransfer>> abort;
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok() || remaining_ == 0) return;
      failure_ = why;
      for (const Part& p : parts_) {
        if (p.handle) abort.push_back(p.handle);
      }
    }
    for (const auto& h : abort) h->Abort(why);
  }
  void Cancel() override { Abort(absl::CancelledError("redistribution cancelled")); }

  std::string PathText() const override {
    absl::MutexLock lock(&mu_);
    std::string running;
    for (const Part& p : parts_) {
      if (!p.ended) running += StrCat(running.empty() ? "" : ", ", p.node);
    }
    return StrCat("redistribution ", what_, " across nodes: ", parts_.size() - remaining_, " of ",
                  parts_.size(), " node parts done",
                  running.empty() ? std::string() : StrCat(" (running on ", running, ")"), "; ",
                  bytes_done_, " of ", bytes_, " bytes");
  }
  uint64_t bytes() const override { return bytes_; }
  std::chrono::steady_clock::time_point started() const override { return started_; }
  double predicted_bytes_per_s() const override { return 0; }

 private:
  struct Part {
    std::string node;
    std::shared_ptr<CrossTransfer> handle;
    bool ended = false;
  };
  const std::string what_;
  const uint64_t bytes_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  mutable absl::Mutex mu_;
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  size_t remaining_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_done_ ABSL_GUARDED_BY(mu_) = 0;
  Status failure_ ABSL_GUARDED_BY(mu_);
  std::function<void(Status)> done_ ABSL_GUARDED_BY(mu_);
};

// One side of a redistribution, put together from every node's ranks.
struct Side {
  std::optional<Dist> dist;
  redistribution::DistributionSpec spec;
  uint64_t element_bytes = 0;
  std::vector<std::optional<RankPlace>> ranks;  // node set
};

// `grant_digest`: in the gRPC namespace (else null), the digest every
// node's ranks must have joined with (peers hide other jobs' instances of
// the name; the coordinator's own are checked here all the same).
Result<Side> MergeSide(const std::string& name, const std::vector<DistributedRanks>& answers,
                       const std::string* grant_digest) {
  Side side;
  std::string first, nodes;
  for (const DistributedRanks& a : answers) {
    if (!a.found) continue;
    const bool same_grant =
        !grant_digest || (grant_digest->empty() ? a.grant_digest.empty()
                                                : GrantDigestsEqual(a.grant_digest, *grant_digest));
    if (!same_grant) {
      return PermissionDenied("the ranks of distributed instance '", ForLog(name), "' on node '",
                              a.node, "' joined with another grant");
    }
    // A peer's description is checked as a client's would be.
    ISO_ASSIGN_OR_RETURN(const Dist d, Dist::Make(a.spec));
    if (!side.dist) {
      side.dist = d;
      side.spec = a.spec;
      side.element_bytes = a.element_bytes;
      side.ranks.resize(d.rank_count());
      first = a.node;
    } else if (!(d == *side.dist) || a.element_bytes != side.element_bytes) {
      return InvalidArgument("distributed instance '", ForLog(name), "' is ", side.dist->ToString(),
                             " of ", side.element_bytes, "-byte elements on node '", first,
                             "' but ", d.ToString(), " of ", a.element_bytes,
                             "-byte elements on node '", a.node, "'");
    }
    nodes += StrCat(nodes.empty() ? "" : ", ", a.node);
    for (const RankPlace& r : a.ranks) {
      if (r.rank >= side.ranks.size()) {
        return InvalidArgument("node '", a.node, "' reports rank ", r.rank, " of '", ForLog(name),
                               "', which has ", side.ranks.size(), " ranks");
      }
      if (side.ranks[r.rank]) {
        return FailedPrecondition("rank ", r.rank, " of distributed instance '", ForLog(name),
                                  "' joined on node '", side.ranks[r.rank]->node, "' and on node '",
                                  a.node, "'");
      }
      side.ranks[r.rank] = r;
      side.ranks[r.rank]->node = a.node;
    }
  }
  if (!side.dist) {
    return NotFound("no distributed instance '", ForLog(name),
                    "' on this node or its peers (it ends when the session of any of its ranks "
                    "ends)");
  }
  uint64_t joined = 0;
  for (const auto& r : side.ranks) joined += r.has_value();
  if (joined != side.ranks.size()) {
    return FailedPrecondition(
        "distributed instance '", ForLog(name), "' has ", joined, " of its ", side.ranks.size(),
        " ranks joined (on nodes ", nodes, ")",
        grant_digest ? "; in the gRPC namespace ranks on other nodes count only when every rank "
                       "joined with the same grant"
                     : "");
  }
  return side;
}

}  // namespace

DistributedRanks Node::Impl::LocalRanksLocked(const DistributedInstance& d) const {
  DistributedRanks out;
  out.node = config.cluster.node_name;
  out.found = true;
  out.spec = d.spec;
  out.element_bytes = d.element_bytes;
  out.grant_digest = d.grant_digest;
  for (size_t r = 0; r < d.members.size(); ++r) {
    if (!d.members[r]) continue;
    RankPlace place;
    place.rank = r;
    auto it = instances.find(d.members[r]->instance);
    if (d.members[r]->instance == 0 || it == instances.end()) {
      place.empty = d.members[r]->instance == 0;
      out.ranks.push_back(std::move(place));
      continue;
    }
    const Instance& in = it->second;
    place.shape = in.shape;
    if (in.private_range) {
      place.memory = std::string(kProcessMemoryName);
    } else if (in.allocation) {
      place.memory = runtime->topology().memories[in.allocation->pool->memory].name;
    } else {
      place.memory = config.runtime.memories[in.disk_memory].name;
    }
    out.ranks.push_back(std::move(place));
  }
  return out;
}

Result<uint64_t> Node::Impl::RedistributeAcrossNodes(
    ClusterRedistribution c, const std::shared_ptr<TransferRecord>& record) {
  const std::string names[2] = {c.producer, c.consumer};
  if (c.producer == c.consumer) {
    return InvalidArgument("redistribution of '", ForLog(c.producer), "' into itself");
  }
  std::vector<DistributedRanks> answers[2];
  for (int i = 0; i < 2; ++i) {
    ISO_ASSIGN_OR_RETURN(answers[i], cross->QueryDistributed(c.ns + names[i], c.grant_digest[i]));
  }
  {
    absl::MutexLock lock(&mu);
    for (int i = 0; i < 2; ++i) {
      if (!c.local[i]) continue;
      ISO_RETURN_IF_ERROR(
          StillCurrentLocked(c.ns + names[i], c.local[i], names[i], "redistribution"));
      for (const DistributedRanks& a : answers[i]) {
        if (a.found) c.local[i]->peers.insert(a.node);
      }
      answers[i].push_back(LocalRanksLocked(*c.local[i]));
    }
  }
  Side sides[2];
  for (int i = 0; i < 2; ++i) {
    const bool grpc_ns = c.ns == kGrpcDistributedNamespace;
    ISO_ASSIGN_OR_RETURN(sides[i],
                         MergeSide(names[i], answers[i], grpc_ns ? &c.grant_digest[i] : nullptr));
  }
  ISO_RETURN_IF_ERROR(Compatible(c.producer, *sides[0].dist, sides[0].element_bytes, c.consumer,
                                 *sides[1].dist, sides[1].element_bytes));
  RedistributePart part;
  part.producer = c.ns + c.producer;
  part.consumer = c.ns + c.consumer;
  part.producer_spec = sides[0].spec;
  part.consumer_spec = sides[1].spec;
  part.element_bytes = sides[0].element_bytes;
  for (const auto& r : sides[1].ranks) part.consumers.push_back(*r);
  std::vector<std::string> nodes;  // those holding producer ranks, once each
  for (const auto& r : sides[0].ranks) {
    if (std::find(nodes.begin(), nodes.end(), r->node) == nodes.end()) nodes.push_back(r->node);
  }
  // One bound for the whole cluster: the parts share it.
  const uint32_t conc = config.daemon.redistribute_concurrency;
  part.concurrency = std::max<uint32_t>(1, conc / static_cast<uint32_t>(nodes.size()));
  const std::string what = StrCat("'", ForLog(c.producer), "' -> '", ForLog(c.consumer), "'");
  Impl* impl = this;
  auto across = std::make_shared<RedistributionAcross>(
      what, sides[0].dist->element_count() * sides[0].element_bytes, nodes,
      [impl, record](Status st) { impl->OnRuntimeDone(record, std::move(st)); });
  PendingCalls calls;
  bool adopted = false;
  {
    absl::MutexLock lock(&mu);
    record->owner = c.owner;
    record->id = next_cross++;
    part.key = record->id;
    ISO_RETURN_IF_ERROR(
        AdoptRedistributionLocked(c.session, c.ns, c.local, across, record, calls, adopted));
  }
  if (!adopted) across->Cancel();  // the caller's session ended meanwhile
  spdlog::info("redistribution {} (transfer {}) across nodes: parts on {}", what, record->id,
               nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto done = [across, i](const Status& s, uint64_t bytes) { across->PartDone(i, s, bytes); };
    Result<std::shared_ptr<CrossTransfer>> h =
        nodes[i] == config.cluster.node_name
            ? StartPart(part, config.cluster.node_name, done)
            : cross->RunRedistributePart(nodes[i], part, std::move(done));
    if (h.ok()) {
      across->SetPart(i, *h);
    } else {
      across->PartDone(i, h.status(), 0);
    }
  }
  calls.Run();
  return record->id;
}

Result<std::shared_ptr<CrossTransfer>> Node::Impl::StartPart(
    const RedistributePart& part, const std::string& caller,
    const std::function<void(Status, uint64_t)>& done) {
  ISO_ASSIGN_OR_RETURN(const Dist prod, Dist::Make(part.producer_spec));
  ISO_ASSIGN_OR_RETURN(const Dist cons, Dist::Make(part.consumer_spec));
  if (prod.dims() != cons.dims() || prod.extents() != cons.extents()) {
    return InvalidArgument("redistribution part: the two distributions' extents differ");
  }
  if (part.consumers.size() != cons.rank_count()) {
    return InvalidArgument("redistribution part: ", part.consumers.size(),
                           " consumer ranks placed; the consumer has ", cons.rank_count());
  }
  const std::string& self = config.cluster.node_name;
  RedistributionOp::Setup setup;
  std::shared_ptr<DistributedInstance> sides[2];
  {
    absl::MutexLock lock(&mu);
    auto it = distributed.find(part.producer);
    if (it == distributed.end()) {
      return NotFound("node '", self, "' holds no rank of distributed instance '",
                      ForLog(part.producer), "' (it ended here)");
    }
    sides[0] = it->second;
    if (!(sides[0]->dist == prod) || sides[0]->element_bytes != part.element_bytes) {
      return InvalidArgument("distributed instance '", ForLog(part.producer), "' on node '", self,
                             "' is ", sides[0]->dist.ToString(), "; the part says ",
                             prod.ToString());
    }
    setup.producers.resize(prod.rank_count());
    for (size_t r = 0; r < setup.producers.size(); ++r) {
      if (!sides[0]->members[r]) {
        setup.producers[r].node = "(another node)";  // that node runs its pieces
        continue;
      }
      ISO_ASSIGN_OR_RETURN(setup.producers[r], RankEndLocked(*sides[0], r, false));
    }
    if (auto ct = distributed.find(part.consumer); ct != distributed.end()) sides[1] = ct->second;
    setup.consumers.resize(cons.rank_count());
    std::vector<bool> seen(cons.rank_count(), false);
    for (const RankPlace& c : part.consumers) {
      if (c.rank >= seen.size() || seen[c.rank]) {
        return InvalidArgument("redistribution part: consumer rank ", c.rank,
                               " placed twice or out of range");
      }
      seen[c.rank] = true;
      RankEnd& e = setup.consumers[c.rank];
      if (c.node == self) {
        if (!sides[1] || !(sides[1]->dist == cons)) {
          return NotFound("consumer rank ", c.rank, " of '", ForLog(part.consumer),
                          "' has not joined on node '", self, "'");
        }
        ISO_ASSIGN_OR_RETURN(e, RankEndLocked(*sides[1], c.rank, true));
        continue;
      }
      e.node = c.node;
      e.memory = c.memory;
      e.empty = c.empty;
      if (c.empty) continue;
      const std::string what = StrCat("consumer rank ", c.rank, " on node '", c.node, "'");
      ISO_RETURN_IF_ERROR(c.shape.Validate(what));
      ISO_ASSIGN_OR_RETURN(e.storage, StridedStorageOf(c.shape, what));
    }
  }
  ISO_RETURN_IF_ERROR(PlanPieces(prod, cons, part.element_bytes, setup));
  setup.what = StrCat("'", ForLog(part.producer), "' -> '", ForLog(part.consumer), "' (part on '",
                      self, "')");
  setup.dims = prod.dims();
  setup.concurrency =
      std::clamp<uint32_t>(part.concurrency, 1, config.daemon.redistribute_concurrency);
  setup.disk_owner = StrCat("node '", caller, "'");
  setup.image_budgets = {scratch_all};  // another node's session: the node's bound
  setup.consumer_key = part.consumer;
  setup.cross = cross;
  auto op_ref = std::make_shared<std::weak_ptr<RedistributionOp>>();
  setup.done = [done, op_ref](Status st) {
    auto op = op_ref->lock();
    done(std::move(st), op ? op->bytes_done() : 0);
  };
  auto op = std::make_shared<RedistributionOp>(*runtime, std::move(setup));
  *op_ref = op;
  {
    absl::MutexLock lock(&mu);
    const std::string keys[2] = {part.producer, part.consumer};
    for (int i = 0; i < 2; ++i) {
      if (!sides[i]) continue;
      ISO_RETURN_IF_ERROR(StillCurrentLocked(keys[i], sides[i], keys[i], "part"));
      TrackRunning(*sides[i], op);
    }
  }
  op->Start();
  return std::shared_ptr<CrossTransfer>(op);
}

Result<CrossEnd> Node::Impl::ResolveRankForPeer(const InstanceSpec& spec,
                                                std::shared_ptr<const EndForm> end_form) const {
  if (!end_form || spec.offset != 0) {
    return InvalidArgument("a distributed rank's end is named with a canonical form, offset 0");
  }
  const std::string& self = config.cluster.node_name;
  absl::MutexLock lock(&mu);
  auto it = distributed.find(spec.distributed);
  if (it == distributed.end()) {
    return NotFound("node '", self, "' holds no rank of distributed instance '",
                    ForLog(spec.distributed), "' (it ended here)");
  }
  const DistributedInstance& d = *it->second;
  const uint64_t r = spec.distributed_rank;
  if (r >= d.members.size() || !d.members[r]) {
    return NotFound("rank ", r, " of '", ForLog(spec.distributed), "' has not joined on node '",
                    self, "'");
  }
  ISO_ASSIGN_OR_RETURN(RankEnd e, RankEndLocked(d, r, true));
  if (e.empty) {
    return InvalidArgument("rank ", r, " of '", ForLog(spec.distributed), "' holds no element");
  }
  // (A file's length is checked when the piece opens it.)
  const bool past_memory = e.ref.file.empty() && end_form->span > e.ref.capacity;
  if (past_memory || end_form->span > e.storage.span) {
    return OutOfRange("a piece spanning ", end_form->span, " bytes into rank ", r, " of '",
                      ForLog(spec.distributed), "', whose instance holds ", e.storage.span);
  }
  CrossEnd end;
  end.local = e.ref;
  end.local.shape = StreamShape(end_form->bytes);
  end.local.form = std::move(end_form);
  end.keep = e.keep;
  return end;
}

std::vector<std::shared_ptr<CrossTransfer>> Node::Impl::EndDistributedLocked(
    const std::string& key) {
  std::vector<std::shared_ptr<CrossTransfer>> ops;
  auto it = distributed.find(key);
  if (it == distributed.end()) return ops;
  for (const auto& w : it->second->running) {
    if (auto op = w.lock()) ops.push_back(std::move(op));
  }
  distributed.erase(it);
  return ops;
}

DistributedRanks node::Distributed::DistributedRanksForPeer(const std::string& caller,
                                                            const std::string& key,
                                                            const std::string& grant_digest) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->distributed.find(key);
  // gRPC clients share a namespace: a same-named instance made with
  // another grant (or none) is another job's, neither shown nor tied to
  // the caller (whose end would end it).
  const bool hidden = it != impl_->distributed.end() &&
                      key.starts_with(kGrpcDistributedNamespace) &&
                      !GrantMatches(*it->second, grant_digest);
  if (it == impl_->distributed.end() || hidden) {
    DistributedRanks none;
    none.node = impl_->config.cluster.node_name;
    return none;
  }
  it->second->peers.insert(caller);
  return impl_->LocalRanksLocked(*it->second);
}

Result<std::shared_ptr<CrossTransfer>> node::Distributed::RunPartForPeer(
    const std::string& caller, const RedistributePart& part,
    const std::function<void(Status, uint64_t)>& done) {
  return impl_->StartPart(part, caller, done);
}

void node::Distributed::DistributedEndedByPeer(const std::string& caller, const std::string& key,
                                               const std::string& why) {
  std::vector<std::shared_ptr<CrossTransfer>> ops;
  std::set<std::string> others;
  {
    absl::MutexLock lock(&impl_->mu);
    auto it = impl_->distributed.find(key);
    // A same-named instance that never met `caller` is another job's.
    if (it == impl_->distributed.end() || !it->second->peers.contains(caller)) return;
    others = it->second->peers;
    others.erase(caller);
    ops = impl_->EndDistributedLocked(key);
  }
  // Passed on to the nodes this one met (each ends it once: the second
  // word finds nothing).
  if (impl_->cross && !others.empty()) impl_->cross->AnnounceDistributedEnded(key, others, why);
  spdlog::info("distributed instance '{}' ended: node '{}' says {}", ForLog(key), ForLog(caller),
               ForLog(why, 256));
  AbortRedistributions(ops, absl::AbortedError(StrCat("distributed instance '", ForLog(key),
                                                      "' ended on node '", caller, "': ", why)));
}

}  // namespace isometry
