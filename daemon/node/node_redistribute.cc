// node::Distributed::Redistribute (node_distributed.h): ASPEN's exchange sets become
// packed piece copies between the ranks' local instances, run a few at a
// time as one transfer.
//
// Both ends of a piece copy enumerate the piece's elements in one order of
// their global indices: dimensions nested as the consumer's local storage
// nests them (its largest stride outermost), so the destination, whose
// writes cost the most per contiguous run (one call per run into a private
// range), sees runs as long as its layout allows; row-major for C-order
// storage, column-major for ScaLAPACK's. In every dimension a rank's local
// index grows with the global index, so that order is the same order of
// the piece's local indices on either side: one nested hindexed datatype
// per side (a level per dimension, displacements from that side's
// strides), and the two sides differ only in where each element lies.
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/node/redistribute_op.h"
#include "layout/datatype_form.h"

namespace isometry {
namespace {

using Dist = redistribution::Distribution;
using redistribution::ExchangeSet;
// Not `using redistribution::Piece`: watch_state.cc, in the same unity
// batch when batches are larger, has active::Piece by that name.
using ExchangePiece = redistribution::Piece;
using redistribution::Run;

// Contiguous runs one piece copy's description may hold (the datatype
// weight and the form walk stay far below their limits): pieces with more
// are cut in dimension 0.
constexpr uint64_t kRunsPerCopy = uint64_t{1} << 16;

// The runs of one index of dimension 0, at most, when `inner` (not 0) is
// the innermost dimension of the enumeration.
uint64_t InnerRuns(const ExchangePiece& piece, int dims, int inner) {
  uint64_t runs = 1;
  for (int d = 1; d < dims; ++d) {
    uint64_t n = 0;
    for (const Run& r : piece.runs[d]) n += d == inner ? 1 : r.length;
    runs = runs > kRunsPerCopy ? runs : runs * std::max<uint64_t>(n, 1);
  }
  return runs;
}

// The elements of one index of dimension 0 (the product of the other
// dimensions' lengths; a count of real elements, so it cannot overflow).
// With dimension 0 innermost, also the runs of one run of dimension 0.
uint64_t InnerElements(const ExchangePiece& piece, int dims) {
  uint64_t elements = 1;
  for (int d = 1; d < dims; ++d) {
    uint64_t n = 0;
    for (const Run& r : piece.runs[d]) n += r.length;
    elements *= n;
  }
  return elements;
}

// The consumer's storage order (largest stride outermost; ties keep the
// dimension order), or row-major where dimension 0 would be innermost but
// one of its runs alone holds more than kRunsPerCopy runs (cutting in
// dimension 0 could not bound the copy's description then).
std::array<int, redistribution::kMaxDims> EnumerationOrder(const StridedStorage& st,
                                                           const ExchangePiece& piece, int dims) {
  std::array<int, redistribution::kMaxDims> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.begin() + dims,
                   [&](int a, int b) { return std::abs(st.stride[a]) > std::abs(st.stride[b]); });
  if (dims > 1 && order[dims - 1] == 0 && InnerElements(piece, dims) > kRunsPerCopy) {
    return {0, 1, 2, 3};
  }
  return order;
}

// Cuts `piece` of producer `p`, enumerated in `order`, into tasks of at
// most kRunsPerCopy runs (where a single index, or with dimension 0
// innermost a single run, of dimension 0 holds more: one per task).
void AddTasks(uint64_t p, const ExchangePiece& piece, int dims, uint64_t element_bytes,
              const std::array<int, redistribution::kMaxDims>& order, std::vector<PieceTask>& out) {
  // Dimension 0 innermost: every run of it costs its runs whatever its
  // length; else every index of it costs the runs of the dimensions inside.
  const bool per_run = order[dims - 1] == 0;
  const uint64_t elements_inner = InnerElements(piece, dims);
  const uint64_t unit = per_run ? elements_inner : InnerRuns(piece, dims, order[dims - 1]);
  PieceTask task;
  task.producer = p;
  task.consumer = piece.remote_rank;
  task.runs = piece.runs;
  task.order = order;
  uint64_t cost = 0;
  auto flush = [&] {
    if (task.dim0.empty()) return;
    out.push_back(task);
    out.back().runs[0] = {};
    task.dim0.clear();
    task.bytes = 0;
    cost = 0;
  };
  for (const Run& whole : piece.runs[0]) {
    Run r = whole;
    while (r.length > 0) {
      const uint64_t room = per_run || cost >= kRunsPerCopy ? 0 : (kRunsPerCopy - cost) / unit;
      // A task holds at least one index (one run), however many runs that has.
      if (!task.dim0.empty() && (per_run ? cost + unit > kRunsPerCopy : room == 0)) {
        flush();
        continue;
      }
      const uint64_t take = per_run ? r.length : std::min(r.length, std::max<uint64_t>(room, 1));
      task.dim0.push_back({r.global, take, r.local, r.remote});
      task.bytes += take * elements_inner * element_bytes;
      cost += per_run ? unit : take * unit;
      r.global += take;
      r.local += take;
      r.remote += take;
      r.length -= take;
      if (cost >= kRunsPerCopy) flush();
    }
  }
  flush();
}

// gRPC sessions share one namespace: the side this session joined no rank
// of (not `mine`) is another job's, used only with that job's grant (a
// copy too reads and writes only what is the session's or published).
Status CheckGrants(const std::shared_ptr<DistributedInstance> sides[2], const bool mine[2],
                   const std::string presented[2], const std::string names[2]) {
  for (int i = 0; i < 2; ++i) {
    if (mine[i]) continue;
    const bool granted = sides[i] ? GrantMatches(*sides[i], presented[i]) : !presented[i].empty();
    if (!granted) {
      return PermissionDenied(
          "redistribute: this session is no rank of '", ForLog(names[i]), "', and ",
          presented[i].empty() ? "no grant for it was presented (RedistributeRequest."
                               : "the grant presented is not its grant (RedistributeRequest.",
          i == 0 ? "producer_grant)" : "consumer_grant)");
    }
  }
  return OkStatus();
}

}  // namespace

// Every producer's (on this node) exchange set (ASPEN) and its pieces as tasks, dealt
// round-robin over producers, each producer's list started at a different
// consumer, so the copies running at once spread over ranks.
Status PlanPieces(const Dist& prod, const Dist& cons, uint64_t element_bytes,
                  RedistributionOp::Setup& setup) {
  const uint64_t m = prod.rank_count();
  setup.exchanges.reserve(m);  // tasks hold views into them: no reallocation
  std::vector<std::vector<PieceTask>> per(m);
  for (uint64_t p = 0; p < m; ++p) {
    if (!setup.producers[p].node.empty()) {  // its node runs its pieces
      setup.exchanges.emplace_back();
      continue;
    }
    ISO_ASSIGN_OR_RETURN(ExchangeSet ex, redistribution::ComputeExchange(
                                             prod, p, cons, redistribution::Algorithm::kAspen));
    setup.exchanges.push_back(std::move(ex));
    std::vector<ExchangePiece> pieces = setup.exchanges.back().Pieces();
    if (pieces.empty()) continue;
    std::rotate(pieces.begin(), pieces.begin() + static_cast<ptrdiff_t>(p % pieces.size()),
                pieces.end());
    for (const ExchangePiece& piece : pieces) {
      const RankEnd& dst = setup.consumers[piece.remote_rank];
      const auto order = dst.empty ? std::array<int, redistribution::kMaxDims>{0, 1, 2, 3}
                                   : EnumerationOrder(dst.storage, piece, prod.dims());
      AddTasks(p, piece, prod.dims(), element_bytes, order, per[p]);
    }
  }
  for (size_t k = 0;; ++k) {
    bool any = false;
    for (auto& list : per) {
      if (k >= list.size()) continue;
      setup.tasks.push_back(std::move(list[k]));
      any = true;
    }
    if (!any) break;
  }
  return OkStatus();
}

Result<std::vector<RankEnd>> Node::Impl::RankEndsLocked(const DistributedInstance& d,
                                                        bool destination) const {
  std::vector<RankEnd> ends(d.members.size());
  for (size_t r = 0; r < ends.size(); ++r) {
    ISO_ASSIGN_OR_RETURN(ends[r], RankEndLocked(d, r, destination));
  }
  return ends;
}

Result<RankEnd> Node::Impl::RankEndLocked(const DistributedInstance& d, size_t r,
                                          bool destination) const {
  RankEnd e;
  if (!d.members[r]) return NotFound("rank ", r, " of '", d.name, "' has not joined here");
  const DistributedMember& m = *d.members[r];
  if (m.instance == 0) {
    e.empty = true;
    return e;
  }
  auto it = instances.find(m.instance);
  if (it == instances.end()) {
    return NotFound("rank ", r, " of '", d.name, "': its instance ", m.instance,
                    " is no longer registered");
  }
  const Instance& in = it->second;
  const std::string what = StrCat("rank ", r, " of '", ForLog(d.name), "'");
  ISO_ASSIGN_OR_RETURN(e.storage, StridedStorageOf(in.shape, what));
  ISO_RETURN_IF_ERROR(
      RankUnwatchedLocked(in, destination ? active::Op::kPut : active::Op::kGet, what));
  if (in.private_range && !in.private_range->alive) {
    return NotFound(what, ": its private range ended");
  }
  if (in.private_range && destination) ISO_RETURN_IF_ERROR(CheckWritable(*in.private_range, what));
  e.ref = LocalRefLocked(in);
  // A copy into a file normally writes a new version and renames it over
  // the target (daemon/runtime/disk_endpoint.h): concurrent pieces would
  // undo each other, so pieces write in place, each its own elements.
  e.ref.file_in_place = destination && !in.private_range && !in.allocation;
  e.keep = in.allocation;
  return e;
}

Result<uint64_t> node::Distributed::Redistribute(SessionRef session, const std::string& producer,
                                                 const std::string& consumer,
                                                 const RedistributeGrants& grants,
                                                 TransferCallback on_done) {
  std::string presented[2];  // digests of the grants given (empty: none)
  ISO_ASSIGN_OR_RETURN(presented[0], DistributedGrantDigest(grants.producer));
  ISO_ASSIGN_OR_RETURN(presented[1], DistributedGrantDigest(grants.consumer));
  auto record = std::make_shared<TransferRecord>();
  if (on_done) {
    record->waiters.push_back(std::move(on_done));
    record->caller_answers = true;
  }
  RedistributionOp::Setup setup;
  std::shared_ptr<DistributedInstance> sides[2];
  uint64_t session_id = 0;
  std::string ns;
  std::optional<ClusterRedistribution> across;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->TransferSessionLocked(session));
    ns = DistributedNamespace(*s);
    const std::string names[2] = {producer, consumer};
    bool here = true;  // every rank of both joined on this node
    for (int i = 0; i < 2; ++i) {
      auto it = impl_->distributed.find(ns + names[i]);
      if (it != impl_->distributed.end()) sides[i] = it->second;
      here = here && sides[i] && sides[i]->joined == sides[i]->dist.rank_count();
    }
    const bool mine[2] = {sides[0] && IsMember(*sides[0], s->id),
                          sides[1] && IsMember(*sides[1], s->id)};
    const bool member = mine[0] || mine[1];
    if (!here && impl_->cross && member) {
      // Some ranks joined elsewhere (or not yet): the peers say, unlocked.
      across.emplace(
          ClusterRedistribution{s->id, OwnerOf(*s), ns, producer, consumer, {sides[0], sides[1]}});
      // Every node's ranks of a side must have joined with the grant of
      // the side's ranks here, or the one presented.
      for (int i = 0; i < 2; ++i) {
        across->grant_digest[i] = mine[i] ? sides[i]->grant_digest : presented[i];
      }
    }
    for (int i = 0; i < 2 && !across; ++i) {
      if (!sides[i]) {
        return NotFound(NoDistributedInstance(impl_->distributed, ns, names[i]));
      }
      if (sides[i]->joined != sides[i]->dist.rank_count()) {
        return FailedPrecondition("distributed instance '", names[i], "' has ", sides[i]->joined,
                                  " of its ", sides[i]->dist.rank_count(), " ranks joined");
      }
    }
    if (!across && sides[0] == sides[1]) {
      return InvalidArgument("redistribution of '", ForLog(producer), "' into itself");
    }
    if (!member) {
      return PermissionDenied("redistribute: this session is no rank of '", ForLog(producer),
                              "' or '", ForLog(consumer), "'");
    }
    if (!s->creds.known()) ISO_RETURN_IF_ERROR(CheckGrants(sides, mine, presented, names));
    if (!across) {
      ISO_RETURN_IF_ERROR(Compatible(sides[0]->name, sides[0]->dist, sides[0]->element_bytes,
                                     sides[1]->name, sides[1]->dist, sides[1]->element_bytes));
      ISO_ASSIGN_OR_RETURN(setup.producers, impl_->RankEndsLocked(*sides[0], false));
      ISO_ASSIGN_OR_RETURN(setup.consumers, impl_->RankEndsLocked(*sides[1], true));
      record->owner = OwnerOf(*s);
      record->id = impl_->next_cross++;
      session_id = s->id;
      setup.disk_owner = s->disk_owner;
      // Images in memory are held for the session, as watch scratch is.
      setup.image_budgets = {s->scratch_budget, impl_->scratch_all};
      setup.disk_uid = s->creds.disk_uid();
    }
  }
  if (across) return impl_->RedistributeAcrossNodes(*std::move(across), record);
  // The distributions are constant: planned without the node lock.
  ISO_RETURN_IF_ERROR(PlanPieces(sides[0]->dist, sides[1]->dist, sides[0]->element_bytes, setup));
  setup.what = StrCat("'", ForLog(producer), "' -> '", ForLog(consumer), "'");
  setup.dims = sides[0]->dist.dims();
  setup.concurrency = impl_->config.daemon.redistribute_concurrency;
  Node::Impl* impl = impl_;
  setup.done = [impl, record](Status st) { impl->OnRuntimeDone(record, std::move(st)); };
  auto op = std::make_shared<RedistributionOp>(*impl_->runtime, std::move(setup));
  PendingCalls calls;
  bool adopted = false;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_RETURN_IF_ERROR(
        impl_->AdoptRedistributionLocked(session_id, ns, sides, op, record, calls, adopted));
  }
  if (!adopted) op->Cancel();  // the caller's session ended meanwhile
  op->Start();
  calls.Run();
  return record->id;
}

Status Node::Impl::AdoptRedistributionLocked(uint64_t session, const std::string& ns,
                                             const std::shared_ptr<DistributedInstance> sides[2],
                                             const std::shared_ptr<CrossTransfer>& op,
                                             const std::shared_ptr<TransferRecord>& record,
                                             PendingCalls& calls, bool& adopted) {
  for (int i = 0; i < 2; ++i) {
    if (!sides[i]) continue;  // no rank of it here (across nodes)
    ISO_RETURN_IF_ERROR(
        StillCurrentLocked(ns + sides[i]->name, sides[i], sides[i]->name, "redistribution"));
  }
  for (int i = 0; i < 2; ++i) {
    if (sides[i]) TrackRunning(*sides[i], op);
  }
  record->cross = op;
  adopted = AdoptLocked(session, record, calls);
  return OkStatus();
}

Status Node::Impl::StillCurrentLocked(const std::string& key,
                                      const std::shared_ptr<DistributedInstance>& d,
                                      const std::string& shown, const char* what) const {
  auto it = distributed.find(key);
  if (it == distributed.end() || it->second != d) {
    return absl::AbortedError(StrCat("distributed instance '", ForLog(shown), "' ended while the ",
                                     what, " was planned"));
  }
  return OkStatus();
}

Status Compatible(const std::string& a_name, const redistribution::Distribution& a,
                  uint64_t a_bytes, const std::string& b_name,
                  const redistribution::Distribution& b, uint64_t b_bytes) {
  if (a.extents() != b.extents() || a.dims() != b.dims() || a_bytes != b_bytes) {
    return InvalidArgument("cannot redistribute '", ForLog(a_name), "' (", a.ToString(), ", ",
                           a_bytes, "-byte elements) into '", ForLog(b_name), "' (", b.ToString(),
                           ", ", b_bytes,
                           "-byte elements): the global extents and element sizes must match");
  }
  return OkStatus();
}

void TrackRunning(DistributedInstance& d, const std::shared_ptr<CrossTransfer>& op) {
  std::erase_if(d.running, [](const std::weak_ptr<CrossTransfer>& w) { return w.expired(); });
  d.running.push_back(op);
}

}  // namespace isometry
