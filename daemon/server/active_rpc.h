// Active Access (issue #19) requests, as both front ends serve them: the
// gRPC service (one function per RPC) and the local socket (ActiveLocal,
// which also hands the owner the access log memfd and eventfd).
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/node/node.h"
#include "isometry.grpc.pb.h"
#include "isometry.pb.h"

namespace isometry {

Status WatchRpc(Node& node, SessionRef session, const v1::WatchRequest& req,
                v1::WatchResponse* out);
Status GetWatchRpc(Node& node, SessionRef session, const v1::GetWatchRequest& req,
                   v1::WatchInfo* out);
Status DirtyPagesRpc(Node& node, SessionRef session, const v1::DirtyPagesRequest& req,
                     v1::DirtyPagesResponse* out);
// Checkpoint, Restore and CompactCheckpoint do their disk I/O on the
// calling thread (one of ActiveCallbacks' workers, or a local connection's).
Status CheckpointRpc(Node& node, SessionRef session, const v1::CheckpointRequest& req,
                     v1::CheckpointResponse* out);
Status RestoreRpc(Node& node, SessionRef session, const v1::RestoreRequest& req,
                  v1::RestoreResponse* out);
Status CompactCheckpointRpc(Node& node, SessionRef session, const v1::CompactCheckpointRequest& req,
                            v1::CompactCheckpointResponse* out);
// Finishes `reactor` from the watch's worker once flushed: no gRPC thread
// waits.
grpc::ServerUnaryReactor* ActiveFlushRpc(Node& node, SessionRef session,
                                         const v1::ActiveFlushRequest& req,
                                         grpc::ServerUnaryReactor* reactor);

// The Active Access RPCs of the gRPC service (daemon/server/grpc_service.cc
// derives from this): proto in, node call, proto out. Checkpoint, Restore
// and CompactCheckpoint, whose disk I/O is bounded by an image's size but
// not small, run on a pool of their own (daemon.checkpoint_threads), in
// arrival order, so no gRPC thread waits for a disk and one session's slow
// call holds one thread, not the others' calls: a session may have at most
// daemon.max_checkpoint_calls_per_session of them queued or running (more
// are answered RESOURCE_EXHAUSTED at once). A worker thread that cannot be
// started is logged; with none, the calls are answered UNAVAILABLE. The
// workers finish what is queued and exit when the service is destroyed
// (after the server has shut down).
class ActiveCallbacks : public v1::Isometry::CallbackService {
 public:
  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;
  explicit ActiveCallbacks(Node& node);
  ~ActiveCallbacks() override;
  ActiveCallbacks(const ActiveCallbacks&) = delete;
  ActiveCallbacks& operator=(const ActiveCallbacks&) = delete;

  Reactor* Watch(Ctx* ctx, const v1::WatchRequest* req, v1::WatchResponse* resp) override;
  Reactor* Unwatch(Ctx* ctx, const v1::UnwatchRequest* req, v1::UnwatchResponse*) override;
  Reactor* GetWatch(Ctx* ctx, const v1::GetWatchRequest* req, v1::WatchInfo* resp) override;
  grpc::ServerWriteReactor<v1::AccessLogBatch>* ReadAccessLog(
      Ctx* ctx, const v1::ReadAccessLogRequest* req) override;
  Reactor* ActiveFlush(Ctx* ctx, const v1::ActiveFlushRequest* req,
                       v1::ActiveFlushResponse*) override;
  Reactor* DirtyPages(Ctx* ctx, const v1::DirtyPagesRequest* req,
                      v1::DirtyPagesResponse* resp) override;
  Reactor* Checkpoint(Ctx* ctx, const v1::CheckpointRequest* req,
                      v1::CheckpointResponse* resp) override;
  Reactor* Restore(Ctx* ctx, const v1::RestoreRequest* req, v1::RestoreResponse* resp) override;
  Reactor* CompactCheckpoint(Ctx* ctx, const v1::CompactCheckpointRequest* req,
                             v1::CompactCheckpointResponse* resp) override;

 protected:
  // The calling session, from the call's metadata.
  virtual SessionRef Session(const Ctx* ctx) const = 0;

 private:
  struct Job {
    SessionRef session;  // the key of the per-session bound
    Reactor* reactor = nullptr;
    std::function<Status()> status;
  };
  // Runs `status` on a worker for `session` and finishes the call with its
  // result (or at once with RESOURCE_EXHAUSTED past the session's bound).
  Reactor* Offload(Ctx* ctx, SessionRef session, std::function<Status()> status);
  void Run();
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !jobs_.empty(); }

  Node& node_;
  const uint32_t per_session_;  // daemon.max_checkpoint_calls_per_session
  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint32_t> calls_
      ABSL_GUARDED_BY(mu_);  // queued or running, per session number
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;  // started in the constructor, once the rest is built
};

// The local socket's watch, unwatch, get_watch, active_flush and
// dirty_pages requests. A watch answers with two fds (borrowed from the
// node; the caller sends them): the log memfd and its eventfd. A flush
// blocks the calling (connection) thread until done.
Status ActiveLocal(Node& node, SessionRef session, const v1::LocalRequest& req,
                   v1::LocalResponse* resp, std::vector<int>* fds);

}  // namespace isometry
