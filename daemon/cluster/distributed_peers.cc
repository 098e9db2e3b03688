// Distributed instances whose ranks live on several nodes, the cluster's
// side (daemon/node/node_distributed.h, "across nodes"): asking peers for
// their ranks, running a redistribution's part on a peer (one long call,
// answered when the part ends), aborting parts, and passing on that an
// instance ended.
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "daemon/cluster/cluster_impl.h"
#include "daemon/cluster/peer_wire.h"
#include "daemon/node/distributed.h"
#include "daemon/server/convert.h"

namespace isometry {
namespace cluster {

// A part of a redistribution running on a peer, as the coordinator holds
// it: its end comes as the answer of the long RedistributePart call.
class PartCall final : public CrossTransfer, public std::enable_shared_from_this<PartCall> {
 public:
  PartCall(Cluster::Impl* impl, const Peer* peer, uint64_t key,
           std::function<void(Status, uint64_t)> done)
      : impl_(impl), peer_(peer), key_(key), done_(std::move(done)) {}

  void Start(const RedistributePart& part) {
    AsyncCall<peer_api::PeerRedistributePart, peer_api::PeerRedistributeDone> call;
    ToProto(part, call.req.get());
    impl_->Authorize(*call.ctx, *peer_, "RedistributePart", *call.req);
    {
      absl::MutexLock lock(&mu_);
      ctx_ = call.ctx;
    }
    std::weak_ptr<PartCall> self = weak_from_this();
    const std::string node = peer_->config.name;
    peer_->stub->async()->RedistributePart(
        call.ctx.get(), call.req.get(), call.resp.get(), [self, call, node](const grpc::Status& s) {
          auto me = self.lock();
          if (!me) return;
          if (!s.ok()) {
            me->End(FromGrpc(s, StrCat("redistribution part on node '", node, "'")), 0);
            return;
          }
          const int code = call.resp->code();
          me->End(
              code == 0 ? OkStatus() : Status(net::ErrorCodeFromWire(code), call.resp->message()),
              call.resp->bytes());
        });
  }

  // Ends it now with `why`, whatever the peer says later (it is down).
  void Fail(const Status& why) {
    std::shared_ptr<grpc::ClientContext> ctx;
    {
      absl::MutexLock lock(&mu_);
      ctx = ctx_;
    }
    End(why, 0);
    if (ctx) ctx->TryCancel();
  }

  const std::string& node() const { return peer_->config.name; }

  void Abort(const Status& why) override {
    AsyncCall<peer_api::PeerAbortRedistribute, peer_api::PeerAbortRedistributeResponse> call;
    SetDeadline(*call.ctx, impl_->config.cluster.peer_timeout_ms);
    call.req->set_key(key_);
    call.req->set_code(static_cast<int>(why.code()));
    call.req->set_message(std::string(why.message()));
    impl_->Authorize(*call.ctx, *peer_, "AbortRedistributePart", *call.req);
    peer_->stub->async()->AbortRedistributePart(call.ctx.get(), call.req.get(), call.resp.get(),
                                                [call](const grpc::Status&) {});
  }
  void Cancel() override { Abort(absl::CancelledError("redistribution cancelled")); }
  std::string PathText() const override {
    return StrCat("redistribution part on node '", node(), "'");
  }
  uint64_t bytes() const override { return 0; }
  Clock::time_point started() const override { return started_; }
  double predicted_bytes_per_s() const override { return 0; }

 private:
  void End(const Status& s, uint64_t bytes) {
    std::function<void(Status, uint64_t)> done;
    {
      absl::MutexLock lock(&mu_);
      done = std::move(done_);
      done_ = nullptr;
    }
    if (done) done(s, bytes);
  }

  Cluster::Impl* const impl_;
  const Peer* const peer_;
  const uint64_t key_;
  const Clock::time_point started_ = Clock::now();
  absl::Mutex mu_;
  std::function<void(Status, uint64_t)> done_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<grpc::ClientContext> ctx_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cluster

Result<std::vector<DistributedRanks>> Cluster::Impl::QueryDistributed(
    const std::string& key, const std::string& grant_digest) {
  std::vector<const Peer*> up;
  {
    const std::vector<Peer*> list = PeerList();
    absl::MutexLock lock(&mu);
    for (const Peer* p : list) {
      if (StateLocked(*p).up) up.push_back(p);
    }
  }
  std::vector<DistributedRanks> out;
  for (const Peer* p : up) {
    grpc::ClientContext ctx;
    cluster::SetDeadline(ctx, config.cluster.peer_timeout_ms);
    peer_api::PeerDistributedQuery q;
    q.set_key(key);
    q.set_grant_digest(grant_digest);
    Authorize(ctx, *p, "QueryDistributed", q);
    peer_api::PeerDistributedRanks resp;
    const grpc::Status s = p->stub->QueryDistributed(&ctx, q, &resp);
    if (!s.ok()) {
      return cluster::FromGrpc(
          s, StrCat("asking node '", p->config.name, "' for its ranks of '", ForLog(key), "'"));
    }
    ISO_ASSIGN_OR_RETURN(DistributedRanks r, cluster::FromProto(resp, p->config.name));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::shared_ptr<CrossTransfer>> Cluster::Impl::RunRedistributePart(
    const std::string& name, const RedistributePart& part,
    std::function<void(Status, uint64_t)> done) {
  const Peer* p = FindPeer(name);
  if (!p) return NotFound("node '", name, "' is not a peer of node '", self(), "'");
  auto call = std::make_shared<cluster::PartCall>(this, p, part.key, std::move(done));
  {
    absl::MutexLock lock(&mu);
    if (!StateLocked(*p).up) {
      return Unavailable("node '", name, "' is down: ", StateLocked(*p).last_error);
    }
    std::erase_if(part_calls, [](const auto& kv) { return kv.second.expired(); });
    part_calls[next_part_call++] = call;
  }
  call->Start(part);
  return std::static_pointer_cast<CrossTransfer>(call);
}

void Cluster::Impl::AnnounceDistributedEnded(const std::string& key,
                                             const std::set<std::string>& to,
                                             const std::string& why) {
  for (const std::string& name : to) {
    const Peer* p = FindPeer(name);
    if (!p) continue;
    cluster::AsyncCall<peer_api::PeerDistributedEnded, peer_api::PeerDistributedEndedResponse> call;
    cluster::SetDeadline(*call.ctx, config.cluster.peer_timeout_ms);
    call.req->set_key(key);
    call.req->set_why(why);
    Authorize(*call.ctx, *p, "DistributedEnded", *call.req);
    p->stub->async()->DistributedEnded(call.ctx.get(), call.req.get(), call.resp.get(),
                                       [call](const grpc::Status&) {});
  }
}

Status Cluster::Impl::ServePart(const std::string& caller,
                                const peer_api::PeerRedistributePart& req,
                                std::function<void(Status, uint64_t)> done) {
  ISO_ASSIGN_OR_RETURN(const RedistributePart& part, cluster::FromProto(req));
  // The entry holds the part until it ends (nothing else does); a part
  // that ends before it is entered is not entered.
  auto ended = std::make_shared<bool>(false);
  const std::pair<std::string, uint64_t> id{caller, part.key};
  {
    absl::MutexLock lock(&mu);
    if (served_parts.contains(id)) {
      return absl::AlreadyExistsError(StrCat("node '", caller, "' runs part ", part.key, " here"));
    }
  }
  auto finish = [this, id, ended, done = std::move(done)](Status s, uint64_t bytes) {
    {
      absl::MutexLock lock(&mu);
      *ended = true;
      served_parts.erase(id);
    }
    done(std::move(s), bytes);
  };
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<CrossTransfer> h,
                       node->distributed().RunPartForPeer(caller, part, finish));
  {
    absl::MutexLock lock(&mu);
    if (*ended) return OkStatus();
    if (!served_parts.contains(id)) {
      served_parts[id] = h;
      return OkStatus();
    }
  }
  // The same part twice at once: the second ends at once (its answer is
  // the abort), the first runs on.
  h->Abort(absl::AlreadyExistsError(StrCat("node '", caller, "' runs part ", id.second, " here")));
  return OkStatus();
}

void Cluster::Impl::AbortServedPart(const std::string& caller, uint64_t key, const Status& why) {
  std::shared_ptr<CrossTransfer> h;
  {
    absl::MutexLock lock(&mu);
    auto it = served_parts.find({caller, key});
    if (it != served_parts.end()) h = it->second;
  }
  if (h) h->Abort(why);
}

void Cluster::Impl::FailPartsWith(const std::string& name, const Status& why) {
  std::vector<std::shared_ptr<cluster::PartCall>> calls;
  std::vector<std::shared_ptr<CrossTransfer>> served;
  {
    absl::MutexLock lock(&mu);
    for (const auto& [id, w] : part_calls) {
      if (auto c = w.lock(); c && c->node() == name) calls.push_back(std::move(c));
    }
    for (const auto& [who, h] : served_parts) {
      if (who.first == name) served.push_back(h);
    }
  }
  for (const auto& c : calls) c->Fail(why);
  for (const auto& h : served) h->Abort(why);
}

}  // namespace isometry
