// A PeerLink's outgoing connections: TLS (when on), then the challenge
// hello of frame.h, so a recorded hello never opens another connection.
#include <spdlog/spdlog.h>

#include "core/random.h"
#include "net/hello_acceptor.h"
#include "net/peer_link.h"
#include "net/peer_link_conn.h"

namespace isometry::net {

Status PeerLink::Connect(const std::string& address, uint32_t self_node, const Prover& prove) {
  uint64_t epoch;
  {
    absl::MutexLock lock(&mu_);
    address_ = address;
    self_node_ = self_node;
    prove_ = prove;
    epoch = epoch_;
    // Its stall watch runs while the link is up.
    if (!StartResumerLocked()) {
      return absl::ResourceExhaustedError(
          StrCat("data link with peer '", peer_, "': cannot start its resume thread"));
    }
  }
  return OpenSet(address, self_node, prove, epoch, options_.timeout_ms, options_.timeout_ms);
}

Status PeerLink::OpenSet(const std::string& address, uint32_t self_node, const Prover& prove,
                         uint64_t epoch, uint32_t connect_ms, uint32_t hello_ms) {
  {
    std::vector<std::shared_ptr<Conn>> old;
    absl::MutexLock lock(&mu_);
    if (static_cast<int>(out_.size()) == SetSize()) return OkStatus();
    old.swap(closed_);  // threads of failed connections have exited or are exiting
  }
  std::vector<std::shared_ptr<Conn>> conns;
  for (int i = 0; i < SetSize(); ++i) {
    ISO_ASSIGN_OR_RETURN(std::shared_ptr<Conn> c,
                         Open(address, self_node, prove, connect_ms, hello_ms,
                              /*express=*/i == SetSize() - 1));
    // The peer answered a hello: it is alive, though a busy CPU may take
    // a while over the whole set's handshakes.
    Heard(std::chrono::steady_clock::now());
    conns.push_back(std::move(c));
  }
  const Wire& first = *conns.front()->wire;
  absl::MutexLock lock(&mu_);
  if (epoch != epoch_) {
    return Unavailable("data link to peer '", peer_, "' failed while it reconnected");
  }
  std::vector<std::function<void()>> calls;
  for (auto& c : out_) c->Close(calls, Unavailable("replaced"));
  for (auto& c : out_) closed_.push_back(c);
  out_ = conns;
  ++generation_;
  Status started = OkStatus();
  for (auto& c : conns) {
    if (started.ok()) started = StartConn(c);
  }
  if (!started.ok()) {
    for (auto& c : out_) {
      c->Close(calls, started);
      closed_.push_back(c);
    }
    out_.clear();
    for (auto& fn : calls) completer_->Post(std::move(fn));
    spdlog::error("data link to peer '{}': {}", peer_, std::string(started.message()));
    return started;
  }
  for (auto& fn : calls) completer_->Post(std::move(fn));
  if (out_down_since_) {
    spdlog::info("data link to peer '{}': resumed after {} ms; {} chunk(s) wait for credit again",
                 peer_, MsSince(*out_down_since_), waiting_credit_.size());
    out_down_since_.reset();
  }
  spdlog::info("data link to peer '{}': {} connection(s) to {}, {}, checksums {}", peer_,
               conns.size(), address,
               !first.tls()        ? "no TLS"
               : first.ktls_send() ? (first.ktls_recv() ? "TLS 1.3, kTLS send and receive"
                                                        : "TLS 1.3, kTLS send only")
               : first.sealed() ? "TLS 1.3 handshake, AES-128-GCM records keyed from it (no kTLS)"
                                : "TLS 1.3 in user space (no kTLS)",
               conns.front()->checksum ? "on" : "off");
  return OkStatus();
}

Result<std::shared_ptr<PeerLink::Conn>> PeerLink::Open(const std::string& address,
                                                       uint32_t self_node, const Prover& prove,
                                                       uint32_t connect_ms, uint32_t hello_ms,
                                                       bool express) {
  const uint32_t t = std::min(hello_ms, options_.timeout_ms);
  ISO_ASSIGN_OR_RETURN(UniqueFd connected,
                       ConnectTo(address, std::min(connect_ms, options_.timeout_ms)));
  TuneSocket(connected.get(), options_.timeout_ms, options_.unsent_limit_bytes);
  auto c = std::make_shared<Conn>();
  c->outgoing = true;
  c->express = express;
  c->wire = std::make_unique<Wire>(std::move(connected), address);
  Wire& w = *c->wire;
  if (options_.tls) {
    Status s = w.StartTls(*options_.tls, /*accepting=*/false, peer_, t);
    if (!s.ok()) {
      return Status(s.code(), StrCat("data connection to peer '", peer_, "': ", s.message()));
    }
  }
  FrameHeader h;
  h.type = FrameType::kHello;
  h.code = self_node;
  if (options_.checksum) h.flags |= kFlagChecksum;
  if (w.CanSeal()) h.flags |= kFlagSealed;
  if (express) h.flags |= kFlagExpress;
  const std::string nonce = RandomHex(16);
  h.length = nonce.size();
  ISO_RETURN_IF_ERROR(w.SendFrame(h, nonce.data()));
  // Either answer may be a refusal (ABORT, with its reason).
  bool sealed = false;
  auto answer = [&](FrameType want, std::string& payload, FrameHeader* got = nullptr) -> Status {
    FrameHeader reply;
    ISO_RETURN_IF_ERROR(w.RecvFrame(reply, &payload, t));
    if (got) *got = reply;
    if (reply.type == want) {
      c->checksum = (reply.flags & kFlagChecksum) != 0;
      sealed = (h.flags & reply.flags & kFlagSealed) != 0;
      return OkStatus();
    }
    if (reply.type == FrameType::kAbort) {
      return absl::PermissionDeniedError(
          StrCat("peer '", peer_, "' at ", address, " refused the data connection: ", payload));
    }
    return absl::DataLossError(StrCat("peer '", peer_, "' at ", address,
                                      " answered the hello with frame type ",
                                      static_cast<int>(reply.type)));
  };
  HelloProof transcript;
  transcript.node = self_node;
  transcript.flags = h.flags;
  transcript.client_nonce = nonce;
  ISO_RETURN_IF_ERROR(answer(FrameType::kChallenge, transcript.server_nonce));
  if (transcript.server_nonce.size() < 16) {
    return absl::DataLossError(StrCat("peer '", peer_, "' sent a challenge without a nonce"));
  }
  const std::string proof = prove(ProofTranscript(transcript));
  FrameHeader p;
  p.type = FrameType::kProof;
  p.length = proof.size();
  ISO_RETURN_IF_ERROR(w.SendFrame(p, proof.data()));
  std::string accepted;
  FrameHeader reply;
  ISO_RETURN_IF_ERROR(answer(FrameType::kHello, accepted, &reply));
  // The options it settled, as the peer sent them: an answer changed on
  // the way (checksums dropped, say) does not match.
  transcript.answer_flags = reply.flags;
  if (!SameSecret(prove(AnswerTranscript(transcript)), accepted)) {
    return absl::UnauthenticatedError(
        StrCat("peer '", peer_, "' at ", address,
               " accepted the data connection without proof of the session key, or with its "
               "options changed on the way (its hello is not the one the peer sent)"));
  }
  ISO_RETURN_IF_ERROR(w.EndHello(sealed, /*accepting=*/false));
  return c;
}

}  // namespace isometry::net
