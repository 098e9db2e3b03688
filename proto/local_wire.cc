#include "proto/local_wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/strings.h"

namespace isometry::wire {

namespace {

Status Errno(const char* what) { return Unavailable(what, ": ", ErrnoString(errno)); }

// Reads exactly n bytes, collecting any fds that arrive on the way.
Status ReadExact(int socket, char* buf, size_t n, std::vector<int>* fds, bool eof_ok) {
  size_t got = 0;
  while (got < n) {
    iovec iov{buf + got, n - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t r = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Errno("recvmsg");
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds->push_back(fd);
        }
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) return InvalidArgument("too many file descriptors in a frame");
    if (r == 0) {
      return got == 0 && eof_ok ? Unavailable("peer closed the connection")
                                : Unavailable("peer closed the connection mid-frame");
    }
    got += static_cast<size_t>(r);
  }
  return OkStatus();
}

}  // namespace

Status SendFrame(int socket, const google::protobuf::MessageLite& msg,
                 const std::vector<int>& fds) {
  std::string body;
  if (!msg.SerializeToString(&body)) return InvalidArgument("cannot serialize frame");
  if (body.size() > kMaxFrameBytes) {
    return OutOfRange("frame of ", body.size(), " bytes is too large (the local socket takes ",
                      kMaxFrameBytes, " at most)");
  }
  if (fds.size() > static_cast<size_t>(kMaxFds)) return Internal("too many fds for one frame");
  const uint32_t len = static_cast<uint32_t>(body.size());
  std::string frame(reinterpret_cast<const char*>(&len), sizeof len);
  frame += body;
  size_t sent = 0;
  bool fds_sent = fds.empty();
  while (sent < frame.size()) {
    iovec iov{frame.data() + sent, frame.size() - sent};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    if (!fds_sent) {
      m.msg_control = control;
      m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t w = sendmsg(socket, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("sendmsg");
    }
    fds_sent = true;
    sent += static_cast<size_t>(w);
  }
  return OkStatus();
}

Status RecvFrame(int socket, google::protobuf::MessageLite* msg, std::vector<int>* fds,
                 uint32_t max_bytes) {
  std::vector<int> got;
  auto fail = [&](Status s) {
    for (int fd : got) ::close(fd);
    return s;
  };
  uint32_t len = 0;
  Status s = ReadExact(socket, reinterpret_cast<char*>(&len), sizeof len, &got, true);
  if (!s.ok()) return fail(s);
  if (len > max_bytes) {
    return fail(InvalidArgument("frame of ", len, " bytes exceeds the limit of ", max_bytes));
  }
  // Grown as bytes arrive: a peer announcing a large frame and sending
  // nothing holds no more memory than it sent.
  std::string body;
  constexpr size_t kStep = 64 << 10;
  while (body.size() < len) {
    const size_t at = body.size();
    body.resize(at + std::min<size_t>(kStep, len - at));
    s = ReadExact(socket, body.data() + at, body.size() - at, &got, false);
    if (!s.ok()) return fail(s);
  }
  if (!msg->ParseFromString(body)) {
    return fail(InvalidArgument("malformed frame (not a protobuf message)"));
  }
  fds->insert(fds->end(), got.begin(), got.end());
  return OkStatus();
}

}  // namespace isometry::wire
