#include "channels/tcp/data_plane.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "core/random.h"

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

void DataPlane::Start(Authenticate check, LinkDown on_down) {
  check_ = std::move(check);
  on_down_ = std::move(on_down);
  acceptor_ = std::thread([this] { AcceptLoop(); });
  spdlog::info("data plane listening on {} ({} connection(s) per peer, checksums {}, {})", address_,
               options_.connections, options_.checksum ? "on" : "off unless a peer asks",
               options_.tls ? "TLS" : "no TLS");
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

void DataPlane::AbandonEverywhere(uint64_t transfer, const Status& why) {
  std::vector<PeerLink*> links;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [peer, l] : links_) links.push_back(l.get());
  }
  for (PeerLink* l : links) l->Abandon(transfer, why);  // links live as long as the plane
}

void DataPlane::AcceptLoop() {
  while (true) {
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    std::string remote = fd.valid() ? RemoteAddress(fd.get()) : std::string();
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    JoinHandshakes(/*all=*/false);
    auto done = std::make_shared<std::atomic<bool>>(false);
    absl::MutexLock lock(&handshake_mu_);
    handshakes_.emplace_back(std::thread([this, fd = std::move(fd), remote, done]() mutable {
                               Handshake(std::move(fd), std::move(remote));
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

void DataPlane::Handshake(UniqueFd owned, std::string remote) {
  auto w = std::make_unique<Wire>(std::move(owned), std::move(remote));
  Result<std::pair<std::string, uint8_t>> admitted = Admit(*w);
  if (!admitted.ok()) {
    const std::string why(admitted.status().message());
    // Anyone who reaches the data port can try: limited lines per address,
    // escaped text, and the address named. Nothing of the real peer's
    // links is touched.
    static LogLimiter limiter(5, std::chrono::seconds(10));
    const std::string& from = w->remote();
    if (const auto v = limiter.Allow(std::string_view(from).substr(0, from.rfind(':'))); v.log) {
      if (v.suppressed) {
        spdlog::warn("suppressed {} similar data connection lines from {}", v.suppressed, from);
      }
      spdlog::warn("data connection from {} refused: {}", from, ForLog(why, 512));
    }
    FrameHeader reply;
    reply.type = FrameType::kAbort;
    reply.code = static_cast<uint32_t>(admitted.status().code());
    reply.length = why.size();
    (void)w->SendFrame(reply, why.data());
    return;
  }
  FrameHeader reply;
  reply.type = FrameType::kHello;
  reply.flags = admitted->second;
  if (!w->SendFrame(reply).ok()) return;
  if (Status s = w->EndHello((reply.flags & kFlagSealed) != 0, /*accepting=*/true); !s.ok()) {
    spdlog::warn("data connection from {}: {}", w->remote(), std::string(s.message()));
    return;
  }
  Link(admitted->first).AddIncoming(std::move(w), (reply.flags & kFlagChecksum) != 0);
}

Result<std::pair<std::string, uint8_t>> DataPlane::Admit(Wire& w) {
  // A connecting node has timeout_ms per step to say who it is.
  const uint32_t t = options_.timeout_ms;
  if (options_.tls) ISO_RETURN_IF_ERROR(w.StartTls(*options_.tls, /*accepting=*/true, "", t));
  FrameHeader h;
  std::string client_nonce;
  ISO_RETURN_IF_ERROR(w.RecvFrame(h, &client_nonce, t));
  if (h.type != FrameType::kHello) return absl::DataLossError("first frame is not HELLO");
  if (client_nonce.size() < 16 || client_nonce.size() > 128) {
    return absl::DataLossError("HELLO without a nonce of 16 to 128 bytes");
  }
  HelloProof proof;
  proof.node = h.code;
  proof.client_nonce = std::move(client_nonce);
  proof.server_nonce = RandomHex(16);
  const bool want_checksum = (h.flags & kFlagChecksum) != 0;
  const bool seal = (h.flags & kFlagSealed) != 0 && w.CanSeal();
  FrameHeader challenge;
  challenge.type = FrameType::kChallenge;
  challenge.length = proof.server_nonce.size();
  ISO_RETURN_IF_ERROR(w.SendFrame(challenge, proof.server_nonce.data()));
  ISO_RETURN_IF_ERROR(w.RecvFrame(h, &proof.proof, t));
  if (h.type != FrameType::kProof) return absl::DataLossError("second frame is not PROOF");
  ISO_ASSIGN_OR_RETURN(std::string peer, check_(proof));
  if (!w.PeerIs(peer)) {
    return absl::UnauthenticatedError(
        StrCat("its TLS certificate does not name peer '", peer, "' it claims to be"));
  }
  const uint8_t flags =
      (want_checksum || options_.checksum ? kFlagChecksum : 0) | (seal ? kFlagSealed : 0);
  return std::make_pair(std::move(peer), flags);
}

}  // namespace isometry::net
