// A connected pair of unix stream sockets, each end owned, for tests that
// speak a framing to themselves (frame_test, local_wire_test).
#pragma once

#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "core/unique_fd.h"

namespace isometry::testing {

struct SocketPair {
  UniqueFd a, b;
};

inline SocketPair MakeSocketPair() {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace isometry::testing
