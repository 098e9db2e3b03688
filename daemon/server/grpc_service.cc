#include "daemon/server/grpc_service.h"

#include <absl/synchronization/mutex.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <thread>

#include "core/random.h"
#include "core/thread_slice.h"
#include "daemon/node/copies.h"
#include "daemon/node/distributed.h"
#include "daemon/node/instances.h"
#include "daemon/node/introspection.h"
#include "daemon/node/pools.h"
#include "daemon/node/sessions.h"
#include "daemon/node/traffic_classes.h"
#include "daemon/node/watches.h"
#include "daemon/server/active_rpc.h"
#include "daemon/server/attach_stream.h"
#include "daemon/server/convert.h"
#include "daemon/server/convert_distributed.h"
#include "daemon/server/convert_watch.h"
#include "daemon/server/grpc_streams.h"
#include "daemon/server/qos_rpc.h"
#include "daemon/server/timer.h"
#include "daemon/server/translate_pool.h"
#include "daemon/server/waiting_copy.h"

namespace isometry {

namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;

constexpr char kSessionKey[] = "isometry-session";
constexpr char kOperatorKey[] = "isometry-operator";

// The session token the call carries ("" for none): resolved once, by
// Service::SessionOf, and never passed below the service.
std::string TokenOf(const CallbackServerContext* ctx) {
  auto it = ctx->client_metadata().find(kSessionKey);
  if (it == ctx->client_metadata().end()) return {};
  return std::string(it->second.data(), it->second.size());
}

ServerUnaryReactor* Reply(CallbackServerContext* ctx, const Status& s) {
  ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(s));
  return r;
}

class Service final : public ActiveCallbacks, public GrpcService {
 public:
  // The caller presented the operator token (compared in constant time).
  // The calling session, resolved from its token once per call (none for
  // no token, a wrong one or a closed session).
  SessionRef SessionOf(const CallbackServerContext* ctx) const {
    return node_.sessions().Resolve(TokenOf(ctx));
  }

  bool IsOperator(const CallbackServerContext* ctx) const {
    auto it = ctx->client_metadata().find(kOperatorKey);
    if (operator_token_.empty() || it == ctx->client_metadata().end()) return false;
    return SameSecret(std::string_view(it->second.data(), it->second.size()), operator_token_);
  }

  Service(Node& node, std::string operator_token, PeersProvider peers)
      : ActiveCallbacks(node),
        node_(node),
        operator_token_(std::move(operator_token)),
        peers_(std::move(peers)),
        pool_(TranslatePool::Make({node.config().daemon.translate_threads,
                                   node.config().daemon.translate_queue,
                                   node.config().daemon.max_translates_per_session,
                                   node.config().daemon.max_translate_weight})) {}

  grpc::Service* service() override { return this; }

  void Shutdown() override {
    // The states, not the reactors: a stream may end (and its reactor be
    // deleted) between taking the list and finishing it; FinishOnce on a
    // state whose reactor is gone does nothing.
    std::vector<std::shared_ptr<AttachState>> streams;
    {
      absl::MutexLock lock(&mu_);
      for (AttachReactor* r : attached_) streams.push_back(r->state());
    }
    for (auto& s : streams) s->FinishOnce(grpc::Status::OK);
    pool_->Shutdown();
    std::thread calibrator;
    {
      absl::MutexLock lock(&calibration_mu_);
      calibrator = std::move(calibrator_);
    }
    if (calibrator.joinable()) calibrator.join();  // it takes calibration_mu_ when done
  }

  ~Service() override { Shutdown(); }

  grpc::ServerWriteReactor<v1::SessionEvent>* Attach(CallbackServerContext*,
                                                     const v1::AttachRequest* req) override {
    return new AttachReactor(
        node_,
        [this](AttachReactor* r, bool add) {
          absl::MutexLock lock(&mu_);
          if (add) {
            attached_.insert(r);
          } else {
            attached_.erase(r);
          }
        },
        req->client_name());
  }

  ServerUnaryReactor* ListMemories(CallbackServerContext* ctx, const v1::ListMemoriesRequest*,
                                   v1::ListMemoriesResponse* resp) override {
    for (const MemoryReport& m : node_.introspection().ListMemories()) {
      ToProto(m, resp->add_memories());
    }
    return Reply(ctx, OkStatus());
  }

  ServerUnaryReactor* Allocate(CallbackServerContext* ctx, const v1::AllocateRequest* req,
                               v1::AllocateResponse* resp) override {
    auto a = node_.pools().Allocate(SessionOf(ctx), req->memory(), req->bytes());
    if (a.ok()) {
      resp->set_allocation(a->id);
      resp->set_bytes(a->bytes);
      resp->set_memory(a->memory);
    }
    return Reply(ctx, a.status());
  }

  ServerUnaryReactor* Free(CallbackServerContext* ctx, const v1::FreeRequest* req,
                           v1::FreeResponse*) override {
    return Reply(ctx, node_.pools().Free(SessionOf(ctx), req->allocation(), IsOperator(ctx)));
  }

  ServerUnaryReactor* ListOrphans(CallbackServerContext* ctx, const v1::ListOrphansRequest*,
                                  v1::ListOrphansResponse* resp) override {
    if (!IsOperator(ctx)) {
      return Reply(ctx, PermissionDenied("ListOrphans is the operator's: send the operator "
                                         "token (isoctl --operator-token)"));
    }
    for (const OrphanReport& o : node_.pools().ListOrphans()) {
      v1::Orphan* out = resp->add_orphans();
      out->set_allocation(o.id);
      out->set_memory(o.memory);
      out->set_bytes(o.bytes);
      out->set_uid(o.uid);
    }
    return Reply(ctx, OkStatus());
  }

  // The operator sees every session; another caller its own, by its token.
  ServerUnaryReactor* ListSessions(CallbackServerContext* ctx, const v1::ListSessionsRequest*,
                                   v1::ListSessionsResponse* resp) override {
    return List(
        ctx, "ListSessions",
        [this](const SessionRef* only) { return node_.sessions().ListSessions(only); },
        resp->mutable_sessions());
  }

  ServerUnaryReactor* ListAllocations(CallbackServerContext* ctx, const v1::ListAllocationsRequest*,
                                      v1::ListAllocationsResponse* resp) override {
    return List(
        ctx, "ListAllocations",
        [this](const SessionRef* only) { return node_.pools().ListAllocations(only); },
        resp->mutable_allocations());
  }

  // `list`: the node's listing for a session (nullptr: the operator's).
  template <class ListFn, class Out>
  ServerUnaryReactor* List(CallbackServerContext* ctx, const char* what, const ListFn& list,
                           google::protobuf::RepeatedPtrField<Out>* out) {
    const SessionRef session = SessionOf(ctx);
    const bool is_operator = IsOperator(ctx);  // a constant-time compare: once
    if (!is_operator && TokenOf(ctx).empty()) {
      return Reply(ctx, PermissionDenied(what,
                                         " needs the operator token (isoctl --operator-token) to "
                                         "list every session's, or a session token to list that "
                                         "session's own"));
    }
    auto listed = list(is_operator ? nullptr : &session);
    if (!listed.ok()) return Reply(ctx, listed.status());
    for (const auto& l : *listed) ToProto(l, out->Add());
    return Reply(ctx, OkStatus());
  }

  ServerUnaryReactor* Publish(CallbackServerContext* ctx, const v1::PublishRequest* req,
                              v1::PublishResponse*) override {
    return Reply(ctx, node_.pools().Publish(SessionOf(ctx), req->allocation()));
  }

  ServerUnaryReactor* Write(CallbackServerContext* ctx, const v1::WriteRequest* req,
                            v1::WriteResponse*) override {
    return Reply(
        ctx, node_.pools().Write(SessionOf(ctx), req->allocation(), req->offset(), req->data()));
  }

  ServerUnaryReactor* Read(CallbackServerContext* ctx, const v1::ReadRequest* req,
                           v1::ReadResponse* resp) override {
    auto data = node_.pools().Read(SessionOf(ctx), req->allocation(), req->offset(), req->length());
    if (!data.ok()) {
      return Reply(ctx, data.status());
    }
    *resp->mutable_data() = *std::move(data);
    return Reply(ctx, OkStatus());
  }

  grpc::ServerWriteReactor<v1::ReadChunk>* ReadStream(CallbackServerContext* ctx,
                                                      const v1::ReadRequest* req) override {
    return NewReadStream(node_, SessionOf(ctx), *req);
  }

  grpc::ServerReadReactor<v1::WriteStreamRequest>* WriteStream(CallbackServerContext* ctx,
                                                               v1::WriteResponse*) override {
    return NewWriteStream(node_, SessionOf(ctx));
  }

  // Decoding and translating a datatype costs CPU in its weight: on the
  // translation pool (translate_pool.h), never on the gRPC threads.
  ServerUnaryReactor* RegisterDatatype(CallbackServerContext* ctx,
                                       const v1::RegisterDatatypeRequest* req,
                                       v1::RegisterDatatypeResponse* resp) override {
    const SessionRef session = SessionOf(ctx);
    return Translate(ctx, "RegisterDatatype", WeightOf(req->datatype()), [=, this]() -> Status {
      ISO_ASSIGN_OR_RETURN(
          Datatype type,
          wire::DatatypeFromProto(req->datatype(), node_.instances().DatatypeHandles(session)));
      ISO_RETURN_IF_ERROR(pool_->CheckWeight(type.info().weight, "RegisterDatatype"));
      ISO_ASSIGN_OR_RETURN(DatatypeReport r, node_.instances().RegisterDatatype(session, type));
      ToProto(r, resp);
      return OkStatus();
    });
  }

  // A datatype instance is translated when registered (a copy then only
  // plans over its translation): on the pool too.
  ServerUnaryReactor* RegisterInstance(CallbackServerContext* ctx,
                                       const v1::RegisterInstanceRequest* req,
                                       v1::RegisterInstanceResponse* resp) override {
    const SessionRef session = SessionOf(ctx);
    auto run = [=, this]() -> Status {
      ISO_ASSIGN_OR_RETURN(
          InstanceSpec spec,
          InstanceSpecFromProto(req->spec(), node_.instances().DatatypeHandles(session)));
      if (spec.datatype) {
        ISO_RETURN_IF_ERROR(pool_->CheckWeight(spec.datatype->info().weight, "RegisterInstance"));
      }
      ISO_ASSIGN_OR_RETURN(auto r, node_.instances().RegisterInstance(session, spec));
      resp->set_instance(r.first);
      resp->set_total_bytes(r.second);
      return OkStatus();
    };
    if (!req->spec().has_datatype()) return Reply(ctx, run());  // a layout: cheap
    return Translate(ctx, "RegisterInstance", WeightOf(req->spec().datatype()), std::move(run));
  }

  ServerUnaryReactor* UnregisterInstance(CallbackServerContext* ctx,
                                         const v1::UnregisterInstanceRequest* req,
                                         v1::UnregisterInstanceResponse*) override {
    return Reply(ctx, node_.instances().UnregisterInstance(SessionOf(ctx), req->instance()));
  }

  ServerUnaryReactor* Copy(CallbackServerContext* ctx, const v1::CopyRequest* req,
                           v1::CopyResponse* resp) override {
    auto spec = CopySpecFromProto(*req);
    if (!spec.ok()) return Reply(ctx, spec.status());
    return StartTransfer(ctx, req->wait(), resp,
                         [&](SessionRef session, auto on_done, CopyTerms* terms) {
                           return node_.copies().Copy(session, *spec, std::move(on_done), terms);
                         });
  }

  // Starts a transfer with `start(session, on_done)` and answers as Copy
  // does: at once with its id, or with `wait` when it has ended.
  template <class Start>
  ServerUnaryReactor* StartTransfer(CallbackServerContext* ctx, bool wait, v1::CopyResponse* resp,
                                    Start start) {
    // gRPC's threads run the copy's start and its answer: a short slice,
    // as the daemon's own threads on a copy's path have
    // (core/thread_slice.h), set on the first copy each thread serves.
    static thread_local const bool sliced = (RequestShortSlice(), true);
    (void)sliced;
    const SessionRef session = SessionOf(ctx);
    // A waiting call that ends first (deadline, cancel) cancels its
    // transfer (waiting_copy.h).
    std::unique_ptr<WaitingCopy> waiting;
    TransferCallback on_done;
    if (wait) {
      Node* node = &node_;
      waiting = std::make_unique<WaitingCopy>(
          [node, session](uint64_t id) { (void)node->copies().Cancel(session, id); });
      on_done = [waiting = waiting.get(), resp, node, session](const TransferReport& r) {
        resp->set_transfer(r.id);
        ToProto(node->copies().GetTransfer(session, r.id).value_or(r), resp->mutable_info());
        SetTerms({r.priority, r.qos_class, r.requested_priority}, resp);
        waiting->Ended();
      };
    }
    CopyTerms terms;
    Result<uint64_t> id = start(session, std::move(on_done), &terms);
    if (id.ok() && waiting && waiting->Started(*id)) {
      return waiting.release();  // gRPC deletes it (OnDone); its transfer's end answers
    }
    // Refused, not waited on, or ended inline (waiting_copy.h): answered
    // now, on gRPC's default reactor.
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    if (!id.ok()) {
      reactor->Finish(ToGrpc(id.status()));
    } else {
      if (!wait) {
        resp->set_transfer(*id);
        SetTerms(terms, resp);
      }
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

  ServerUnaryReactor* Wait(CallbackServerContext* ctx, const v1::WaitRequest* req,
                           v1::TransferInfo* resp) override {
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    auto once = std::make_shared<std::atomic<bool>>(false);
    const uint64_t id = req->transfer();
    Node* node = &node_;
    const SessionRef session = SessionOf(ctx);
    const bool is_operator = IsOperator(ctx);
    Status s = node_.copies().WhenDone(
        session, id, is_operator,
        [reactor, resp, once, node, session, is_operator](const TransferReport& r) {
          if (once->exchange(true)) return;
          ToProto(node->copies().GetTransfer(session, r.id, is_operator).value_or(r), resp);
          reactor->Finish(grpc::Status::OK);
        });
    if (!s.ok()) {
      once->store(true);
      reactor->Finish(ToGrpc(s));
    } else if (req->timeout_ms() > 0) {
      timer_.At(
          Timer::Clock::now() + std::chrono::milliseconds(req->timeout_ms()),
          [reactor, resp, once, node, id, session, is_operator] {
            if (once->exchange(true)) return;
            auto r = node->copies().GetTransfer(session, id, is_operator);
            if (r.ok()) ToProto(*r, resp);
            reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                         "transfer " + std::to_string(id) + " is still running"));
          });
    }
    return reactor;
  }

  ServerUnaryReactor* Cancel(CallbackServerContext* ctx, const v1::CancelRequest* req,
                             v1::CancelResponse*) override {
    return Reply(ctx, node_.copies().Cancel(SessionOf(ctx), req->transfer(), IsOperator(ctx)));
  }

  ServerUnaryReactor* GetTransfer(CallbackServerContext* ctx, const v1::GetTransferRequest* req,
                                  v1::TransferInfo* resp) override {
    auto r = node_.copies().GetTransfer(SessionOf(ctx), req->transfer(), IsOperator(ctx));
    if (r.ok()) ToProto(*r, resp);
    return Reply(ctx, r.status());
  }

  ServerUnaryReactor* ListTransfers(CallbackServerContext* ctx, const v1::ListTransfersRequest* req,
                                    v1::ListTransfersResponse* resp) override {
    const std::vector<TransferReport> list =
        req->recent() ? node_.copies().RecentTransfers(SessionOf(ctx), IsOperator(ctx))
                      : node_.copies().ListTransfers();
    for (const TransferReport& r : list) ToProto(r, resp->add_transfers());
    return Reply(ctx, OkStatus());
  }

  ServerUnaryReactor* ExplainTransfer(CallbackServerContext* ctx,
                                      const v1::ExplainTransferRequest* req,
                                      v1::ExplainTransferResponse* resp) override {
    Result<TransferExplanation> e =
        node_.copies().ExplainTransfer(SessionOf(ctx), req->transfer(), IsOperator(ctx));
    if (e.ok()) ToProto(*e, resp);
    return Reply(ctx, e.status());
  }

  ServerUnaryReactor* ListChannels(CallbackServerContext* ctx, const v1::ListChannelsRequest*,
                                   v1::ListChannelsResponse* resp) override {
    for (const ChannelReport& c : node_.introspection().ListChannels()) {
      ToProto(c, resp->add_channels());
    }
    return Reply(ctx, OkStatus());
  }

  ServerUnaryReactor* GetQos(CallbackServerContext* ctx, const v1::GetQosRequest*,
                             v1::GetQosResponse* resp) override {
    ToProto(node_.traffic_classes().Report(SessionOf(ctx), IsOperator(ctx)), resp);
    return Reply(ctx, OkStatus());
  }
  ServerUnaryReactor* SetSessionClass(CallbackServerContext* ctx,
                                      const v1::SetSessionClassRequest* req,
                                      v1::SetSessionClassResponse*) override {
    return Reply(ctx, SetSessionClassRpc(node_, IsOperator(ctx), *req));
  }

  ServerUnaryReactor* ExplainPlan(CallbackServerContext* ctx, const v1::ExplainPlanRequest* req,
                                  v1::ExplainPlanResponse* resp) override {
    const SessionRef session = SessionOf(ctx);
    auto run = [=, this]() -> Status {
      ISO_ASSIGN_OR_RETURN(ExplainArgs args,
                           ExplainFromProto(*req, node_.instances().DatatypeHandles(session)));
      int64_t weight = 0;
      for (const auto& side : {args.src, args.dst}) {
        if (side.datatype) weight += side.datatype->info().weight;
      }
      ISO_RETURN_IF_ERROR(pool_->CheckWeight(weight, "ExplainPlan"));
      ISO_ASSIGN_OR_RETURN(PlanReport plan,
                           node_.copies().Explain(args.src, args.dst, args.bounds, args.fields));
      ToProto(plan, resp);
      return OkStatus();
    };
    if (!req->has_src_datatype() && !req->has_dst_datatype()) return Reply(ctx, run());
    return Translate(ctx, "ExplainPlan",
                     WeightOf(req->src_datatype()) + WeightOf(req->dst_datatype()), std::move(run));
  }

  // Runs `run` (returning the call's status) on the translation pool and
  // answers from there; refused at once past the weight bound or the
  // caller's share. Callers with an unknown session token share the
  // session-less callers' share.
  template <class Run>
  ServerUnaryReactor* Translate(CallbackServerContext* ctx, const char* what, int64_t weight,
                                Run run) {
    if (Status s = pool_->CheckWeight(weight, what); !s.ok()) return Reply(ctx, s);
    const SessionRef ref = SessionOf(ctx);
    const std::string caller = ref.has_value() ? std::to_string(ref.id()) : std::string();
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Status s = pool_->Submit(caller, what, [reactor, ctx, run = std::move(run)](const Status& st) {
      grpc::Status answer = grpc::Status::CANCELLED;  // gone while queued: nobody waits
      if (!st.ok()) {
        answer = ToGrpc(st);
      } else if (!ctx->IsCancelled()) {
        answer = ToGrpc(run());
      }
      return TranslatePool::Answer([reactor, answer] { reactor->Finish(answer); });
    });
    if (!s.ok()) reactor->Finish(ToGrpc(s));
    return reactor;
  }

  // Measuring takes about calibration_budget_ms: off the gRPC threads.
  ServerUnaryReactor* Calibrate(CallbackServerContext* ctx, const v1::CalibrateRequest*,
                                v1::CalibrateResponse* resp) override {
    if (!IsOperator(ctx)) {
      return Reply(ctx, PermissionDenied("calibrate is an operator action: pass the operator "
                                         "token (isoctl --operator-token, file ",
                                         node_.config().daemon.state_dir, "/operator.token)"));
    }
    absl::MutexLock lock(&calibration_mu_);
    if (calibrating_) return Reply(ctx, Unavailable("a calibration is already running"));
    // The previous one has finished (calibrating_ is false): joining is quick.
    if (calibrator_.joinable()) calibrator_.join();
    calibrating_ = true;
    ServerUnaryReactor* reactor = ctx->DefaultReactor();
    calibrator_ = std::thread([this, reactor, resp] {
      auto cal = node_.introspection().Calibrate();
      if (cal.ok()) ToProto(*cal, resp);
      reactor->Finish(ToGrpc(cal.status()));
      absl::MutexLock done(&calibration_mu_);
      calibrating_ = false;
    });
    return reactor;
  }

  ServerUnaryReactor* GetStatus(CallbackServerContext* ctx, const v1::StatusRequest*,
                                v1::StatusResponse* resp) override {
    ToProto(node_.introspection().GetStatus(), resp);
    AddWatches(node_.watches().ListWatches(), resp);
    return Reply(ctx, OkStatus());
  }

  // Active Access: ActiveCallbacks (daemon/server/active_rpc.h).
  SessionRef Session(const CallbackServerContext* ctx) const override { return SessionOf(ctx); }

  ServerUnaryReactor* JoinDistributed(CallbackServerContext* ctx,
                                      const v1::JoinDistributedRequest* req,
                                      v1::JoinDistributedResponse* resp) override {
    auto join = JoinFromProto(*req);
    if (!join.ok()) return Reply(ctx, join.status());
    auto r = node_.distributed().JoinDistributed(SessionOf(ctx), *join);
    if (r.ok()) ToProto(*r, resp);
    return Reply(ctx, r.status());
  }

  ServerUnaryReactor* Redistribute(CallbackServerContext* ctx, const v1::RedistributeRequest* req,
                                   v1::CopyResponse* resp) override {
    return StartTransfer(ctx, req->wait(), resp, [&](SessionRef session, auto on_done, auto*) {
      return node_.distributed().Redistribute(session, req->producer(), req->consumer(),
                                              GrantsFromProto(*req), std::move(on_done));
    });
  }

  ServerUnaryReactor* ListPeers(CallbackServerContext* ctx, const v1::ListPeersRequest*,
                                v1::ListPeersResponse* resp) override {
    if (peers_) {
      *resp = peers_();
    } else {
      resp->set_node_name(node_.config().cluster.node_name);
    }
    return Reply(ctx, OkStatus());
  }

 private:
  Node& node_;
  const std::string operator_token_;
  const PeersProvider peers_;
  const std::unique_ptr<TranslatePool> pool_;
  Timer timer_;
  absl::Mutex mu_;
  std::set<AttachReactor*> attached_ ABSL_GUARDED_BY(mu_);
  absl::Mutex calibration_mu_;
  std::thread calibrator_ ABSL_GUARDED_BY(calibration_mu_);
  bool calibrating_ ABSL_GUARDED_BY(calibration_mu_) = false;
};

}  // namespace

std::unique_ptr<GrpcService> GrpcService::Make(Node& node, std::string operator_token,
                                               PeersProvider peers) {
  return std::make_unique<Service>(node, std::move(operator_token), std::move(peers));
}

}  // namespace isometry
