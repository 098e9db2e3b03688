#include "tools/isoctl/daemon_client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/group.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "tools/isoctl/exit_codes.h"

namespace isometry::isoctl {

namespace {

constexpr char kSessionKey[] = "isometry-session";
constexpr char kOperatorKey[] = "isometry-operator";
constexpr std::chrono::milliseconds kDefaultConnectTimeout{5000};
// Reads return up to 64 MiB; the daemon allows 80 MiB messages.
constexpr int kMaxMessageBytes = 80 << 20;

std::string Target(const std::string& socket) { return "unix:" + socket; }

Status Unreachable(const std::string& socket, const std::string& why) {
  return UnreachableError(StrCat("cannot reach isometryd at ", Target(socket), ": ", why,
                                 " (is isometryd running? set --socket or ISOMETRY_SOCKET)"));
}

// Refused by file permissions: the daemon runs, this user may not connect.
// Says which group opens `path` (the socket, or a directory on the way).
Status PermissionDenied(const std::string& socket, const std::string& path) {
  struct stat st {};
  const bool known = ::stat(path.c_str(), &st) == 0;
  const std::optional<std::string> name = known ? GroupNameOf(st.st_gid) : std::nullopt;
  const std::string group = name ? *name : known ? std::to_string(st.st_gid) : "";
  std::string hint;
  if (!group.empty()) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    hint = StrCat(": ", path, " is open to group '", group, "' (mode ", mode,
                  "); ask an administrator to add you to it (usermod -aG ", group,
                  " $USER) and log in again");
  }
  return UnreachableError(
      StrCat("cannot reach isometryd at ", Target(socket), ": permission denied", hint));
}

// Why a socket path cannot be connected to, as far as the file system and
// a plain connect() tell; OK when something listens there.
Status SocketProblem(const std::string& socket) {
  struct stat st {};
  if (::stat(socket.c_str(), &st) != 0) {
    const int err = errno;
    if (err != EACCES) {
      return Unreachable(socket, ErrnoString(err));
    }
    // A directory on the way is closed: name the deepest one that exists
    // for us to stat (the one whose search permission is missing is
    // typically the socket's own, e.g. /run/isometry at mode 0750).
    const std::string dir = std::filesystem::path(socket).parent_path().string();
    return PermissionDenied(socket, dir.empty() ? "." : dir);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Unreachable(socket, "not a socket");
  }
  sockaddr_un addr{};
  if (socket.size() >= sizeof addr.sun_path) {
    return Unreachable(socket, "socket path too long");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket.c_str(), socket.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return Unreachable(socket, ErrnoString(errno));
  }
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    if (err == EACCES || err == EPERM) {
      return PermissionDenied(socket, socket);
    }
    return Unreachable(socket, err == ECONNREFUSED ? "connection refused" : ErrnoString(err));
  }
  return OkStatus();
}

}  // namespace

DaemonClient::DaemonClient(ConnectOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Isometry::NewStub(channel_)) {}

Result<std::unique_ptr<DaemonClient>> DaemonClient::Connect(const ConnectOptions& options) {
  ISO_RETURN_IF_ERROR(SocketProblem(options.socket));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  auto channel =
      grpc::CreateCustomChannel(Target(options.socket), grpc::InsecureChannelCredentials(), args);
  const auto wait = options.timeout.count() > 0 ? options.timeout : kDefaultConnectTimeout;
  const auto deadline = std::chrono::system_clock::now() + wait;
  // A refused connection shows as TRANSIENT_FAILURE at once; waiting for
  // READY instead would sit out the whole timeout.
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return Unreachable(options.socket, "connection refused");
    }
    if (!channel->WaitForStateChange(state, deadline)) {
      return Unreachable(options.socket, StrCat("no connection within ", wait.count(), " ms"));
    }
    state = channel->GetState(/*try_to_connect=*/true);
  }
  return std::unique_ptr<DaemonClient>(new DaemonClient(options, std::move(channel)));
}

void DaemonClient::Prepare(grpc::ClientContext& ctx, const CallOptions& call) const {
  const auto timeout = call.timeout.count() >= 0 ? call.timeout : options_.timeout;
  if (timeout.count() > 0) {
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  }
  if (!call.session.empty()) {
    ctx.AddMetadata(kSessionKey, std::string(call.session));
  }
  if (!options_.operator_token.empty()) {
    ctx.AddMetadata(kOperatorKey, options_.operator_token);
  }
}

Status DaemonClient::Convert(const grpc::Status& status) {
  if (status.ok()) {
    return OkStatus();
  }
  // UNAVAILABLE is also the daemon's own answer while it drains, and
  // isoctl never cancels a call, so a CANCELLED one was cancelled by a
  // server that stops. Either means "no daemon" once the connection is gone.
  const grpc::StatusCode code = status.error_code();
  if ((code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED) &&
      !StillConnected()) {
    const std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    const std::string& detail = status.error_message();
    return UnreachableError(StrCat("lost the connection to isometryd at ", Target(socket()), ": ",
                                   name, detail.empty() || detail == name ? "" : ": ",
                                   detail == name ? "" : detail));
  }
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      message == "Deadline Exceeded") {
    message = StrCat("no answer from isometryd within ", options_.timeout.count(),
                     " ms (raise --timeout-ms, or 0 for no limit)");
  }
  // gRPC codes and absl codes share their numbering (both are google.rpc.Code).
  return Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

bool DaemonClient::StillConnected() {
  // A server that is going away closes the connection a moment after it
  // fails the calls; give the channel that moment to notice.
  constexpr auto kGrace = std::chrono::milliseconds(250);
  const grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/false);
  if (state != GRPC_CHANNEL_READY) {
    return false;
  }
  return !channel_->WaitForStateChange(state, std::chrono::system_clock::now() + kGrace);
}

Result<Session> Session::Open(DaemonClient& client, const std::string& client_name) {
  Session s;
  s.client_ = &client;
  s.ctx_ = std::make_unique<grpc::ClientContext>();
  v1::AttachRequest request;
  request.set_client_name(client_name);
  s.stream_ = client.stub().Attach(s.ctx_.get(), request);
  v1::SessionEvent first;
  if (!s.stream_->Read(&first)) {
    const grpc::Status status = s.stream_->Finish();
    s.stream_.reset();
    if (status.ok()) {
      return Internal("isometryd ended the Attach stream without a session id");
    }
    return client.Convert(status);
  }
  if (first.session().empty()) {
    return Internal("isometryd's first Attach event carries no session id");
  }
  s.id_ = first.session();
  s.number_ = first.session_id();
  return s;
}

void Session::Close() {
  if (!stream_) {
    return;
  }
  // Completion events may still be queued on the stream; cancelling drops
  // them and ends the session at once.
  ctx_->TryCancel();
  (void)stream_->Finish();
  stream_.reset();
  ctx_.reset();
}

}  // namespace isometry::isoctl
