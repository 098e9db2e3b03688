// isoctl's connection to isometryd: one gRPC channel over the daemon's unix
// socket, with errors converted to Status values marked for isoctl's exit
// codes (see exit_codes.h).
//
// Not thread-safe: one isoctl command uses it from its main thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "isometry.grpc.pb.h"

namespace isometry::isoctl {

struct ConnectOptions {
  std::string socket;                   // a unix socket path
  std::chrono::milliseconds timeout{};  // per call; 0: no deadline
  std::string operator_token;           // sent as "isometry-operator" when set
};

// Options of one call.
struct CallOptions {
  std::string_view session;  // sent as "isometry-session" metadata when set
  // Overrides the connection's per-call timeout; a negative value means
  // "use the connection's".
  std::chrono::milliseconds timeout{-1};
};

template <typename Req, typename Resp>
using UnaryMethod = grpc::Status (v1::Isometry::Stub::*)(grpc::ClientContext*, const Req&, Resp*);

class DaemonClient {
 public:
  // Connects and waits until the channel is ready (at most the timeout, or
  // 5 s when it is 0). Fails with UnreachableError, naming the socket, when
  // the socket is missing, refuses the connection or does not answer.
  static Result<std::unique_ptr<DaemonClient>> Connect(const ConnectOptions& options);

  // One unary call. A daemon error comes back as its gRPC code and message;
  // a connection lost during the call as UnreachableError.
  template <typename Req, typename Resp>
  Status Call(UnaryMethod<Req, Resp> method, const Req& request, Resp* response,
              const CallOptions& call = {}) {
    grpc::ClientContext ctx;
    Prepare(ctx, call);
    return Convert((stub_.get()->*method)(&ctx, request, response));
  }

  v1::Isometry::Stub& stub() { return *stub_; }
  const std::string& socket() const { return options_.socket; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  // Sets the deadline and session metadata of a context.
  void Prepare(grpc::ClientContext& ctx, const CallOptions& call) const;
  // grpc::Status -> Status, telling "the daemon said no" from "no daemon".
  Status Convert(const grpc::Status& status);

 private:
  // False when the channel has left READY, or leaves it within a moment.
  bool StillConnected();

  DaemonClient(ConnectOptions options, std::shared_ptr<grpc::Channel> channel);

  const ConnectOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Isometry::Stub> stub_;
};

// A session: an open Attach stream. Calls that touch allocations, instances
// or copies must name one. The session ends when this object is destroyed
// (or Close() is called), and the daemon then frees its allocations and
// cancels its transfers. Move-only; the client must outlive it.
class Session {
 public:
  static Result<Session> Open(DaemonClient& client, const std::string& client_name);
  Session(Session&&) noexcept = default;
  Session& operator=(Session&&) noexcept = default;
  ~Session() { Close(); }

  // The session's public number, for messages; its token (a credential)
  // stays inside Call and is never shown.
  uint64_t number() const { return number_; }

  template <typename Req, typename Resp>
  Status Call(UnaryMethod<Req, Resp> method, const Req& request, Resp* response,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
    return client_->Call(method, request, response, {.session = id_, .timeout = timeout});
  }

  // Ends the stream; idempotent.
  void Close();

 private:
  Session() = default;

  DaemonClient* client_ = nullptr;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<v1::SessionEvent>> stream_;
  std::string id_;  // the token
  uint64_t number_ = 0;
};

}  // namespace isometry::isoctl
