// Active Access (issue #19) requests, as both front ends serve them: the
// gRPC service (one function per RPC) and the local socket (ActiveLocal,
// which also hands the owner the access log memfd and eventfd).
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/node/node.h"
#include "isometry.grpc.pb.h"
#include "isometry.pb.h"

namespace isometry {

Status WatchRpc(Node& node, const std::string& session, const v1::WatchRequest& req,
                v1::WatchResponse* out);
Status GetWatchRpc(Node& node, const std::string& session, const v1::GetWatchRequest& req,
                   v1::WatchInfo* out);
Status DirtyPagesRpc(Node& node, const std::string& session, const v1::DirtyPagesRequest& req,
                     v1::DirtyPagesResponse* out);
// Checkpoint, Restore and CompactCheckpoint do their disk I/O on the
// calling thread (ActiveCallbacks' worker, or a local connection's).
Status CheckpointRpc(Node& node, const std::string& session, const v1::CheckpointRequest& req,
                     v1::CheckpointResponse* out);
Status RestoreRpc(Node& node, const std::string& session, const v1::RestoreRequest& req,
                  v1::RestoreResponse* out);
Status CompactCheckpointRpc(Node& node, const std::string& session,
                            const v1::CompactCheckpointRequest& req,
                            v1::CompactCheckpointResponse* out);
// Finishes `reactor` from the watch's worker once flushed: no gRPC thread
// waits.
grpc::ServerUnaryReactor* ActiveFlushRpc(Node& node, const std::string& session,
                                         const v1::ActiveFlushRequest& req,
                                         grpc::ServerUnaryReactor* reactor);

// The Active Access RPCs of the gRPC service (daemon/server/grpc_service.cc
// derives from this): proto in, node call, proto out. Checkpoint, Restore
// and CompactCheckpoint, whose disk I/O is bounded by an image's size but
// not small, run on one worker thread of their own, in arrival order, so
// no gRPC thread waits for a disk; the worker finishes what is queued and
// exits when the service is destroyed (after the server has shut down).
class ActiveCallbacks : public v1::Isometry::CallbackService {
 public:
  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;
  explicit ActiveCallbacks(Node& node) : node_(node), worker_([this] { Run(); }) {}
  ~ActiveCallbacks() override;
  ActiveCallbacks(const ActiveCallbacks&) = delete;
  ActiveCallbacks& operator=(const ActiveCallbacks&) = delete;

  Reactor* Watch(Ctx* ctx, const v1::WatchRequest* req, v1::WatchResponse* resp) override;
  Reactor* Unwatch(Ctx* ctx, const v1::UnwatchRequest* req, v1::UnwatchResponse*) override;
  Reactor* GetWatch(Ctx* ctx, const v1::GetWatchRequest* req, v1::WatchInfo* resp) override;
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
  virtual std::string Session(const Ctx* ctx) const = 0;

 private:
  // Runs `status` on the worker and finishes the call with its result.
  Reactor* Offload(Ctx* ctx, std::function<Status()> status);
  void Run();
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !jobs_.empty(); }

  Node& node_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;  // last: started once the rest is built
};

// The local socket's watch, unwatch, get_watch, active_flush and
// dirty_pages requests. A watch answers with two fds (borrowed from the
// node; the caller sends them): the log memfd and its eventfd. A flush
// blocks the calling (connection) thread until done.
Status ActiveLocal(Node& node, const std::string& session, const v1::LocalRequest& req,
                   v1::LocalResponse* resp, std::vector<int>* fds);

}  // namespace isometry
