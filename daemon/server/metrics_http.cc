#include "daemon/server/metrics_http.h"

#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "config/runtime_config.h"
#include "core/log_limiter.h"
#include "core/strings.h"
#include "core/thread_name.h"
#include "core/unique_fd.h"
#include "daemon/server/metrics_text.h"

namespace isometry {

namespace {

using Clock = std::chrono::steady_clock;

// A listening, non-blocking TCP socket on `hp`; the error names `listen`.
Result<UniqueFd> ListenTcp(const HostPort& hp, const std::string& listen) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(hp.port);
  if (int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Unavailable("cannot serve metrics on ", listen, ": ", gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  UniqueFd fd(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Unavailable("cannot serve metrics on ", listen, ": ", ErrnoString(errno));
  // SO_REUSEADDR allows a restart while old connections linger; never
  // SO_REUSEPORT, which would let a second daemon share the port.
  const int on = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0) {
    return Unavailable("cannot serve metrics on ", listen, ": ", ErrnoString(errno));
  }
  return fd;
}

// The answer to a request whose head (request line and headers) is `head`.
std::string Answer(std::string_view head, const MetricsHttpServer::Render& render) {
  const std::string_view line = head.substr(0, head.find("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  std::string_view method, target;
  if (sp2 != std::string_view::npos) {
    method = line.substr(0, sp1);
    target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    target = target.substr(0, target.find('?'));
  }
  const bool head_only = method == "HEAD";
  std::string status = "404 Not Found", type = "text/plain; charset=utf-8", body = "Not Found\n";
  if ((method == "GET" || head_only) && target == "/metrics") {
    status = "200 OK";
    type = kMetricsContentType;
    body = render();
  }
  std::string out = StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", type,
                           "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n");
  if (!head_only) out += body;
  return out;
}

class PollServer final : public MetricsHttpServer {
 public:
  PollServer(UniqueFd listener, UniqueFd wake, Render render, Limits limits)
      : listener_(std::move(listener)),
        wake_(std::move(wake)),
        render_(std::move(render)),
        limits_(limits) {}

  ~PollServer() override {
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    if (thread_.joinable()) thread_.join();
  }

  Status Run(const std::string& listen) {
    try {
      thread_ = std::thread([this] {
        NameThisThread("iso-metrics");
        Loop();
      });
    } catch (const std::system_error& e) {
      return ResourceExhausted("cannot serve metrics on ", listen, ": no thread (", e.what(), ")");
    }
    return OkStatus();
  }

 private:
  enum class Phase { kReading, kWriting, kClosing };
  struct Conn {
    UniqueFd fd;
    std::string peer;
    Phase phase = Phase::kReading;
    Clock::time_point accepted, deadline;
    std::string in, out;
    size_t sent = 0;
  };

  void Loop() {
    std::vector<pollfd> fds;
    while (true) {
      const Clock::time_point now = Clock::now();
      fds.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      const bool accepting = now >= accept_paused_until_;
      fds.push_back({listener_.get(), static_cast<short>(accepting ? POLLIN : 0), 0});
      Clock::time_point next = now + std::chrono::seconds(1);
      if (!accepting) next = std::min(next, accept_paused_until_);
      for (const Conn& c : conns_) {
        fds.push_back(
            {c.fd.get(), static_cast<short>(c.phase == Phase::kWriting ? POLLOUT : POLLIN), 0});
        next = std::min(next, c.deadline);
      }
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
      const int n =
          ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count())));
      if (n < 0 && errno != EINTR) {
        spdlog::error("metrics: poll: {}", ErrnoString(errno));
        return;
      }
      if (fds[0].revents != 0) return;  // stopping
      // Connections first (their pollfds follow in order), then new ones.
      for (size_t i = 0; i < conns_.size(); ++i) {
        if (fds[i + 2].revents != 0) Serve(conns_[i]);
      }
      CloseExpired();
      if (fds[1].revents != 0) AcceptAll();
    }
  }

  void AcceptAll() {
    for (int i = 0; i < 64; ++i) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      UniqueFd fd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                            SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd.valid()) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: look again in a while rather than spin.
          Warn("accept", StrCat("metrics: cannot accept a connection: ", ErrnoString(errno)));
          accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      if (conns_.size() >= limits_.max_connections) {
        // The oldest goes: a scrape sends its request at once and leaves
        // within milliseconds, so the oldest is the idlest.
        Warn("full",
             StrCat("metrics: ", conns_.size(), " connections open (metrics.max_connections); ",
                    "closing the oldest, from ", conns_.front().peer));
        conns_.erase(conns_.begin());
      }
      Conn c;
      c.fd = std::move(fd);
      c.peer = PeerName(addr, len);
      c.accepted = Clock::now();
      c.deadline = c.accepted + limits_.timeout;
      conns_.push_back(std::move(c));
    }
  }

  // Reads the request, writes the answer, or drains before the close.
  void Serve(Conn& c) {
    char buf[4096];
    if (c.phase == Phase::kWriting) {
      const ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return Drop(c);
      if (n > 0) c.sent += static_cast<size_t>(n);
      if (c.sent < c.out.size()) return;
      // All sent: half-close and read to the client's end, so that a close
      // with unread bytes (an RST) cannot discard the answer in flight.
      ::shutdown(c.fd.get(), SHUT_WR);
      c.phase = Phase::kClosing;
      c.out.clear();
      c.deadline = Clock::now() + limits_.timeout;
      return;
    }
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return Drop(c);  // the client left (or failed)
    if (c.phase == Phase::kClosing) return;
    c.in.append(buf, static_cast<size_t>(n));
    const size_t end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c.in.size() > kMaxRequestBytes) {
        Warn("long", StrCat("metrics: a request from ", c.peer, " runs past ", kMaxRequestBytes,
                            " bytes of headers; closing it"));
        Drop(c);
      }
      return;
    }
    c.out = Answer(std::string_view(c.in).substr(0, end), render_);
    c.in.clear();
    c.phase = Phase::kWriting;
    c.deadline = Clock::now() + limits_.timeout;
    Serve(c);  // most answers leave in one send
  }

  void Drop(Conn& c) { c.fd.reset(); }

  void CloseExpired() {
    const Clock::time_point now = Clock::now();
    for (Conn& c : conns_) {
      if (!c.fd.valid() || now < c.deadline) continue;
      if (c.phase != Phase::kClosing) {
        Warn("late",
             StrCat("metrics: a connection from ", c.peer, " did not ",
                    c.phase == Phase::kReading ? "send its whole request" : "take its answer",
                    " within ", limits_.timeout.count(), " ms (metrics.request_timeout_ms); ",
                    "closing it"));
      }
      Drop(c);
    }
    std::erase_if(conns_, [](const Conn& c) { return !c.fd.valid(); });
  }

  static std::string PeerName(const sockaddr_storage& addr, socklen_t len) {
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
    (void)::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, port,
                        sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
    return StrCat(host, ":", port);
  }

  // Lines a client can cause at will: a few of each `kind` per 10 s,
  // then a count.
  void Warn(std::string_view kind, const std::string& line) {
    const LogLimiter::Verdict v = warnings_.Allow(kind);
    if (!v.log) return;
    if (v.suppressed > 0) spdlog::warn("metrics: {} similar line(s) suppressed", v.suppressed);
    spdlog::warn("{}", line);
  }

  // Constant after construction.
  const UniqueFd listener_;
  const UniqueFd wake_;  // written by the destructor
  const Render render_;
  const Limits limits_;
  // Only the loop's thread touches these.
  std::vector<Conn> conns_;  // in the order accepted
  Clock::time_point accept_paused_until_{};
  LogLimiter warnings_{5, std::chrono::seconds(10)};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                    Render render, Limits limits) {
  ISO_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(listen));
  ISO_ASSIGN_OR_RETURN(UniqueFd listener, ListenTcp(hp, listen));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return Internal("metrics: eventfd: ", ErrnoString(errno));
  auto server =
      std::make_unique<PollServer>(std::move(listener), std::move(wake), std::move(render), limits);
  ISO_RETURN_IF_ERROR(server->Run(listen));
  return std::unique_ptr<MetricsHttpServer>(std::move(server));
}

}  // namespace isometry
