// Active Access (issue #19) requests, as both front ends serve them: the
// gRPC service (one function per RPC) and the local socket (ActiveLocal,
// which also hands the owner the access log memfd and eventfd).
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

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
// calling thread (a gRPC callback thread or a local connection's thread):
// bounded by the image's size, not by other clients.
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
// derives from this): proto in, node call, proto out.
class ActiveCallbacks : public v1::Isometry::CallbackService {
 public:
  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;
  explicit ActiveCallbacks(Node& node) : node_(node) {}

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
  Node& node_;
};

// The local socket's watch, unwatch, get_watch, active_flush and
// dirty_pages requests. A watch answers with two fds (borrowed from the
// node; the caller sends them): the log memfd and its eventfd. A flush
// blocks the calling (connection) thread until done.
Status ActiveLocal(Node& node, const std::string& session, const v1::LocalRequest& req,
                   v1::LocalResponse* resp, std::vector<int>* fds);

}  // namespace isometry
