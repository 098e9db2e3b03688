#include "channels/tcp/data_plane.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/log_escape.h"
#include "core/log_limiter.h"

namespace isometry::net {

Result<std::unique_ptr<DataPlane>> DataPlane::Create(const DataOptions& options) {
  if (options.connections < 1 || options.connections > 64) {
    return InvalidArgument("data connections per peer must be 1 to 64, not ", options.connections);
  }
  std::unique_ptr<DataPlane> p(new DataPlane(options));
  ISO_ASSIGN_OR_RETURN(auto bound, ListenOn(options.listen));
  p->listen_fd_ = std::move(bound.first);
  p->address_ = bound.second;
  return p;
}

DataPlane::~DataPlane() {
  if (listen_fd_.valid()) ::shutdown(listen_fd_.get(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  JoinHandshakes(/*all=*/true);
  listen_fd_.reset();
  std::map<std::string, std::unique_ptr<PeerLink>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
  }
  links.clear();
}

void DataPlane::Start(TokenCheck check, LinkDown on_down) {
  check_ = std::move(check);
  on_down_ = std::move(on_down);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  spdlog::info("data plane listening on {} ({} connection(s) per peer, checksums {})", address_,
               options_.connections, options_.checksum ? "on" : "off");
}

PeerLink& DataPlane::Link(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto& l = links_[peer];
  if (!l) {
    l = std::make_unique<PeerLink>(peer, options_, &completer_,
                                   [this, peer](const Status& why, uint64_t generation) {
                                     if (on_down_) on_down_(peer, why, generation);
                                   });
  }
  return *l;
}

void DataPlane::AcceptLoop() {
  while (true) {
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    JoinHandshakes(/*all=*/false);
    auto done = std::make_shared<std::atomic<bool>>(false);
    absl::MutexLock lock(&handshake_mu_);
    handshakes_.emplace_back(std::thread([this, fd = std::move(fd), done]() mutable {
                               Handshake(std::move(fd));
                               *done = true;
                             }),
                             done);
  }
}

void DataPlane::JoinHandshakes(bool all) {
  std::vector<std::thread> finished;
  {
    absl::MutexLock lock(&handshake_mu_);
    for (auto it = handshakes_.begin(); it != handshakes_.end();) {
      if (all || *it->second) {
        finished.push_back(std::move(it->first));
        it = handshakes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : finished) t.join();
}

void DataPlane::Handshake(UniqueFd owned) {
  const int fd = owned.get();
  // A connecting node has this long to say who it is.
  timeval tv{static_cast<time_t>(options_.timeout_ms / 1000),
             static_cast<suseconds_t>((options_.timeout_ms % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  FrameHeader h;
  Status s = RecvAll(fd, &h, sizeof h);
  if (s.ok()) s = CheckHeader(h);
  if (s.ok() && h.type != FrameType::kHello) s = absl::DataLossError("first frame is not HELLO");
  std::string token(s.ok() ? h.length : 0, '\0');
  if (s.ok()) s = RecvAll(fd, token.data(), h.length);
  Result<std::string> peer = s.ok() ? check_(h.code, token) : Result<std::string>(s);
  FrameHeader reply;
  if (!peer.ok()) {
    const std::string why(peer.status().message());
    // Anyone who reaches the data port can try: limited lines, escaped text.
    static LogLimiter limiter(5, std::chrono::seconds(10));
    if (const auto v = limiter.Allow("data handshake"); v.log) {
      if (v.suppressed) spdlog::warn("suppressed {} similar data connection lines", v.suppressed);
      spdlog::warn("data connection from node {} refused: {}", h.code, ForLog(why, 512));
    }
    reply.type = FrameType::kAbort;
    reply.code = static_cast<uint32_t>(peer.status().code());
    reply.length = why.size();
    (void)SendFrame(fd, reply, why.data());
    return;
  }
  reply.type = FrameType::kHello;
  if (!SendFrame(fd, reply).ok()) return;
  timeval none{};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  Link(*peer).AddIncoming(std::move(owned));
}

}  // namespace isometry::net
