// The initiator's side of a cross-node copy: plan the whole path over the
// joined graphs, then set up the halves (the receiving one first) and
// follow them to the end (CrossOp).
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "core/log_escape.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/cluster/cross_op.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/runtime/chunker.h"
#include "planner/planner.h"
#include "planner/topology_join.h"

namespace isometry {

namespace cluster {

// ---- CrossOp ----

void CrossOp::Cancel() {
  Fail(absl::CancelledError(StrCat("cross-node transfer ", key_, " was cancelled")));
}

void CrossOp::Fail(const Status& why) {
  std::optional<Transfer> local;
  std::vector<std::string> nodes;
  std::vector<std::shared_ptr<grpc::ClientContext>> awaits;
  {
    absl::MutexLock lock(&mu_);
    if (landed_) return;  // done already: what is left ends by itself
    if (failure_.ok()) failure_ = why;
    local = local_;
    nodes = nodes_;
    for (auto& [n, ctx] : awaits_) awaits.push_back(ctx);
  }
  if (local) local->Abort(why);
  for (const std::string& n : nodes) {
    if (n.empty()) continue;
    Peer* p = impl_->FindPeer(n);
    if (!p) continue;
    AsyncCall<peer_api::AbortHalfRequest, peer_api::AbortHalfResponse> call;
    SetDeadline(*call.ctx, impl_->config.cluster.peer_timeout_ms);
    call.req->set_key(key_);
    call.req->set_code(static_cast<int>(why.code()));
    call.req->set_message(std::string(why.message()));
    impl_->Authorize(*call.ctx, *p, "AbortHalf", *call.req);
    p->stub->async()->AbortHalf(call.ctx.get(), call.req.get(), call.resp.get(),
                                [call](const grpc::Status&) {});
  }
  // A peer that vanished never answers AwaitHalf: stop waiting.
  for (auto& ctx : awaits) ctx->TryCancel();
}

void CrossOp::HalfDone(const Status& s, bool lands) {
  std::function<void(Status)> done;
  Status final;
  bool fail_others = false;
  {
    absl::MutexLock lock(&mu_);
    if (s.ok() && lands) landed_ = true;
    if (!s.ok() && failure_.ok() && !landed_) {
      failure_ = s;
      fail_others = true;
    }
    --pending_;
    if (pending_ == 0 && setup_done_ && done_) {
      done = std::exchange(done_, nullptr);
      final = landed_ ? OkStatus() : failure_;
    }
  }
  if (fail_others) Fail(s);
  if (done) Finish(done, std::move(final));
}

void CrossOp::SetUpDone() {
  std::function<void(Status)> done;
  Status final;
  {
    absl::MutexLock lock(&mu_);
    setup_done_ = true;
    if (pending_ == 0 && done_) {
      done = std::exchange(done_, nullptr);
      final = landed_ ? OkStatus() : failure_;
    }
  }
  if (done) Finish(done, std::move(final));
}

void CrossOp::Finish(const std::function<void(Status)>& done, Status final) {
  {
    // A context holds its call, and the call the connection it went over:
    // kept with the op (which outlives the copy in the transfer's record),
    // a broken one would hold its socket for ever.
    absl::MutexLock lock(&mu_);
    awaits_.clear();
  }
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->ops.erase(key_);
  }
  done(std::move(final));
}

}  // namespace cluster

// ---- the copy (planning: cross_plan.cc) ----

NodeMemory Cluster::Impl::NameOf(const CrossEnd& e) const {
  if (!e.node.empty()) return {e.node, e.memory};
  const TopologyMemory* m = node->runtime().topology().FindMemory(e.local.memory);
  return {self(), m ? m->name : ""};
}

Result<std::shared_ptr<CrossTransfer>> Cluster::Impl::Copy(CrossCopySpec spec,
                                                           std::function<void(Status)> done) {
  const EndForm* forms[2] = {spec.src.local.form.get(), spec.dst.local.form.get()};
  ISO_RETURN_IF_ERROR(MatchForms(forms[0], forms[1], /*has_box=*/false));
  if (!(spec.src.shape.fields == spec.dst.shape.fields)) {
    return InvalidArgument("copy: source and destination field spaces differ");
  }
  ISO_RETURN_IF_ERROR(CheckCopyDimensions(spec.src.shape.bounds, spec.dst.shape.bounds, spec.box));
  const Box box = spec.box.value_or(spec.src.shape.bounds);
  ISO_RETURN_IF_ERROR(box.Validate("copy box"));
  if (!spec.src.shape.bounds.contains(box) || !spec.dst.shape.bounds.contains(box)) {
    return OutOfRange("copy box ", ToString(box), " lies outside an instance's index space");
  }
  if (auto eager = TryEagerPut(spec, done)) return *std::move(eager);
  return CopyAsHalves(std::move(spec), std::move(done));
}

Result<std::shared_ptr<CrossTransfer>> Cluster::Impl::CopyAsHalves(
    CrossCopySpec spec, std::function<void(Status)> done) {
  const EndForm* forms[2] = {spec.src.local.form.get(), spec.dst.local.form.get()};
  const Box box = spec.box.value_or(spec.src.shape.bounds);
  ISO_ASSIGN_OR_RETURN(CrossPlan plan,
                       PlanCross(NameOf(spec.src), NameOf(spec.dst), spec.src.shape.layout,
                                 spec.dst.shape.layout, box, spec.src.shape.fields,
                                 /*relays=*/!forms[0]));  // a form stays on its end's node
  CostEnds(plan.path, forms[0], forms[1], plan.topo);
  uint64_t key;
  {
    absl::MutexLock lock(&mu);
    key = (static_cast<uint64_t>(config.runtime.node) << 40) | (next_key++ & ((1ull << 40) - 1));
  }
  const uint64_t bytes = box.volume() * spec.src.shape.fields.total_bytes();
  auto op = std::make_shared<CrossOp>(this, key, plan.path.ToString(plan.topo), bytes,
                                      plan.path.predicted_bps, std::move(done));
  {
    absl::MutexLock lock(&mu);
    ops[key] = op;
  }
  Post([this, op, spec = std::move(spec), plan = std::move(plan)]() mutable {
    SetUp(op, spec, plan);
  });
  return std::static_pointer_cast<CrossTransfer>(op);
}

Result<PlanReport> Cluster::Impl::Explain(const std::string& src_memory, const Layout& src_layout,
                                          const std::string& dst_memory, const Layout& dst_layout,
                                          const Box& bounds, const FieldSpace& fields) {
  ISO_ASSIGN_OR_RETURN(CrossPlan plan, PlanCross(SplitNodeMemory(src_memory, self()),
                                                 SplitNodeMemory(dst_memory, self()), src_layout,
                                                 dst_layout, bounds, fields, /*relays=*/true));
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid,
                       GridAlong(plan.path, bounds, fields, plan.chunk_target, plan.slot_limit));
  return ReportPlan(ExplainGrid(std::move(plan.path), grid, fields.total_bytes(),
                                CrossNodeSlots(node->runtime().config())),
                    plan.topo);
}

Result<PlanReport> Cluster::Impl::ExplainForms(const std::string& src_memory,
                                               const std::string& dst_memory, const EndForm& src,
                                               const EndForm& dst) {
  ISO_RETURN_IF_ERROR(MatchForms(&src, &dst, /*has_box=*/false));
  const InstanceShape shape = StreamShape(src.bytes);
  ISO_ASSIGN_OR_RETURN(CrossPlan plan, PlanCross(SplitNodeMemory(src_memory, self()),
                                                 SplitNodeMemory(dst_memory, self()), shape.layout,
                                                 shape.layout, shape.bounds, shape.fields,
                                                 /*relays=*/false));
  CostEnds(plan.path, &src, &dst, plan.topo);
  ISO_ASSIGN_OR_RETURN(ChunkGrid grid, GridAlong(plan.path, shape.bounds, shape.fields,
                                                 plan.chunk_target, plan.slot_limit));
  const PlanExplanation ex =
      ExplainGrid(std::move(plan.path), grid, 1, CrossNodeSlots(node->runtime().config()));
  PlanReport rep = ReportPlan(ex, plan.topo);
  rep.why = WhyForms(ex, src, dst, plan.topo);
  return rep;
}

// ---- set-up of the halves ----

std::string Cluster::Impl::NodeDownIn(const CrossPlan& plan) const {
  for (const cluster::PathStretch& st : plan.stretches) {
    if (st.node == self()) continue;
    const Peer* p = FindPeer(st.node);
    if (!p) return st.node;
    absl::MutexLock lock(&mu);
    if (!StateLocked(*p).up) return st.node;
  }
  return "";
}

void Cluster::Impl::SetUp(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                          const CrossPlan& plan) {
  if (setup_delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(setup_delay_ms));
  // A node of the plan declared down since it was made (MarkDown found no
  // half of this copy to fail yet): planned again without it, so no half
  // goes to a node this one knows is gone (a relay is left out; an end
  // down fails the copy with the reason).
  const std::string down = NodeDownIn(plan);
  if (down.empty()) {
    SetUpHalves(op, spec, plan);
  } else {
    Result<CrossPlan> again =
        PlanCross(NameOf(spec.src), NameOf(spec.dst), spec.src.shape.layout, spec.dst.shape.layout,
                  spec.box.value_or(spec.src.shape.bounds), spec.src.shape.fields,
                  /*relays=*/!spec.src.local.form);
    if (again.ok()) {
      CostEnds(again->path, spec.src.local.form.get(), spec.dst.local.form.get(), again->topo);
      const std::string path = again->path.ToString(again->topo);
      spdlog::info(
          "cross-node transfer {}: node '{}' went down after it was planned; "
          "planned again: {}",
          op->key(), ForLog(down), path);
      op->Replanned(path, again->path.predicted_bps);
      SetUpHalves(op, spec, *again);
    } else {
      op->Fail(again.status());
    }
  }
  op->SetUpDone();
}

void Cluster::Impl::SetUpHalves(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                                const CrossPlan& plan) {
  if (plan.forward()) {  // that node runs it whole
    cluster::HalfRole role{true, spec.src.node, "", plan.path.edges.size()};
    op->AddHalf(role.here);
    SetUpPeerHalf(op, spec, role, plan, nullptr);
    return;
  }
  // The receiving half first, then the relays back towards the source:
  // each one's credits are what lets the one before it send.
  const std::vector<cluster::PathStretch>& st = plan.stretches;
  // A direct copy's network hop may take the RDMA link between its two
  // nodes: the receiving half routes it and answers with the tag, which
  // the sending half gets (0: TCP). Relayed copies take TCP.
  uint32_t rdma_tag = 0;
  for (size_t i = st.size(); i-- > 0;) {
    if (op->failed()) break;
    cluster::HalfRole role;
    role.here = st[i].node;
    role.sending = i == 0;
    role.partner = role.sending ? st[1].node : st[i - 1].node;
    role.net_hop = role.sending ? st[0].out_hop : st[i].in_hop;
    if (i > 0 && i + 1 < st.size()) {  // a relay
      role.relay_hop = st[i].out_hop;
      role.relay_partner = st[i + 1].node;
    }
    op->AddHalf(role.here == self() ? "" : role.here);
    role.rdma_tag = st.size() == 2 && role.sending ? rdma_tag : 0;
    const bool go_on = role.here == self() ? SetUpOwnHalf(op, spec, role, plan, &rdma_tag)
                                           : SetUpPeerHalf(op, spec, role, plan, &rdma_tag);
    if (!go_on) break;
  }
}

bool Cluster::Impl::SetUpOwnHalf(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                                 const cluster::HalfRole& role, const CrossPlan& plan,
                                 uint32_t* rdma_tag) {
  if (role.relay_hop != 0) {  // PlanCross never relays through the initiator
    op->HalfDone(Internal("cross-node copy ", op->key(), ": a relay through this node"));
    return false;
  }
  const CrossEnd& end = role.sending ? spec.src : spec.dst;
  const CrossEnd& other = role.sending ? spec.dst : spec.src;
  RemotePart part{op->key(),    plan.path,         role.net_hop,   role.sending,
                  role.partner, plan.chunk_target, plan.slot_limit};
  part.qos_class = spec.qos_class;
  std::weak_ptr<CrossOp> weak = op;
  uint32_t tag = role.rdma_tag;
  Status s = StartLocalHalf(
      op->key(), std::move(part), end, other.shape, spec.box, spec.options, self(),
      spec.source.transfer,
      [weak, lands = !role.sending](const Status& st) {
        if (auto o = weak.lock()) o->HalfDone(st, lands);
      },
      &tag);
  if (!role.sending) *rdma_tag = tag;
  if (!s.ok()) {
    op->HalfDone(s);
    return false;
  }
  std::optional<Transfer> t;
  {
    absl::MutexLock lock(&mu);
    if (auto h = halves.find(op->key()); h != halves.end()) t = h->second->transfer;
  }
  if (t) op->SetLocal(*t);  // not under mu: it may abort, whose completion takes mu
  return true;
}

bool Cluster::Impl::SetUpPeerHalf(const std::shared_ptr<CrossOp>& op, const CrossCopySpec& spec,
                                  const cluster::HalfRole& role, const CrossPlan& plan,
                                  uint32_t* rdma_tag) {
  const std::string& here = role.here;
  Peer* p = FindPeer(here);
  if (!p) {
    op->HalfDone(Unavailable("node '", here, "' left the cluster"));
    return false;
  }
  cluster::HalfOut out;
  out.key = op->key();
  out.sending = role.sending;
  out.path = &plan.path;
  out.net_hop = role.net_hop;
  out.chunk_target = plan.chunk_target;
  out.slot_limit = plan.slot_limit;
  out.box = spec.box.value_or(spec.src.shape.bounds);
  // A relay holds neither end: it gets the source's shape as its "end".
  const bool from_src = role.sending || role.relay_hop != 0 || plan.forward();
  out.end = from_src ? &spec.src : &spec.dst;
  out.other = from_src ? &spec.dst : &spec.src;
  out.options = spec.options;
  out.qos_class = spec.qos_class;
  out.partner = role.partner;
  out.source = spec.source;
  out.relay_hop = role.relay_hop;
  out.relay_partner = role.relay_partner;
  if (plan.forward()) out.forward_dst = &spec.dst;
  out.rdma_tag = role.rdma_tag;
  uint32_t answered = 0;
  Status started = CallStartHalf(*p, here, out, &answered);
  if (!started.ok()) {
    // A sender refusing the route this node (the receiver) made: no link
    // there. This node drops its own (an abort tells a receiver elsewhere).
    if (role.sending && role.rdma_tag != 0 && role.partner == self()) {
      RdmaRefused(here, started);
    }
    op->HalfDone(started);
    return false;
  }
  // Only a direct receiving half routes; anything else from it is ignored.
  if (rdma_tag && !role.sending && role.relay_hop == 0 && !plan.forward()) *rdma_tag = answered;
  if (op->failed()) op->Cancel();  // failed while the peer set its half up: end it there too
  cluster::AsyncCall<peer_api::AwaitHalfRequest, peer_api::AwaitHalfResponse> call;
  call.req->set_key(op->key());
  Authorize(*call.ctx, *p, "AwaitHalf", *call.req);
  op->AddAwait(here, call.ctx);
  std::weak_ptr<CrossOp> weak = op;
  const bool lands = plan.forward() || (!role.sending && role.relay_hop == 0);
  // What was in flight there, for the message when the node goes away.
  const std::string half = plan.forward()        ? "the whole copy (forwarded)"
                           : role.relay_hop != 0 ? "its relaying half"
                           : role.sending        ? "its sending half"
                                                 : "its receiving half";
  p->stub->async()->AwaitHalf(
      call.ctx.get(), call.req.get(), call.resp.get(),
      [weak, call, here, lands, half](const grpc::Status& gs2) {
        auto o = weak.lock();
        if (!o) return;
        if (!gs2.ok()) {
          // gRPC says only "Socket closed" (or "Stream removed") when the
          // peer died mid-copy; a cancel of ours ends the copy already.
          o->HalfDone(Unavailable(
              StrCat("node '", here,
                     "' went away while the copy ran: its connection to this node was lost (",
                     gs2.error_message(), ") with ", half, " of ", o->bytes(), " bytes in flight (",
                     o->PathText(), ")")));
        } else {
          o->HalfDone(
              Status(static_cast<absl::StatusCode>(call.resp->code()), call.resp->message()),
              lands);
        }
      });
  return true;
}

Status Cluster::Impl::CallStartHalf(const Peer& p, const std::string& here, cluster::HalfOut& out,
                                    uint32_t* rdma_tag) {
  const std::shared_ptr<const EndForm>& end_form = out.end->local.form;
  std::string serialized;
  if (end_form) {
    serialized = SerializeForm(end_form->form);
    if (serialized.size() > kMaxSerializedForm) {
      return ResourceExhausted("the canonical form of ", end_form->what, " takes ",
                               serialized.size(), " bytes; at most ", kMaxSerializedForm,
                               " go to a peer (describe the data more regularly)");
    }
    out.form_hash = SerializedFormHash(serialized);
    if (!forms.Known(here, out.form_hash, end_form->form)) out.form = &serialized;
  }
  // A forwarded datatype copy's destination form travels whole each time.
  std::string dst_serialized;
  if (out.forward_dst && out.forward_dst->local.form) {
    dst_serialized = SerializeForm(out.forward_dst->local.form->form);
    if (dst_serialized.size() > kMaxSerializedForm) {
      return ResourceExhausted("the canonical form of ", out.forward_dst->local.form->what,
                               " takes ", dst_serialized.size(), " bytes; at most ",
                               kMaxSerializedForm, " go to a peer");
    }
    out.dst_form_hash = SerializedFormHash(dst_serialized);
    out.dst_form = &dst_serialized;
  }
  for (bool again = false;; again = true) {
    if (end_form) forms.CountSent(out.form != nullptr, again);
    const peer_api::StartHalfRequest req = cluster::ToProto(out);
    grpc::ClientContext ctx;
    cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
    Authorize(ctx, p, "StartHalf", req);
    peer_api::StartHalfResponse resp;
    grpc::Status gs = p.stub->StartHalf(&ctx, req, &resp);
    if (!gs.ok()) return cluster::FromGrpc(gs, StrCat("node '", here, "' refused its half"));
    if (resp.unknown_form() == 0) {
      if (rdma_tag) *rdma_tag = resp.rdma_tag() <= rdma::kMaxTag ? resp.rdma_tag() : 0;
      if (out.form) {
        forms.Acknowledged(here, out.form_hash,
                           std::shared_ptr<const CanonicalForm>(end_form, &end_form->form),
                           serialized.size());
      }
      return OkStatus();
    }
    // The peer lost the form (restarted, or evicted it): once more with
    // its bytes.
    forms.Forget(here, out.form_hash);
    if (out.form || resp.unknown_form() != out.form_hash) {
      return Internal("node '", here, "' does not know canonical form ", resp.unknown_form(),
                      " (asked for ", out.form_hash, out.form ? ", sent with its bytes)" : ")");
    }
    out.form = &serialized;
  }
}

}  // namespace isometry
