// The local handshake socket: bytes a client writes go through the
// daemon's own frame reader (wire::RecvFrame over a socketpair), then each
// frame that parses runs the checks the local server makes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz/request_checks.h"
#include "proto/local_wire.h"

using namespace isometry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A socket buffer holds this much without a reader; larger inputs add
  // nothing the length check does not already see.
  if (size > size_t{64} * 1024) {
    return 0;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::abort();
  }
  size_t sent = 0;
  while (sent < size) {
    const ssize_t w = ::write(sv[0], data + sent, size - sent);
    if (w <= 0) {
      std::abort();
    }
    sent += static_cast<size_t>(w);
  }
  ::shutdown(sv[0], SHUT_WR);
  // As the server does: frames until EOF or the first error.
  for (int frames = 0; frames < 1024; ++frames) {
    v1::LocalRequest req;
    std::vector<int> fds;
    const Status s = wire::RecvFrame(sv[1], &req, &fds);
    for (int fd : fds) {
      ::close(fd);
    }
    if (!s.ok()) {
      break;
    }
    fuzz::CheckLocalRequest(req);
  }
  ::close(sv[0]);
  ::close(sv[1]);
  return 0;
}
