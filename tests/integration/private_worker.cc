// A client process holding private memory for tests/integration/
// private_memory_test.cc (started with posix_spawn: the test never forks
// its own multi-threaded process).
//   private_worker SOCKET BYTES SEED UID EXTRA
// Maps BYTES + EXTRA bytes, fills the first BYTES with Pattern(BYTES,
// SEED), unmaps the EXTRA bytes after them (a hole) when EXTRA > 0, and
// with UID >= 0 switches to that uid (and gid) before connecting. Then
// registers [start, start + BYTES + EXTRA) as a private range, publishes
// it and prints "<range id>\n". Commands on stdin, one a line:
//   dump PATH   writes its BYTES bytes to PATH and prints "dumped"
//   leave       ends its session (the client goes), memory kept; prints "left"
//   pieces      prints "<staged> <direct>": the pieces it packed for served
//               reads, by way (Client::served_pieces_packed)
//   exit        ends (the session with it)
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "integration/client_helpers.h"

using namespace isometry;
using namespace isometry::testing;

int main(int argc, char** argv) {
  if (argc != 6) return 2;
  const std::string socket = argv[1];
  const uint64_t bytes = std::stoull(argv[2]);
  const uint64_t seed = std::stoull(argv[3]);
  const long uid = std::stol(argv[4]);
  const uint64_t extra = std::stoull(argv[5]);
  void* m =
      mmap(nullptr, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 3;
  auto* base = static_cast<std::byte*>(m);
  const std::vector<std::byte> pattern = Pattern(bytes, seed);
  std::memcpy(base, pattern.data(), bytes);
  if (uid >= 0) {
    if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(uid)) != 0 ||
        setuid(static_cast<uid_t>(uid)) != 0) {
      return 4;
    }
    // A change of ids makes a process non-dumpable, which the daemon's
    // identity check refuses (as the kernel's ptrace check would).
    prctl(PR_SET_DUMPABLE, 1);
  }
  try {
    auto c = ConnectTo(socket, "private-worker");
    auto range = c->RegisterPrivate(base, bytes + extra);
    if (!range.ok()) {
      std::fprintf(stderr, "RegisterPrivate: %s\n", range.status().ToString().c_str());
      return 5;
    }
    // The tail goes after registration (which refuses a range with a
    // hole): the daemon meets the hole at copy time.
    if (extra > 0 && munmap(base + bytes, extra) != 0) return 3;
    if (!range->Publish().ok()) return 6;
    std::cout << range->id() << std::endl;
    std::string cmd;
    while (std::cin >> cmd) {
      if (cmd == "dump") {
        std::string path;
        std::cin >> path;
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(base), bytes);
        std::cout << "dumped" << std::endl;
      } else if (cmd == "pieces") {
        const client::Client::PackedPieces p =
            c ? c->served_pieces_packed() : client::Client::PackedPieces{};
        std::cout << p.staged << " " << p.direct << std::endl;
      } else if (cmd == "leave") {
        c.reset();
        std::cout << "left" << std::endl;
      } else if (cmd == "exit") {
        break;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
