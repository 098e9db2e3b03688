#include "net/hello_acceptor.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <new>
#include <system_error>
#include <thread>

#include "core/log_escape.h"
#include "core/log_limiter.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/thread_name.h"

namespace isometry::net {
namespace {

using Clock = std::chrono::steady_clock;
using Want = Wire::Want;

// A hello's frames are tiny (a nonce, an HMAC): more is not a peer.
constexpr uint64_t kMaxHelloPayload = 1024;
constexpr auto kMinBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);
// epoll data of the two fixed descriptors; connections count up from 2.
constexpr uint64_t kListenId = 0, kStopId = 1;

Status PortError(std::string_view what, int err) {
  return Internal(StrCat("data port: ", what, ": ", ErrnoString(err)));
}

// One connection saying hello: all the state it has before its proof.
struct HelloState {
  enum class Step { kTls, kHello, kProof };
  std::unique_ptr<Wire> wire;
  Clock::time_point deadline;
  Step step = Step::kHello;
  Want watching = Want::kRead;
  FrameHeader header;
  size_t got = 0;  // bytes of header, then payload, read so far
  std::string payload;
  HelloProof proof;
  bool want_checksum = false, seal = false;
};

class EpollAcceptor final : public HelloAcceptor {
 public:
  EpollAcceptor(UniqueFd listen, const Options& options, Check check, Admitted admitted)
      : listen_(std::move(listen)),
        options_(options),
        check_(std::move(check)),
        admitted_(std::move(admitted)) {}
  ~EpollAcceptor() override {
    const uint64_t one = 1;
    if (!thread_.joinable()) return;  // Init failed: no loop to stop
    if (::write(stop_.get(), &one, sizeof one) < 0) {
      spdlog::error("data port: cannot wake its event loop to stop: {}", ErrnoString(errno));
    }
    if (thread_.joinable()) thread_.join();
  }
  Status Init();

 private:
  void Run();
  void AcceptSome();
  // Stops accepting until `until` (the listening socket leaves epoll's
  // interest set meanwhile).
  void HoldAccept(Clock::time_point until);
  // After an error of accept: logs what ran out and holds for the backoff.
  void PauseAccept(int err);
  // The least time a hello has before a new connection may close it.
  Clock::duration MinHelloTime() const;
  void Event(uint64_t id, uint32_t events);
  // Runs a connection's hello as far as what has arrived allows: true
  // when it is over (admitted); an error refuses it.
  Result<bool> Drive(uint64_t id, HelloState& p);
  // Reads the frame in progress: true once it is whole.
  Result<bool> ReadFrame(uint64_t id, HelloState& p);
  Status Finish(HelloState& p, std::string& peer, uint8_t& flags);
  void Watch(uint64_t id, HelloState& p, Want want);
  // Closes a connection that did not finish its hello, saying why (an
  // ABORT frame once its TLS handshake is over) in the log and to it.
  void Refuse(std::map<uint64_t, HelloState>::iterator it, const Status& why);
  void ExpireOld(Clock::time_point now);

  UniqueFd listen_, epoll_, stop_;
  const Options options_;
  const Check check_;
  const Admitted admitted_;
  std::thread thread_;
  // The loop's own (no lock): connections by id, in arrival order (and so
  // in deadline order, every hello having the same time).
  std::map<uint64_t, HelloState> pending_;
  uint64_t next_id_ = 2;
  std::optional<Clock::time_point> accept_paused_until_;
  Clock::duration backoff_ = kMinBackoff;
};

Status EpollAcceptor::Init() {
  const int flags = ::fcntl(listen_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(listen_.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    return PortError("O_NONBLOCK on its listening socket", errno);
  }
  epoll_ = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return PortError("epoll_create1", errno);
  stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_.valid()) return PortError("eventfd", errno);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListenId;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &e) < 0) {
    return PortError("epoll_ctl", errno);
  }
  e.data.u64 = kStopId;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_.get(), &e) < 0) {
    return PortError("epoll_ctl", errno);
  }
  try {
    thread_ = std::thread([this] {
      NameThisThread("link-accept");
      Run();
    });
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(
        StrCat("data port: cannot start its event loop's thread: ", e.what()));
  }
  return OkStatus();
}

void EpollAcceptor::Run() {
  epoll_event events[64];
  while (true) {
    int wait_ms = -1;
    const auto now = Clock::now();
    auto until = [&](Clock::time_point t) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
      const int w = static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
      wait_ms = wait_ms < 0 ? w : std::min(wait_ms, w);
    };
    if (!pending_.empty()) until(pending_.begin()->second.deadline);
    if (accept_paused_until_) until(*accept_paused_until_);
    const int n = ::epoll_wait(epoll_.get(), events, 64, wait_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("data port: epoll_wait: {}; retrying in 100 ms", ErrnoString(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kStopId) {
        pending_.clear();
        return;
      }
      if (events[i].data.u64 == kListenId) {
        AcceptSome();
      } else {
        Event(events[i].data.u64, events[i].events);
      }
    }
    ExpireOld(Clock::now());
    if (accept_paused_until_ && Clock::now() >= *accept_paused_until_) {
      accept_paused_until_.reset();
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u64 = kListenId;
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listen_.get(), &e);
    }
  }
}

void EpollAcceptor::AcceptSome() {
  // At most a batch per wake-up: connections saying hello get their turn.
  for (int batch = 0; batch < 64; ++batch) {
    if (static_cast<int>(pending_.size()) >= options_.max_pending) {
      // Full: the oldest goes for a new one, but only once it had its
      // minimum time, so a flood cannot make the loop accept and close
      // as fast as it connects. Until then the backlog holds the rest.
      const auto evictable = pending_.begin()->second.deadline -
                             std::chrono::milliseconds(options_.timeout_ms) + MinHelloTime();
      if (Clock::now() < evictable) {
        HoldAccept(evictable);
        return;
      }
    }
    UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // The connection is gone already (or the network hiccupped): next.
      if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == ENETDOWN ||
          err == ENOPROTOOPT || err == EHOSTDOWN || err == ENONET || err == EHOSTUNREACH ||
          err == EOPNOTSUPP || err == ENETUNREACH) {
        continue;
      }
      PauseAccept(err);  // EMFILE, ENFILE, ENOBUFS, ENOMEM, or worse
      return;
    }
    backoff_ = kMinBackoff;
    try {
      if (static_cast<int>(pending_.size()) >= options_.max_pending) {
        static LogLimiter limiter(1, std::chrono::seconds(10));
        if (const auto v = limiter.Allow(""); v.log) {
          spdlog::warn(
              "data port: {} unauthenticated connections say hello already "
              "(cluster.data_max_handshakes): closed the oldest, from {} ({} more such "
              "line(s) suppressed)",
              pending_.size(), pending_.begin()->second.wire->remote(), v.suppressed);
        }
        pending_.erase(pending_.begin());
      }
      const uint64_t id = next_id_++;
      std::string remote = RemoteAddress(fd.get());
      HelloState& p = pending_[id];
      p.wire = std::make_unique<Wire>(std::move(fd), std::move(remote));
      p.deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
      p.step = options_.tls ? HelloState::Step::kTls : HelloState::Step::kHello;
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u64 = id;
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p.wire->fd(), &e) < 0) {
        const int err = errno;
        pending_.erase(id);
        PauseAccept(err);
        return;
      }
    } catch (const std::bad_alloc&) {
      PauseAccept(ENOMEM);
      return;
    }
  }
}

Clock::duration EpollAcceptor::MinHelloTime() const {
  return std::chrono::milliseconds(std::min<uint32_t>(options_.timeout_ms / 10, 100));
}

void EpollAcceptor::HoldAccept(Clock::time_point until) {
  accept_paused_until_ = until;
  epoll_event e{};
  e.events = 0;
  e.data.u64 = kListenId;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listen_.get(), &e);
}

void EpollAcceptor::PauseAccept(int err) {
  const char* what = err == EMFILE   ? "out of file descriptors (this process's limit, EMFILE)"
                     : err == ENFILE ? "out of file descriptors (the system's limit, ENFILE)"
                     : (err == ENOBUFS || err == ENOMEM) ? "out of memory for a socket"
                                                         : "accept failed";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(backoff_).count();
  static LogLimiter limiter(1, std::chrono::seconds(5));
  std::string freed;
  if (!pending_.empty()) {
    // The least a connection can lose: one that has not said who it is.
    freed = StrCat("; closed the oldest unauthenticated connection, from ",
                   pending_.begin()->second.wire->remote());
    pending_.erase(pending_.begin());
  }
  if (const auto v = limiter.Allow(""); v.log) {
    spdlog::error(
        "data port: {} ({}){}; accepting again in {} ms ({} more such line(s) suppressed)", what,
        ErrnoString(err), freed, ms, v.suppressed);
  }
  HoldAccept(Clock::now() + backoff_);
  backoff_ = std::min<Clock::duration>(backoff_ * 2, kMaxBackoff);
}

void EpollAcceptor::Event(uint64_t id, uint32_t /*events*/) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;  // closed by an earlier event of this batch
  Result<bool> done = [&]() -> Result<bool> {
    try {
      return Drive(id, it->second);
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory for its hello");
    }
  }();
  if (!done.ok()) {
    Refuse(it, done.status());
  } else if (*done) {
    pending_.erase(it);
  }
}

Result<bool> EpollAcceptor::Drive(uint64_t id, HelloState& p) {
  while (true) {
    if (p.step == HelloState::Step::kTls) {
      ISO_ASSIGN_OR_RETURN(Want w, p.wire->AcceptTlsStep(*options_.tls));
      if (w != Want::kNothing) {
        Watch(id, p, w);
        return false;
      }
      p.step = HelloState::Step::kHello;
      continue;
    }
    ISO_ASSIGN_OR_RETURN(bool whole, ReadFrame(id, p));
    if (!whole) return false;
    if (p.step == HelloState::Step::kHello) {
      if (p.header.type != FrameType::kHello) {
        return absl::DataLossError("first frame is not HELLO");
      }
      if (p.payload.size() < 16 || p.payload.size() > 128) {
        return absl::DataLossError("HELLO without a nonce of 16 to 128 bytes");
      }
      p.proof.node = p.header.code;
      p.proof.client_nonce = std::move(p.payload);
      p.proof.server_nonce = RandomHex(16);
      p.want_checksum = (p.header.flags & kFlagChecksum) != 0;
      p.seal = (p.header.flags & kFlagSealed) != 0 && p.wire->CanSeal();
      p.proof.flags = p.header.flags;
      p.proof.answer_flags =
          (p.want_checksum || options_.checksum ? kFlagChecksum : 0) | (p.seal ? kFlagSealed : 0);
      FrameHeader challenge;
      challenge.type = FrameType::kChallenge;
      challenge.length = p.proof.server_nonce.size();
      ISO_RETURN_IF_ERROR(p.wire->SendFrameNow(challenge, p.proof.server_nonce.data()));
      p.step = HelloState::Step::kProof;
      p.got = 0;
      p.payload.clear();
      continue;
    }
    if (p.header.type != FrameType::kProof) return absl::DataLossError("second frame is not PROOF");
    p.proof.proof = std::move(p.payload);
    std::string peer;
    uint8_t flags = 0;
    ISO_RETURN_IF_ERROR(Finish(p, peer, flags));
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p.wire->fd(), nullptr);
    if (!p.wire->tls()) {
      // Established plain connections block (frame.h's SendAll, RecvAll).
      ::fcntl(p.wire->fd(), F_SETFL, ::fcntl(p.wire->fd(), F_GETFL) & ~O_NONBLOCK);
    }
    const std::string remote = p.wire->remote();
    const Settled settled{(flags & kFlagChecksum) != 0, (p.proof.flags & kFlagExpress) != 0};
    if (Status s = admitted_(peer, std::move(p.wire), settled); !s.ok()) {
      spdlog::error("data connection from {} (peer '{}'): {}", remote, ForLog(peer),
                    ForLog(std::string(s.message()), 512));
    }
    return true;
  }
}

Status EpollAcceptor::Finish(HelloState& p, std::string& peer, uint8_t& flags) {
  ISO_ASSIGN_OR_RETURN(HelloAnswer answer, check_(p.proof));
  peer = std::move(answer.peer);
  if (!p.wire->PeerIs(peer)) {
    return absl::UnauthenticatedError(
        StrCat("its TLS certificate does not name peer '", peer, "' it claims to be"));
  }
  flags = p.proof.answer_flags;
  FrameHeader reply;
  reply.type = FrameType::kHello;
  reply.flags = flags;
  reply.length = answer.mac.size();
  ISO_RETURN_IF_ERROR(p.wire->SendFrameNow(reply, answer.mac.data()));
  return p.wire->EndHello(p.seal, /*accepting=*/true);
}

Result<bool> EpollAcceptor::ReadFrame(uint64_t id, HelloState& p) {
  while (true) {
    const bool in_header = p.got < sizeof p.header;
    if (!in_header && p.got - sizeof p.header == p.payload.size()) return true;
    char* at = in_header ? reinterpret_cast<char*>(&p.header) + p.got
                         : p.payload.data() + (p.got - sizeof p.header);
    const size_t left =
        in_header ? sizeof p.header - p.got : p.payload.size() - (p.got - sizeof p.header);
    Want want;
    ISO_ASSIGN_OR_RETURN(size_t n, p.wire->RecvNow(at, left, want));
    if (n == 0) {
      Watch(id, p, want);
      return false;
    }
    p.got += n;
    if (in_header && p.got == sizeof p.header) {
      ISO_RETURN_IF_ERROR(CheckHeader(p.header));
      if (p.header.length > kMaxHelloPayload) {
        return absl::DataLossError(StrCat("hello frame of ", p.header.length, " bytes"));
      }
      p.payload.assign(p.header.length, '\0');
    }
  }
}

void EpollAcceptor::Watch(uint64_t id, HelloState& p, Want want) {
  if (want == p.watching || want == Want::kNothing) return;
  epoll_event e{};
  e.events = want == Want::kRead ? EPOLLIN : EPOLLOUT;
  e.data.u64 = id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, p.wire->fd(), &e);
  p.watching = want;
}

void EpollAcceptor::Refuse(std::map<uint64_t, HelloState>::iterator it, const Status& why) {
  HelloState& p = it->second;
  const std::string text(why.message());
  // Anyone who reaches the data port can try: limited lines per address,
  // escaped text, and the address named. Nothing of the real peer's links
  // is touched.
  static LogLimiter limiter(5, std::chrono::seconds(10));
  const std::string& from = p.wire->remote();
  if (const auto v = limiter.Allow(std::string_view(from).substr(0, from.rfind(':'))); v.log) {
    if (v.suppressed) {
      spdlog::warn("suppressed {} similar data connection lines from {}", v.suppressed, from);
    }
    spdlog::warn("data connection from {} refused: {}", from, ForLog(text, 512));
  }
  if (p.step != HelloState::Step::kTls) {
    FrameHeader reply;
    reply.type = FrameType::kAbort;
    reply.code = static_cast<uint32_t>(why.code());
    reply.length = std::min<size_t>(text.size(), 4096);
    (void)p.wire->SendFrameNow(reply, text.data());  // best effort, never waits
  }
  pending_.erase(it);  // closes the socket (and frees its TLS state)
}

void EpollAcceptor::ExpireOld(Clock::time_point now) {
  while (!pending_.empty() && pending_.begin()->second.deadline <= now) {
    const HelloState& p = pending_.begin()->second;
    Refuse(pending_.begin(),
           Unavailable(p.step == HelloState::Step::kTls ? "TLS handshake" : "hello",
                       " not finished in ", options_.timeout_ms, " ms"));
  }
}

}  // namespace

std::vector<std::string> ProofTranscript(const HelloProof& hello) {
  return {"data",
          std::to_string(hello.node),
          std::to_string(kDataProtocolVersion),
          std::to_string(hello.flags),
          hello.client_nonce,
          hello.server_nonce};
}

std::vector<std::string> AnswerTranscript(const HelloProof& hello) {
  return {"data-accepted",
          std::to_string(hello.node),
          std::to_string(kDataProtocolVersion),
          std::to_string(hello.answer_flags),
          hello.client_nonce,
          hello.server_nonce};
}

Result<std::unique_ptr<HelloAcceptor>> HelloAcceptor::Start(UniqueFd listen, const Options& options,
                                                            Check check, Admitted admitted) {
  if (options.max_pending < 1) {
    return InvalidArgument("data port: at most ", options.max_pending, " pending hellos");
  }
  auto a = std::make_unique<EpollAcceptor>(std::move(listen), options, std::move(check),
                                           std::move(admitted));
  ISO_RETURN_IF_ERROR(a->Init());
  return std::unique_ptr<HelloAcceptor>(std::move(a));
}

}  // namespace isometry::net
