#include "daemon/cluster/peer_service.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <atomic>

#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/node/distributed.h"
#include "daemon/server/convert.h"
#include "net/frame.h"

namespace isometry::cluster {

namespace {

// The initiator's AwaitHalf: while it runs, the initiator waits for the
// half. When it stops waiting (it cancelled the call: its copy failed; or
// its connection to this node broke) the half ends too, whether or not its
// AbortHalf arrives: one sent while this node was stopped or cut off may
// have expired before it was read.
class AwaitReactor final : public grpc::ServerUnaryReactor {
 public:
  AwaitReactor(Cluster::Impl* impl, std::string initiator, uint64_t key)
      : impl_(impl), initiator_(std::move(initiator)), key_(key) {}
  // Exactly once: the half's end, or the refusal.
  void End(const grpc::Status& s) {
    ended_ = true;
    Finish(s);
  }
  void OnCancel() override {
    if (ended_) return;
    spdlog::warn("half {}: node '{}' stopped waiting for it; ending it", key_, ForLog(initiator_));
    impl_->AbortHalf(initiator_, key_,
                     absl::CancelledError(StrCat("node '", initiator_,
                                                 "' stopped waiting for the transfer (its copy "
                                                 "ended, or its connection to this node broke)")));
  }
  void OnDone() override { delete this; }

 private:
  Cluster::Impl* const impl_;
  const std::string initiator_;
  const uint64_t key_;
  std::atomic<bool> ended_{false};
};

class PeerService final : public peer_api::IsometryPeer::CallbackService {
 public:
  explicit PeerService(Cluster::Impl* impl) : impl_(impl) {}

  // Anyone may ask: a challenge is made without state (peer_hello.cc).
  grpc::ServerUnaryReactor* HelloChallenge(grpc::CallbackServerContext* ctx,
                                           const peer_api::PeerChallengeRequest*,
                                           peer_api::PeerChallenge* resp) override {
    resp->set_node_name(impl_->self());
    resp->set_challenge(impl_->Challenge());
    return Reply(ctx, OkStatus());
  }

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const peer_api::PeerHello* req,
                                  peer_api::PeerWelcome* resp) override {
    HelloIn hello = FromProto(*req, ctx->peer());
    hello.identities = Identities(ctx, hello.tls);
    auto welcome = impl_->AcceptHello(hello);
    if (welcome.ok()) ToProto(*welcome, resp);
    return Reply(ctx, welcome.status());
  }

  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx, const peer_api::PeerPing* req,
                                 peer_api::PeerPong*) override {
    auto caller = Caller(ctx, "Ping", *req);
    if (caller.ok() && impl_->Stopping()) {
      // Not working any more: a peer whose etcd record went (this node's
      // lease revoked) lets it go now.
      return Reply(ctx, Unavailable("isometryd on node '", impl_->self(), "' is stopping"));
    }
    return Reply(ctx, caller.ok() ? OkStatus() : caller.status());
  }

  grpc::ServerUnaryReactor* StartHalf(grpc::CallbackServerContext* ctx,
                                      const peer_api::StartHalfRequest* req,
                                      peer_api::StartHalfResponse* resp) override {
    auto caller = Caller(ctx, "StartHalf", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    uint32_t rdma_tag = 0;
    Status s = Start(*caller, *req, &rdma_tag);
    if (std::optional<uint64_t> unknown = UnknownFormOf(s)) {
      resp->set_unknown_form(*unknown);  // the caller sends the form again
      return Reply(ctx, OkStatus());
    }
    if (!s.ok()) {
      spdlog::warn("half {} for '{}' refused: {}", req->key(), ForLog(*caller),
                   ForLog(s.ToString(), 512));
    }
    resp->set_rdma_tag(rdma_tag);
    return Reply(ctx, s);
  }

  grpc::ServerUnaryReactor* AwaitHalf(grpc::CallbackServerContext* ctx,
                                      const peer_api::AwaitHalfRequest* req,
                                      peer_api::AwaitHalfResponse* resp) override {
    auto caller = Caller(ctx, "AwaitHalf", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    auto* r = new AwaitReactor(impl_, *caller, req->key());
    Cluster::Impl* impl = impl_;
    Status s = impl_->AwaitHalf(req->key(), [r, resp, impl](const Status& end) {
      resp->set_code(static_cast<int>(end.code()));
      resp->set_message(std::string(impl->ForPeer(end).message()));
      r->End(grpc::Status::OK);
    });
    if (!s.ok()) r->End(ToGrpc(s));
    return r;
  }

  grpc::ServerUnaryReactor* AbortHalf(grpc::CallbackServerContext* ctx,
                                      const peer_api::AbortHalfRequest* req,
                                      peer_api::AbortHalfResponse*) override {
    auto caller = Caller(ctx, "AbortHalf", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    const Status why(net::ErrorCodeFromWire(req->code()),
                     StrCat("node '", *caller, "' ended the transfer: ", req->message()));
    impl_->AbortHalf(*caller, req->key(), why);
    return Reply(ctx, OkStatus());
  }

  grpc::ServerUnaryReactor* PutBytes(grpc::CallbackServerContext* ctx,
                                     const peer_api::PutBytesRequest* req,
                                     peer_api::PutBytesResponse* resp) override {
    auto caller = Caller(ctx, "PutBytes", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    impl_->ServePutBytes(*caller, *req, resp, [r](const Status& s) { r->Finish(ToGrpc(s)); });
    return r;
  }

  grpc::ServerUnaryReactor* QueryDistributed(grpc::CallbackServerContext* ctx,
                                             const peer_api::PeerDistributedQuery* req,
                                             peer_api::PeerDistributedRanks* resp) override {
    auto caller = Caller(ctx, "QueryDistributed", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    ToProto(impl_->node->distributed().DistributedRanksForPeer(*caller, req->key(),
                                                               req->grant_digest()),
            resp);
    return Reply(ctx, OkStatus());
  }

  grpc::ServerUnaryReactor* RedistributePart(grpc::CallbackServerContext* ctx,
                                             const peer_api::PeerRedistributePart* req,
                                             peer_api::PeerRedistributeDone* resp) override {
    auto caller = Caller(ctx, "RedistributePart", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    Status s = impl_->ServePart(*caller, *req, [r, resp](const Status& end, uint64_t bytes) {
      resp->set_code(static_cast<int>(end.code()));
      resp->set_message(std::string(end.message()));
      resp->set_bytes(bytes);
      r->Finish(grpc::Status::OK);
    });
    if (!s.ok()) {
      spdlog::warn("redistribution part {} for '{}' refused: {}", req->key(), ForLog(*caller),
                   ForLog(s.ToString(), 512));
      r->Finish(ToGrpc(s));
    }
    return r;
  }

  grpc::ServerUnaryReactor* AbortRedistributePart(
      grpc::CallbackServerContext* ctx, const peer_api::PeerAbortRedistribute* req,
      peer_api::PeerAbortRedistributeResponse*) override {
    auto caller = Caller(ctx, "AbortRedistributePart", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    const Status why(net::ErrorCodeFromWire(req->code()),
                     StrCat("node '", *caller, "' ended the redistribution: ", req->message()));
    impl_->AbortServedPart(*caller, req->key(), why);
    return Reply(ctx, OkStatus());
  }

  grpc::ServerUnaryReactor* DistributedEnded(grpc::CallbackServerContext* ctx,
                                             const peer_api::PeerDistributedEnded* req,
                                             peer_api::PeerDistributedEndedResponse*) override {
    auto caller = Caller(ctx, "DistributedEnded", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    impl_->node->distributed().DistributedEndedByPeer(*caller, req->key(), req->why());
    return Reply(ctx, OkStatus());
  }

  grpc::ServerUnaryReactor* ConnectRdma(grpc::CallbackServerContext* ctx,
                                        const peer_api::PeerRdmaLink* req,
                                        peer_api::PeerRdmaLink* resp) override {
    auto caller = Caller(ctx, "ConnectRdma", *req);
    if (!caller.ok()) return Reply(ctx, caller.status());
    auto answer = impl_->AcceptRdma(*caller, *req);
    if (answer.ok()) *resp = std::move(*answer);
    return Reply(ctx, answer.status());
  }

 private:
  static grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* ctx, const Status& s) {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(ToGrpc(s));
    return r;
  }

  // The names of the caller's verified TLS certificate; `tls`: whether
  // the call came over TLS at all.
  static std::vector<std::string> Identities(grpc::CallbackServerContext* ctx, bool& tls) {
    std::vector<std::string> out;
    const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
    tls = auth && auth->IsPeerAuthenticated();
    if (!tls) return out;
    for (const grpc::string_ref& id : auth->GetPeerIdentity()) {
      out.emplace_back(id.data(), id.size());
    }
    return out;
  }

  // The peer that made this call, by its signature (Impl::Caller). A
  // refusal names the caller's address in the log, a few lines at most.
  Result<std::string> Caller(grpc::CallbackServerContext* ctx, std::string_view method,
                             const google::protobuf::MessageLite& req) const {
    CallIn call;
    call.method = method;
    const auto& md = ctx->client_metadata();
    for (const auto& [key, out] :
         {std::pair{kCallerKey, &call.caller}, std::pair{kCounterKey, &call.counter},
          std::pair{kCallMacKey, &call.mac}}) {
      if (auto it = md.find(key); it != md.end()) out->assign(it->second.data(), it->second.size());
    }
    call.body = req.SerializeAsString();
    call.identities = Identities(ctx, call.tls);
    Result<std::string> caller = impl_->Caller(call);
    if (!caller.ok()) {
      static LogLimiter limiter(5, std::chrono::seconds(10));
      const std::string from = ctx->peer();
      if (const auto v = limiter.Allow(std::string_view(from).substr(0, from.rfind(':'))); v.log) {
        spdlog::warn("peer call from {} (claims '{}') refused: {}", ForLog(from),
                     ForLog(call.caller), ForLog(std::string(caller.status().message()), 512));
      }
    }
    return caller;
  }

  Status Start(const std::string& caller, const peer_api::StartHalfRequest& req,
               uint32_t* rdma_tag) {
    if (!req.has_forward_dst() && !impl_->FindPeer(req.partner())) {
      return NotFound("node '", req.partner(), "' is not a peer of node '", impl_->self(), "'");
    }
    ISO_ASSIGN_OR_RETURN(HalfRequest half, FromProto(req));
    return impl_->ForPeer(impl_->StartPeerHalf(caller, std::move(half), rdma_tag));
  }

  Cluster::Impl* const impl_;
};

}  // namespace

std::unique_ptr<peer_api::IsometryPeer::CallbackService> MakePeerService(Cluster::Impl* impl) {
  return std::make_unique<PeerService>(impl);
}

}  // namespace isometry::cluster
