#include "daemon/server/active_rpc.h"

#include <spdlog/spdlog.h>

#include <system_error>

#include "absl/synchronization/mutex.h"
#include "core/thread_name.h"
#include "daemon/node/watches.h"
#include "daemon/server/convert.h"
#include "daemon/server/convert_watch.h"
#include "daemon/server/grpc_streams.h"

namespace isometry {

Status WatchRpc(Node& node, SessionRef session, const v1::WatchRequest& req,
                v1::WatchResponse* out) {
  ISO_ASSIGN_OR_RETURN(WatchSpec spec, WatchSpecFromProto(req));
  ISO_ASSIGN_OR_RETURN(WatchHandle h, node.watches().Watch(session, spec));
  out->set_region(h.region);
  out->set_allocation(h.allocation);
  out->set_log_bytes(h.log_mapped_bytes);
  return OkStatus();
}

Status GetWatchRpc(Node& node, SessionRef session, const v1::GetWatchRequest& req,
                   v1::WatchInfo* out) {
  ISO_ASSIGN_OR_RETURN(WatchReport r, node.watches().GetWatch(session, req.allocation()));
  ToProto(r, out);
  return OkStatus();
}

Status DirtyPagesRpc(Node& node, SessionRef session, const v1::DirtyPagesRequest& req,
                     v1::DirtyPagesResponse* out) {
  ISO_ASSIGN_OR_RETURN(auto pages,
                       node.watches().DirtyPages(session, req.allocation(), req.clear()));
  out->set_page_bytes(4096);
  for (uint64_t p : pages) out->add_pages(p);
  return OkStatus();
}

Status CheckpointRpc(Node& node, SessionRef session, const v1::CheckpointRequest& req,
                     v1::CheckpointResponse* out) {
  CheckpointOptions o;
  o.full = req.full();
  o.compact = req.compact();
  // Bounds and the count limit are the node's to check; only the size of
  // the copy is bounded here.
  if (req.client_pages_size() > 262144) {
    return InvalidArgument(req.client_pages_size(), " client page ranges: at most 262144");
  }
  o.client_pages.reserve(req.client_pages_size());
  for (const v1::PageRange& r : req.client_pages()) {
    o.client_pages.emplace_back(r.first_page(), r.pages());
  }
  ISO_ASSIGN_OR_RETURN(CheckpointReport r, node.watches().Checkpoint(session, req.allocation(),
                                                                     req.memory(), req.file(), o));
  out->set_full(r.full);
  out->set_pages_written(r.pages_written);
  out->set_bytes_written(r.bytes_written);
  out->set_file_bytes(r.file_bytes);
  out->set_deltas(r.deltas);
  out->set_delta_file_bytes(r.delta_file_bytes);
  out->set_compacted(r.compacted);
  out->set_full_reason(r.full_reason);
  return OkStatus();
}

Status RestoreRpc(Node& node, SessionRef session, const v1::RestoreRequest& req,
                  v1::RestoreResponse* out) {
  ISO_ASSIGN_OR_RETURN(RestoreReport r,
                       node.watches().Restore(session, req.allocation(), req.memory(), req.file()));
  out->set_image_bytes(r.image_bytes);
  out->set_deltas(r.deltas);
  out->set_pages_applied(r.pages_applied);
  return OkStatus();
}

Status CompactCheckpointRpc(Node& node, SessionRef session, const v1::CompactCheckpointRequest& req,
                            v1::CompactCheckpointResponse* out) {
  ISO_ASSIGN_OR_RETURN(RestoreReport r,
                       node.watches().CompactCheckpoint(session, req.memory(), req.file()));
  out->set_deltas(r.deltas);
  out->set_pages_applied(r.pages_applied);
  return OkStatus();
}

grpc::ServerUnaryReactor* ActiveFlushRpc(Node& node, SessionRef session,
                                         const v1::ActiveFlushRequest& req,
                                         grpc::ServerUnaryReactor* reactor) {
  Status s = node.watches().ActiveFlush(
      session, req.allocation(), std::chrono::milliseconds(req.timeout_ms()),
      [reactor](const Status& done) { reactor->Finish(ToGrpc(done)); });
  if (!s.ok()) reactor->Finish(ToGrpc(s));
  return reactor;
}

namespace {

Status FlushAndWait(Node& node, SessionRef session, const v1::ActiveFlushRequest& req) {
  struct Waiter {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    Status status ABSL_GUARDED_BY(mu);
  };
  auto w = std::make_shared<Waiter>();
  ISO_RETURN_IF_ERROR(node.watches().ActiveFlush(
      session, req.allocation(), std::chrono::milliseconds(req.timeout_ms()), [w](Status s) {
        absl::MutexLock lock(&w->mu);
        w->status = std::move(s);
        w->done = true;
      }));
  absl::MutexLock lock(&w->mu);
  w->mu.Await(absl::Condition(&w->done));
  return w->status;
}

}  // namespace

Status ActiveLocal(Node& node, SessionRef session, const v1::LocalRequest& req,
                   v1::LocalResponse* resp, std::vector<int>* fds) {
  switch (req.body_case()) {
    case v1::LocalRequest::kWatch: {
      ISO_ASSIGN_OR_RETURN(WatchSpec spec, WatchSpecFromProto(req.watch()));
      spec.maps_log = true;
      ISO_ASSIGN_OR_RETURN(WatchHandle h, node.watches().Watch(session, spec));
      v1::WatchResponse* out = resp->mutable_watch();
      out->set_region(h.region);
      out->set_allocation(h.allocation);
      out->set_log_bytes(h.log_mapped_bytes);
      if (h.log_fd >= 0) {  // none while a ReadAccessLog stream reads the log
        fds->push_back(h.log_fd);
        fds->push_back(h.event_fd);
      }
      return OkStatus();
    }
    case v1::LocalRequest::kUnwatch:
      return node.watches().Unwatch(session, req.unwatch().allocation(), req.unwatch().region());
    case v1::LocalRequest::kGetWatch:
      return GetWatchRpc(node, session, req.get_watch(), resp->mutable_get_watch());
    case v1::LocalRequest::kActiveFlush:
      return FlushAndWait(node, session, req.active_flush());
    case v1::LocalRequest::kDirtyPages:
      return DirtyPagesRpc(node, session, req.dirty_pages(), resp->mutable_dirty_pages());
    case v1::LocalRequest::kCheckpoint:
      return CheckpointRpc(node, session, req.checkpoint(), resp->mutable_checkpoint());
    case v1::LocalRequest::kRestore:
      return RestoreRpc(node, session, req.restore(), resp->mutable_restore());
    case v1::LocalRequest::kCompactCheckpoint:
      return CompactCheckpointRpc(node, session, req.compact_checkpoint(),
                                  resp->mutable_compact_checkpoint());
    default:
      return InvalidArgument("not an active access request");
  }
}

namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, const Status& s) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(s));
  return r;
}

}  // namespace

using Reactor = ActiveCallbacks::Reactor;
using Ctx = ActiveCallbacks::Ctx;

Reactor* ActiveCallbacks::Watch(Ctx* ctx, const v1::WatchRequest* req, v1::WatchResponse* resp) {
  return Finish(ctx, WatchRpc(node_, Session(ctx), *req, resp));
}
Reactor* ActiveCallbacks::Unwatch(Ctx* ctx, const v1::UnwatchRequest* req, v1::UnwatchResponse*) {
  return Finish(ctx, node_.watches().Unwatch(Session(ctx), req->allocation(), req->region()));
}
Reactor* ActiveCallbacks::GetWatch(Ctx* ctx, const v1::GetWatchRequest* req, v1::WatchInfo* resp) {
  return Finish(ctx, GetWatchRpc(node_, Session(ctx), *req, resp));
}
grpc::ServerWriteReactor<v1::AccessLogBatch>* ActiveCallbacks::ReadAccessLog(
    Ctx* ctx, const v1::ReadAccessLogRequest* req) {
  return NewAccessLogStream(ctx, node_, Session(ctx), *req);
}
Reactor* ActiveCallbacks::ActiveFlush(Ctx* ctx, const v1::ActiveFlushRequest* req,
                                      v1::ActiveFlushResponse*) {
  return ActiveFlushRpc(node_, Session(ctx), *req, ctx->DefaultReactor());
}
Reactor* ActiveCallbacks::DirtyPages(Ctx* ctx, const v1::DirtyPagesRequest* req,
                                     v1::DirtyPagesResponse* resp) {
  return Finish(ctx, DirtyPagesRpc(node_, Session(ctx), *req, resp));
}
Reactor* ActiveCallbacks::Checkpoint(Ctx* ctx, const v1::CheckpointRequest* req,
                                     v1::CheckpointResponse* resp) {
  const SessionRef s = Session(ctx);
  return Offload(ctx, s, [this, s, req, resp] { return CheckpointRpc(node_, s, *req, resp); });
}
Reactor* ActiveCallbacks::Restore(Ctx* ctx, const v1::RestoreRequest* req,
                                  v1::RestoreResponse* resp) {
  const SessionRef s = Session(ctx);
  return Offload(ctx, s, [this, s, req, resp] { return RestoreRpc(node_, s, *req, resp); });
}
Reactor* ActiveCallbacks::CompactCheckpoint(Ctx* ctx, const v1::CompactCheckpointRequest* req,
                                            v1::CompactCheckpointResponse* resp) {
  const SessionRef s = Session(ctx);
  return Offload(ctx, s,
                 [this, s, req, resp] { return CompactCheckpointRpc(node_, s, *req, resp); });
}

ActiveCallbacks::ActiveCallbacks(Node& node)
    : node_(node), per_session_(node.config().daemon.max_checkpoint_calls_per_session) {
  const uint32_t threads = node.config().daemon.checkpoint_threads;
  for (uint32_t i = 0; i < threads; ++i) {
    try {
      workers_.emplace_back([this] {
        NameThisThread("iso-checkpoint");
        Run();
      });
    } catch (const std::system_error& e) {
      spdlog::warn("checkpoint worker thread {} of {} could not be started: {}", i + 1, threads,
                   e.what());
      break;
    }
  }
}

Reactor* ActiveCallbacks::Offload(Ctx* ctx, SessionRef session, std::function<Status()> status) {
  Reactor* r = ctx->DefaultReactor();
  Status refused = [&]() -> Status {
    absl::MutexLock lock(&mu_);
    if (workers_.empty()) {
      return Unavailable("no checkpoint worker thread could be started (see the daemon's log); ",
                         "checkpoints over the local socket still work");
    }
    uint32_t& calls = calls_[session.id()];
    if (calls >= per_session_) {
      return ResourceExhausted("this session has ", calls,
                               " Checkpoint, Restore or CompactCheckpoint calls queued or ",
                               "running (daemon.max_checkpoint_calls_per_session = ", per_session_,
                               "): wait for one to finish");
    }
    ++calls;
    // The request and response live until Finish: the job may use them.
    jobs_.push_back({session, r, std::move(status)});
    return OkStatus();
  }();
  if (!refused.ok()) r->Finish(ToGrpc(refused));
  return r;
}

void ActiveCallbacks::Run() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ActiveCallbacks::Ready));
      if (jobs_.empty()) return;  // stopping, nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const Status done = job.status();
    // The call stops counting before its answer goes: a client that sends
    // its next call on the answer must find the slot free.
    {
      absl::MutexLock lock(&mu_);
      auto it = calls_.find(job.session.id());
      if (it != calls_.end() && --it->second == 0) calls_.erase(it);
    }
    job.reactor->Finish(ToGrpc(done));
  }
}

ActiveCallbacks::~ActiveCallbacks() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

}  // namespace isometry
