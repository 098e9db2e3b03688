// Instances and copies: clients register instances (a piece of an
// allocation, a file of a DSK memory, or another node's), and copy between
// two of theirs; a copy's ends are resolved under the node lock, submitted
// to the runtime (or to the cluster layer across nodes) outside it, and
// tracked until its callbacks have run.
#include <spdlog/spdlog.h>

#include <array>
#include <iterator>
#include <map>
#include <utility>

#include "core/checked.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/runtime/disk_endpoint.h"

namespace isometry {
namespace {

// Who may see, wait on or cancel a transfer: its session and the operator.
// A caller without a (valid) session is told what would let it, not that
// its session is unknown: isoctl acts without one.
Status MayTouch(const SessionOwner& owner, const Session* caller, bool is_operator,
                uint64_t transfer, std::string_view what, const std::string& state_dir) {
  if (is_operator || (caller && caller->id == owner.session)) return OkStatus();
  return PermissionDenied("transfer ", transfer, " belongs to another client (session ",
                          owner.session, "); ", what, " it needs the operator token (", state_dir,
                          "/operator.token)");
}

std::string StateName(const TransferRecord& r) {
  // Waiting: queued for staging buffers or behind other work on its
  // channels (no request dispatched yet).
  if (!r.finished) {
    const bool started =
        r.handle && r.handle->times().first_dispatch != TransferTimes::Clock::time_point{};
    return started ? "running" : "waiting";
  }
  if (r.status.ok()) return "done";
  return absl::IsCancelled(r.status) ? "cancelled" : "failed";
}

}  // namespace

// An instance's storage [offset, offset + bytes) must not wrap 2^64
// (a wrapped end would pass every later "fits" check).
Status CheckInstanceEnd(uint64_t offset, uint64_t bytes) {
  if (CheckedAdd(offset, bytes)) return OkStatus();
  return InvalidArgument("instance: offset ", offset, " + ", bytes,
                         " bytes of storage wraps past 2^64");
}

Result<FoundTransfer> Node::Impl::TouchableLocked(SessionRef session, uint64_t transfer,
                                                  bool is_operator, std::string_view what) const {
  FoundTransfer found;
  auto it = active.find(transfer);
  if (it != active.end()) {
    found = {it->second.get(), true};
  } else {
    auto f = finished.find(transfer);
    if (f != finished.end()) found.record = f->second.get();
  }
  if (!found.record) {
    return NotFound("no transfer ", transfer, " (finished transfers are kept for the last ",
                    kFinishedKept, ")");
  }
  ISO_RETURN_IF_ERROR(MayTouch(found.record->owner, FindSessionOrNull(session), is_operator,
                               transfer, what, config.daemon.state_dir));
  return found;
}

namespace {

// Measured throughput of a copy that has ended "done": its bytes over its
// whole wall time (submission to completion, queueing included), the
// figure a caller sees and the one to hold a prediction against.
void SetMeasured(TransferReport& rep) {
  if (rep.state == "done" && rep.elapsed_s > 0) {
    rep.measured_bytes_per_s = static_cast<double>(rep.bytes) / rep.elapsed_s;
  }
}

}  // namespace

const Node::Impl::PathText& Node::Impl::TextOfLocked(
    const std::shared_ptr<const Path>& path) const {
  auto it = path_texts.find(path);
  if (it != path_texts.end()) return it->second;
  if (path_texts.size() >= kPathTextsKept) path_texts.clear();
  const Topology& topo = runtime->topology();
  PathText text;
  text.path = path->ToString(topo);
  for (size_t h = 0; h < path->edges.size(); ++h) {
    const TopologyEdge& e = path->edges[h];
    HopReport hop;
    hop.src_memory = topo.FindMemory(e.src)->name;
    hop.dst_memory = topo.FindMemory(e.dst)->name;
    hop.channel = e.channel_name;
    hop.src_layout = path->nodes[h].layout.ToString();
    hop.dst_layout = path->nodes[h + 1].layout.ToString();
    text.hops.push_back(std::move(hop));
  }
  return path_texts.emplace(path, std::move(text)).first->second;
}

TransferReport Node::Impl::BuildReport(const TransferRecord& r, bool detailed) const {
  TransferReport rep;
  rep.id = r.id;
  rep.owner = r.owner;
  rep.status = r.status;
  rep.qos_class = r.qos_class;
  rep.state = StateName(r);
  if (r.cross) {
    rep.priority = r.priority;
    rep.requested_priority = r.requested_priority.value_or(r.priority);
    rep.state = r.finished ? rep.state : "running";
    rep.bytes = r.cross->bytes();
    rep.elapsed_s = std::chrono::duration<double>(NodeClock::now() - r.cross->started()).count();
    rep.predicted_bytes_per_s = r.cross->predicted_bytes_per_s();
    SetMeasured(rep);
    if (detailed) rep.path = r.cross->PathText();
    return rep;
  }
  std::optional<TransferSummary> live;  // in flight: as it stands now
  if (r.handle) live = r.handle->Summary();
  const TransferSummary* t = live ? &*live : r.ended ? &*r.ended : nullptr;
  if (!t) return rep;
  rep.priority = t->priority;
  rep.requested_priority = r.requested_priority.value_or(t->priority);
  rep.bytes = t->bytes;
  const auto end = r.finished ? t->times.finished : NodeClock::now();
  rep.elapsed_s = std::chrono::duration<double>(end - t->times.submitted).count();
  rep.predicted_bytes_per_s = t->predicted_bps;
  SetMeasured(rep);
  if (!detailed) return rep;
  const PathText& text = TextOfLocked(t->path);
  rep.path = text.path;
  rep.hops = text.hops;
  for (size_t h = 0; h < rep.hops.size(); ++h) {
    rep.hops[h].chunks_done = h < t->hops_done.size() ? t->hops_done[h] : 0;
    rep.hops[h].chunks_total = t->chunks;
  }
  return rep;
}

PendingCalls Node::Impl::Finalize(const std::shared_ptr<TransferRecord>& r) {
  PendingCalls calls;
  if (r->handle) {
    // Its ends, buffers and XDs go now, while in cache, not kFinishedKept
    // copies later.
    r->ended = r->handle->Summary();
    r->handle.reset();
  }
  r->final_report = BuildReport(*r, /*detailed=*/false);
  const TransferReport& report = r->final_report;
  ended_metrics.Record(report.status, report.bytes, report.elapsed_s, r->owner.uid);
  if (history.capacity() > 0) {
    KeptTransfer kept;
    if (r->cross) {
      auto with_path = std::make_shared<TransferReport>(report);
      with_path->path = r->cross->PathText();
      kept.report = std::move(with_path);
    } else {
      kept.report = std::shared_ptr<const TransferReport>(r, &report);
      if (r->ended) kept.path = r->ended->path;
    }
    history.Add(std::move(kept));
  }
  r->src.reset();
  r->dst.reset();
  active.erase(r->id);
  finished[r->id] = r;
  finished_order.push_back(r->id);
  if (finished_order.size() > kFinishedKept) {
    finished.erase(finished_order.front());
    finished_order.pop_front();
  }
  calls.callbacks.assign(std::make_move_iterator(r->waiters.begin()),
                         std::make_move_iterator(r->waiters.end()));
  r->waiters.clear();
  auto s = sessions.find(r->owner.session);
  if (s != sessions.end()) {
    s->second->transfers.erase(r->id);
    if (s->second->on_done && !r->caller_answers) {
      calls.callbacks.insert(calls.callbacks.begin(), s->second->on_done);
    }
  }
  calls.record = r;
  idle_cv.SignalAll();
  return calls;
}

namespace {

// The record whose Runtime::Copy this thread is inside (Copies::Start).
// Its completion on this thread is the inline path's: it ends before
// AdoptLocked makes it findable, so no other thread can see it yet.
thread_local const TransferRecord* submitting = nullptr;

// Puts back the outer record's mark when it ends: a copy started from
// inside another's Runtime::Copy (a callback run inline) leaves the outer
// one's inline end on the unlocked path too.
class Submitting {
 public:
  explicit Submitting(const TransferRecord* r) : outer_(std::exchange(submitting, r)) {}
  ~Submitting() { submitting = outer_; }
  Submitting(const Submitting&) = delete;
  Submitting& operator=(const Submitting&) = delete;

 private:
  const TransferRecord* const outer_;
};

}  // namespace

void Node::Impl::OnRuntimeDone(const std::shared_ptr<TransferRecord>& r, Status s) {
  if (submitting == r.get()) {
    // Ended inline: AdoptLocked finalizes it. Nothing else can reach the
    // record yet, so the node lock (shared with every session) is skipped.
    r->finished = true;
    r->status = std::move(s);
    return;
  }
  PendingCalls calls;
  {
    absl::MutexLock lock(&mu);
    r->finished = true;
    r->status = std::move(s);
    // Completed before Copy() registered it (the inline path): Copy()
    // finalizes instead.
    if (r->handle || r->cross) calls = Finalize(r);
  }
  calls.Run();
}

Result<uint64_t> Node::Impl::StartCross(uint64_t session,
                                        const std::shared_ptr<TransferRecord>& record,
                                        CrossCopySpec spec, const CopySpec& copy) {
  if (!cross) return FailedPrecondition("this node has no peers: cross-node copies need [[peer]]");
  // A layout end's box is in its form when the other end has one.
  spec.box = CopyBox(spec.src.local.form.get(), copy.box);
  spec.options = copy.options;
  spec.qos_class = record->qos_class;
  ISO_ASSIGN_OR_RETURN(auto handle, cross->Copy(std::move(spec), [this, record](Status s) {
    OnRuntimeDone(record, std::move(s));
  }));
  PendingCalls calls;
  bool adopted;
  {
    absl::MutexLock lock(&mu);
    record->cross = handle;
    adopted = AdoptLocked(session, record, calls);
  }
  if (!adopted) handle->Cancel();
  calls.Run();
  return record->id;
}

void Node::Impl::NoteClampLocked(TransferRecord& record, int asked, int runs_at) {
  record.priority = runs_at;
  if (runs_at < asked) {
    record.requested_priority = asked;
    ++qos_clamped[record.qos_class];
  }
}

bool Node::Impl::AdoptLocked(uint64_t session, const std::shared_ptr<TransferRecord>& record,
                             PendingCalls& calls) {
  auto s = sessions.find(session);
  const bool adopted = s != sessions.end();
  if (record->finished) {
    // Ended already (the inline path): straight to the finished ones.
    calls = Finalize(record);
    return adopted;
  }
  active[record->id] = record;
  if (adopted) s->second->transfers.insert(record->id);
  return adopted;
}

InstanceRef Node::Impl::LocalRefLocked(const Instance& in) const {
  if (!in.remote_node.empty()) return InstanceRef{};
  if (in.private_range) {
    const MemoryId proc_id = runtime->FindMemory(kProcessMemoryName).value_or(MemoryId{});
    InstanceRef r{proc_id, nullptr, in.private_range->bytes - in.offset, in.shape};
    r.process = in.private_range->process;
    r.address = in.private_range->address + in.offset;
    return r;
  }
  if (!in.allocation) {
    InstanceRef r{runtime->topology().memories[in.disk_memory].id, nullptr, 0, in.shape};
    r.file = in.file;
    r.file_offset = in.offset;
    return r;
  }
  const MemoryId mem = runtime->topology().memories[in.allocation->pool->memory].id;
  return InstanceRef{mem, in.allocation->shm.data() + in.offset,
                     in.allocation->shm.size() - in.offset, in.shape};
}

Result<Session*> Node::Impl::TransferSessionLocked(SessionRef ref) {
  if (draining) return Unavailable("isometryd is shutting down; no new copies");
  ISO_ASSIGN_OR_RETURN(Session * s, FindSession(ref));
  const uint32_t max_transfers = config.daemon.max_transfers_per_session;
  if (s->transfers.size() >= max_transfers) {
    return ResourceExhausted("this session has ", s->transfers.size(),
                             " transfers in flight; daemon.max_transfers_per_session is ",
                             max_transfers, " (wait for some to finish)");
  }
  return s;
}

// memory.quota_bytes is per uid; where gRPC hides the uid, per session (one
// gRPC user cannot use up another's).
Status Node::Impl::PriorityAllowedLocked(const Session& s, int priority) const {
  const DaemonConfig& dc = config.daemon;
  int32_t ceiling = dc.max_priority;
  const char* key = "daemon.max_priority";
  if (s.creds.known()) {
    if (auto it = dc.priority_ceilings.find(s.creds.uid); it != dc.priority_ceilings.end()) {
      ceiling = it->second;
      key = "daemon.priority_ceilings";
    }
  }
  if (priority > ceiling) {
    return PermissionDenied("copy priority ", priority, " is above this client's ceiling of ",
                            ceiling, " (", key, ")");
  }
  return OkStatus();
}

namespace {

// A copy's two instances (`ids`: source, destination) into `ends`: this
// session's own, their private ranges alive, the destination's writable.
Status FindCopyEnds(const std::map<uint64_t, Instance>& instances, uint64_t session,
                    const std::array<uint64_t, 2>& ids, const Instance* ends[2]) {
  for (int i = 0; i < 2; ++i) {
    auto it = instances.find(ids[i]);
    if (it == instances.end() || it->second.session != session) {
      return NotFound("no ", i ? "destination" : "source", " instance ", ids[i],
                      " registered in this session");
    }
    ends[i] = &it->second;
    const std::shared_ptr<PrivateRange>& pr = it->second.private_range;
    if (pr && !pr->alive) {
      return NotFound(i ? "destination" : "source", " instance ", ids[i], ": private range ",
                      pr->id, " ended with its session");
    }
    if (pr && i == 1) {
      ISO_RETURN_IF_ERROR(CheckWritable(*pr, StrCat("destination instance ", ids[i])));
    }
  }
  return OkStatus();
}

}  // namespace

Status Node::Impl::ResolveCopyLocked(SessionRef session, const CopySpec& spec,
                                     TransferRecord& record, ResolvedCopy& resolved) {
  std::optional<CrossCopySpec>& cross = resolved.cross;
  ISO_ASSIGN_OR_RETURN(Session * s, TransferSessionLocked(session));
  resolved.session = s->id;
  resolved.request.qos_class = s->qos_class;
  record.qos_class = s->qos_class;
  record.owner = OwnerOf(*s);
  ISO_RETURN_IF_ERROR(PriorityAllowedLocked(*s, spec.options.priority));
  resolved.request.disk_owner = s->disk_owner;
  resolved.request.disk_uid = s->creds.disk_uid();
  const Instance* ends[2] = {nullptr, nullptr};
  ISO_RETURN_IF_ERROR(
      FindCopyEnds(instances, resolved.session, {spec.src_instance, spec.dst_instance}, ends));
  // A datatype on either end: form ends moving streams, checked by PackEndsLocked.
  const bool form_copy = ends[0]->form || ends[1]->form;
  if (!form_copy) {
    ISO_RETURN_IF_ERROR(
        CheckCopyDimensions(ends[0]->shape.bounds, ends[1]->shape.bounds, spec.box));
  }
  if (!ends[0]->remote_node.empty() || !ends[1]->remote_node.empty()) {
    cross.emplace();
    CrossEnd* out[2] = {&cross->src, &cross->dst};
    for (int i = 0; i < 2; ++i) {
      const Instance& in = *ends[i];
      CrossEnd& e = *out[i];
      e.node = in.remote_node;
      e.shape = in.shape;
      if (!in.remote_node.empty()) {
        e.allocation = in.remote_allocation;
        e.offset = in.offset;
        e.memory = in.remote_memory;
        e.file = in.file;
      }
    }
    if (!spec.via.empty()) {
      return InvalidArgument("explicit intermediate hops are not supported across nodes");
    }
  }
  resolved.request.src = LocalRefLocked(*ends[0]);
  resolved.request.dst = LocalRefLocked(*ends[1]);
  if (spec.client_runs_hops && s->own_hops && !cross) {
    // Ends in this session's own process: its client runs those hops.
    InstanceRef* refs[2] = {&resolved.request.src, &resolved.request.dst};
    for (int i = 0; i < 2; ++i) {
      const std::shared_ptr<PrivateRange>& pr = ends[i]->private_range;
      if (pr && pr->session == s->id) refs[i]->own_hops = s->own_hops;
    }
  }
  if (form_copy) {
    ISO_RETURN_IF_ERROR(PackEndsLocked(ends, spec.box, resolved.request, !cross.has_value()));
  }
  if (!cross) {
    ISO_ASSIGN_OR_RETURN(resolved.active,
                         PrepareActiveLocked(ends, spec.box, resolved.request, resolved.session,
                                             {s->scratch_budget, scratch_all}));
  } else {
    record.id = next_cross++;
    cross->source = {resolved.session, record.id};
    CrossEnd* out[2] = {&cross->src, &cross->dst};
    InstanceRef* refs[2] = {&resolved.request.src, &resolved.request.dst};
    for (int i = 0; i < 2; ++i) {
      const Instance& in = *ends[i];
      if (in.allocation && in.allocation->watch) {
        // This node's end of a cross-node copy in a watched allocation:
        // its half goes through the watch (a get at the source, a put at
        // the destination), as a local copy would.
        const AccessSource source{resolved.session, 0, record.id};
        ISO_ASSIGN_OR_RETURN(
            out[i]->active,
            PrepareActiveEnd(in.allocation->watch, i == 0 ? active::Op::kGet : active::Op::kPut,
                             *refs[i], in.offset, form_copy ? std::nullopt : spec.box, source,
                             {s->scratch_budget, scratch_all}));
      }
      out[i]->local = *refs[i];
      out[i]->keep = in.allocation;
    }
    if (form_copy) {  // both ends the stream's 1-D shape, as on one node
      cross->src.shape = StreamShape(resolved.request.src.form->bytes);
      cross->dst.shape = StreamShape(resolved.request.dst.form->bytes);
    }
  }
  record.src = ends[0]->allocation;
  record.dst = ends[1]->allocation;
  // Whole, so every option reaches the runtime; Copy lowers the priority to
  // its class's ceiling.
  resolved.request.options = spec.options;
  for (const ViaHop& h : spec.via) {
    ISO_ASSIGN_OR_RETURN(MemoryId m, runtime->FindMemory(h.memory));
    ISO_ASSIGN_OR_RETURN(Layout l, Layout::Parse(h.layout, ends[0]->shape.bounds.dims));
    resolved.request.via.push_back({m, l});
  }
  return OkStatus();
}

Result<uint64_t> node::Copies::Copy(SessionRef session, const CopySpec& spec,
                                    TransferCallback on_done, CopyTerms* terms) {
  return Start(session, spec, std::move(on_done), terms, /*answer_early=*/false);
}

Result<uint64_t> node::Copies::CopyAnsweredEarly(SessionRef session, const CopySpec& spec,
                                                 TransferCallback on_done) {
  return Start(session, spec, std::move(on_done), nullptr, /*answer_early=*/true);
}

Result<uint64_t> node::Copies::Start(SessionRef session, const CopySpec& spec,
                                     TransferCallback on_done, CopyTerms* terms,
                                     bool answer_early) {
  auto record = std::make_shared<TransferRecord>();
  if (on_done) {
    record->waiters.push_back(std::move(on_done));
    record->caller_answers = true;
  }
  Node::Impl::ResolvedCopy resolved;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_RETURN_IF_ERROR(impl_->ResolveCopyLocked(session, spec, *record, resolved));
  }
  CopyRequest& req = resolved.request;
  req.box = CopyBox(req.src.form.get(), spec.box);
  req.share = resolved.session;
  // Its class's ceiling lowers the priority, visibly (transfer info,
  // isoctl qos, isometry_qos_clamped_total): a copy is never refused for it.
  if (resolved.cross) {
    const int runs_at =
        std::min<int>(req.options.priority, impl_->runtime->QosCeiling(req.qos_class));
    record->priority = runs_at;
    if (runs_at < spec.options.priority) {
      absl::MutexLock lock(&impl_->mu);
      impl_->NoteClampLocked(*record, spec.options.priority, runs_at);
    }
    if (terms) *terms = {runs_at, req.qos_class, spec.options.priority};
    CopySpec clamped = spec;
    clamped.options.priority = runs_at;
    return impl_->StartCross(resolved.session, record, *std::move(resolved.cross), clamped);
  }
  // The runtime clamps a local copy under its own lock (Transfer::priority).
  req.clamp_priority = true;
  Node::Impl* impl = impl_;
  std::shared_ptr<ActiveCopy> active = std::move(resolved.active);
  if (active) {
    // Completes once its watches have applied and logged it.
    active->finish = [impl, record](Status s) { impl->OnRuntimeDone(record, std::move(s)); };
    req.on_complete = [active](Status s) { active->Completed(std::move(s)); };
  } else {
    req.on_complete = [impl, record](Status s) { impl->OnRuntimeDone(record, std::move(s)); };
  }
  // Not under the node lock: the inline path completes inside Copy().
  Result<Transfer> submitted = [&] {
    const Submitting inline_ends(record.get());
    return impl_->runtime->Copy(std::move(req));
  }();
  ISO_ASSIGN_OR_RETURN(Transfer t, std::move(submitted));
  if (active) active->Registered(t.id());
  if (terms) *terms = {t.priority(), record->qos_class, spec.options.priority};
  PendingCalls calls;
  bool adopted;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->NoteClampLocked(*record, spec.options.priority, t.priority());
    record->id = t.id();
    record->handle = t;
    if (answer_early && record->finished && record->caller_answers) {
      // Ended inline, and not findable before AdoptLocked: the caller's is
      // its only waiter (CopyAnsweredEarly).
      TransferReport first;
      first.id = record->id;
      first.status = record->status;
      first.state = StateName(*record);
      record->waiters.front()(first);
      record->waiters.clear();
    }
    adopted = impl_->AdoptLocked(resolved.session, record, calls);
  }
  if (!adopted) t.Cancel();  // the session ended while we submitted
  calls.Run();
  return t.id();
}

Status node::Copies::Cancel(SessionRef session, uint64_t transfer, bool is_operator) {
  std::optional<Transfer> t;
  std::shared_ptr<CrossTransfer> cross;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(FoundTransfer f,
                         impl_->TouchableLocked(session, transfer, is_operator, "cancelling"));
    if (!f.in_flight) return OkStatus();  // already ended: nothing to do
    t = f.record->handle;
    cross = f.record->cross;
  }
  if (t) t->Cancel();
  if (cross) cross->Cancel();
  return OkStatus();
}

Status node::Copies::WhenDone(SessionRef session, uint64_t transfer, bool is_operator,
                              TransferCallback cb) {
  TransferReport rep;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(FoundTransfer f,
                         impl_->TouchableLocked(session, transfer, is_operator, "waiting on"));
    if (f.in_flight) {
      f.record->waiters.push_back(std::move(cb));
      return OkStatus();
    }
    rep = f.record->final_report;
  }
  cb(rep);
  return OkStatus();
}

}  // namespace isometry
