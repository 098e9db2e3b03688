#include "net/frame.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/cord.h"
#include "core/strings.h"
#include "layout/program_span.h"

namespace isometry::net {

namespace {

constexpr char kRefusedPayload[] = "isometry.dev/connection-refused";

Status Errno(std::string_view what, int err) {
  const std::string msg = StrCat(what, ": ", ErrnoString(err));
  if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == ECONNREFUSED ||
      err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNABORTED) {
    Status s = Unavailable(msg);
    if (err == ECONNREFUSED) s.SetPayload(kRefusedPayload, absl::Cord("1"));
    return s;
  }
  return absl::InternalError(msg);
}

Result<std::pair<std::string, std::string>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return InvalidArgument("address '", address, "' is not host:port");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, address.substr(colon + 1));
}

Result<addrinfo*> Resolve(const std::string& address, bool passive) {
  ISO_ASSIGN_OR_RETURN(auto hp, SplitHostPort(address));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const int rc =
      getaddrinfo(hp.first.empty() ? nullptr : hp.first.c_str(), hp.second.c_str(), &hints, &res);
  if (rc != 0) return InvalidArgument("address '", address, "': ", gai_strerror(rc));
  return res;
}

std::string AddressText(const sockaddr_storage& ss, socklen_t len) {
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), len, host, sizeof host, port,
                    sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "unknown address";
  }
  const bool v6 = ss.ss_family == AF_INET6;
  return StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

}  // namespace

Status CheckHeader(const FrameHeader& h) {
  if (h.magic != kFrameMagic) return absl::DataLossError("bad frame magic (not an Isometry peer?)");
  if (h.version != kDataProtocolVersion) {
    return FailedPrecondition("data protocol version ", h.version, ", this node speaks ",
                              kDataProtocolVersion);
  }
  const auto t = static_cast<uint8_t>(h.type);
  if (t < 1 || t > kLastFrameType) return absl::DataLossError(StrCat("unknown frame type ", t));
  const uint64_t limit = h.type == FrameType::kData ? kMaxDataPayload : kMaxControlPayload;
  if (h.length > limit) {
    return absl::DataLossError(StrCat("frame payload of ", h.length, " bytes exceeds ", limit));
  }
  return OkStatus();
}

Status SendAll(int fd, struct iovec* iov, int count) {
  while (count > 0) {
    // The first kMaxBytesPerCall bytes: the iovecs up to them, the last one
    // cut short for the call (its length is put back after it).
    int parts = 0;
    size_t bytes = 0, cut_len = 0;
    while (parts < std::min(count, 1024) && bytes < kMaxBytesPerCall) {
      bytes += iov[parts++].iov_len;
    }
    iovec& last = iov[parts - 1];
    if (bytes > kMaxBytesPerCall) {
      cut_len = last.iov_len;
      last.iov_len -= bytes - kMaxBytesPerCall;
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(parts);
    const ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL);
    if (cut_len) last.iov_len = cut_len;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("send", errno);
    }
    size_t left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return OkStatus();
}

Status SendFrame(int fd, const FrameHeader& h, const void* payload) {
  iovec iov[2] = {{const_cast<FrameHeader*>(&h), sizeof h},
                  {const_cast<void*>(payload), static_cast<size_t>(h.length)}};
  return SendAll(fd, iov, h.length ? 2 : 1);
}

Status RecvAll(int fd, void* data, uint64_t length) {
  auto* p = static_cast<char*>(data);
  while (length > 0) {
    const ssize_t n = ::recv(fd, p, std::min<uint64_t>(length, kMaxBytesPerCall), MSG_WAITALL);
    if (n == 0) return Unavailable("connection closed by the peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("receive", errno);
    }
    p += n;
    length -= static_cast<uint64_t>(n);
  }
  return OkStatus();
}

Status Discard(int fd, uint64_t length) {
  std::vector<char> sink(std::min<uint64_t>(length, 1 << 20));
  while (length > 0) {
    const uint64_t n = std::min<uint64_t>(length, sink.size());
    ISO_RETURN_IF_ERROR(RecvAll(fd, sink.data(), n));
    length -= n;
  }
  return OkStatus();
}

Result<UniqueFd> ConnectTo(const std::string& address, uint32_t timeout_ms) {
  ISO_ASSIGN_OR_RETURN(addrinfo * res, Resolve(address, false));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, &freeaddrinfo);
  Status last = Unavailable("no address for '", address, "'");
  for (addrinfo* a = res; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) continue;
    int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout_ms));
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 1 && ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : (err ? err : errno);
        rc = -1;
      }
    }
    if (rc == 0) {
      ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    const int err = errno;
    last = Errno(StrCat("connect to ", address), err);
  }
  return last;
}

Result<std::pair<UniqueFd, std::string>> ListenOn(const std::string& address) {
  ISO_ASSIGN_OR_RETURN(addrinfo * res, Resolve(address, true));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(res, &freeaddrinfo);
  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket", errno);
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // A deep backlog (the kernel caps it at somaxconn): under a flood a
  // peer's SYN waits there for the event loop instead of being dropped
  // and retried a second later. It holds no file descriptor.
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) < 0 || ::listen(fd.get(), 1024) < 0) {
    const int err = errno;
    return Errno(StrCat("listen on ", address), err);
  }
  owned.reset();
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  std::string bound = AddressText(ss, len);
  return std::make_pair(std::move(fd), std::move(bound));
}

std::string RemoteAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown address";
  return AddressText(ss, len);
}

void TuneSocket(int fd, uint32_t timeout_ms, uint64_t unsent_limit_bytes) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const unsigned user_timeout = timeout_ms;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  const int idle = 1, count = std::max<int>(1, static_cast<int>(timeout_ms / 1000));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  if (unsent_limit_bytes > 0) {
    const int lowat = static_cast<int>(std::min<uint64_t>(unsent_limit_bytes, INT32_MAX));
    ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
  }
}

bool IsConnectionRefused(const Status& s) { return s.GetPayload(kRefusedPayload).has_value(); }

uint64_t SourceSpan(const CopyProgram& p) { return ProgramSpan(p, false); }
uint64_t DestinationSpan(const CopyProgram& p) { return ProgramSpan(p, true); }

bool WireIsOneRun(const CopyProgram& p, bool wire_is_dst) {
  if (p.ops.size() != 1 || p.ops[0].num_loops != 0) return false;
  const CopyOp& op = p.ops[0];
  return (wire_is_dst ? op.dst_offset : op.src_offset) == 0;
}

}  // namespace isometry::net
