// A client process for the integration tests (started with posix_spawn, so
// the test never forks its own multi-threaded process).
//   client_worker SOCKET transfers SEED   64 random verified copies; exit 0 if all match
//   client_worker SOCKET victim           starts a long copy, prints "submitted", waits
//   client_worker SOCKET watcher          publishes a 64 KiB allocation with all of it
//                                         watched (4 KiB log, never acknowledged),
//                                         prints its id, waits
#include <cstdio>
#include <string>
#include <thread>

#include "client/cpp/active_access.h"
#include "integration/client_helpers.h"

using namespace isometry;
using namespace isometry::testing;

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string socket = argv[1], mode = argv[2];
  try {
    auto c = ConnectTo(socket, "worker");
    if (mode == "transfers" && argc == 4) {
      std::mt19937_64 rng(std::stoull(argv[3]));
      int failures = 0;
      for (int i = 0; i < 64; ++i) {
        const Box bounds = RandomBounds(rng, 1 + i % 3, 40);
        const FieldSpace fs = RandomFields(rng, 4);
        Placed s = Place(*c, {bounds, fs, RandomLayout(rng, bounds)}, rng());
        Placed t = Place(*c, {bounds, fs, RandomLayout(rng, bounds)}, rng());
        const client::Completion done = c->Copy(s.inst, t.inst, i % 3);
        if (!done.status.ok() ||
            CheckCopy(s.shape, s.before, t.shape, Bytes(t.alloc, t.shape.total_bytes()), t.before,
                      bounds) != "") {
          std::fprintf(stderr, "copy %d: %s\n", i, done.status.ToString().c_str());
          ++failures;
        }
      }
      return failures ? 1 : 0;
    }
    if (mode == "watcher") {
      auto a = c->Allocate("sys0", 65536);
      if (!a.ok() || !a->Publish().ok()) return 1;
      client::ActiveAccess aa(*c);
      client::WatchOptions o;
      o.bytes = 65536;
      o.log_bytes = 4096;
      if (!aa.Watch(*a, o).ok()) return 1;
      std::printf("%llu\n", static_cast<unsigned long long>(a->id()));
      std::fflush(stdout);
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (mode == "victim") {
      const InstanceShape big{Box::FromExtents({8 << 20}), FieldSpace::Uniform(1, 8),
                              Layout::Aos(1)};
      Placed s = Place(*c, big, 1);
      Placed t = Place(*c, big, 2);
      auto ticket = c->Submit(s.inst, t.inst);
      std::printf("submitted\n");
      std::fflush(stdout);
      if (ticket.ok()) c->Wait(*ticket);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client_worker: %s\n", e.what());
    return 1;
  }
  return 2;
}
