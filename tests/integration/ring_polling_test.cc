// The ring thread's poll window (daemon.ring_poll_us) against a real
// daemon: after a copy it keeps polling the rings while a CPU is free for
// it, and goes to sleep at once while the memcpy channel's threads hold
// every CPU (core/cpu_claims.h), so that it takes no CPU from them. What
// tells: the ring thread's voluntary context switches (from /proc), one
// each time it goes to sleep: polling from one copy to the next, it has
// next to none; sleeping after each, about one a copy.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/cpu_claims.h"
#include "core/strings.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

using Clock = std::chrono::steady_clock;

InstanceShape Bytes1D(uint64_t n) {
  return {Box::FromExtents({static_cast<int64_t>(n)}), FieldSpace::Uniform(1, 1), Layout::Aos(1)};
}

// The thread id of `pid`'s thread named `name`; 0 when it has none.
pid_t ThreadNamed(pid_t pid, const std::string& name) {
  const std::string task = StrCat("/proc/", pid, "/task");
  for (const auto& entry : std::filesystem::directory_iterator(task)) {
    std::ifstream comm(entry.path() / "comm");
    std::string got;
    std::getline(comm, got);
    if (got == name) return static_cast<pid_t>(std::stol(entry.path().filename().string()));
  }
  return 0;
}

// Nanoseconds thread `tid` of `pid` has run so far (schedstat).
uint64_t RanNs(pid_t pid, pid_t tid) {
  std::ifstream f(StrCat("/proc/", pid, "/task/", tid, "/schedstat"));
  uint64_t ns = 0;
  f >> ns;
  return ns;
}

// Voluntary context switches of thread `tid` of `pid` so far.
uint64_t Sleeps(pid_t pid, pid_t tid) {
  std::ifstream f(StrCat("/proc/", pid, "/task/", tid, "/status"));
  const std::string key = "voluntary_ctxt_switches:";
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key, 0) == 0) return std::stoull(line.substr(key.size()));
  }
  return 0;
}

struct RingThreadUse {
  double sleeps_per_copy;  // times it went to sleep, a copy
  double cpu_share;        // of one CPU, over the window
};

// 4 KiB copies for `window`, each submitted `gap` after the last ended;
// what the ring thread `tid` did meanwhile.
RingThreadUse RingThreadOver(Client& c, const Placed& src, const Placed& dst, pid_t pid, pid_t tid,
                             std::chrono::milliseconds window, std::chrono::microseconds gap) {
  const uint64_t sleeps0 = Sleeps(pid, tid), ran0 = RanNs(pid, tid);
  const auto t0 = Clock::now();
  int copies = 0;
  while (Clock::now() - t0 < window) {
    REQUIRE(c.Copy(src.inst, dst.inst).status.ok());
    ++copies;
    for (const auto until = Clock::now() + gap; Clock::now() < until;) {
    }
  }
  const double wall_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  const RingThreadUse use{static_cast<double>(Sleeps(pid, tid) - sleeps0) / copies,
                          static_cast<double>(RanNs(pid, tid) - ran0) / wall_ns};
  UNSCOPED_INFO(copies << " copies, the ring thread slept " << use.sleeps_per_copy
                       << " times a copy and ran " << use.cpu_share << " of a CPU");
  return use;
}

}  // namespace

TEST_CASE("the ring thread polls while a CPU is free, and not while copies hold every CPU") {
  const int cpus = UsableCpus();
  // A 20 ms poll window: polling, the ring thread never sleeps between
  // copies, even when a test beside this one keeps the client off its CPU
  // for a few scheduler slices. As many memcpy threads as CPUs: bulk
  // copies can hold them all.
  Daemon d(StrCat("ring_poll_us = 20000\n", kOneMemory, "threads = ", cpus,
                  "\nrequest_size = \"1MiB\"\n"));
  const pid_t tid = ThreadNamed(d.pid(), "iso-ring");
  REQUIRE(tid != 0);
  auto small = ConnectTo(d.local_socket(), "small");
  const Placed src = Place(*small, Bytes1D(4096), 1), dst = Place(*small, Bytes1D(4096), 2);
  for (int i = 0; i < 100; ++i) REQUIRE(small->Copy(src.inst, dst.inst).status.ok());

  // Idle: back to back, so that a busy machine (a test beside this one)
  // cannot stretch a gap past the poll window.
  const RingThreadUse idle =
      RingThreadOver(*small, src, dst, d.pid(), tid, std::chrono::milliseconds(400), {});

  // Bulk copies, 4 in flight, keep every memcpy thread busy.
  auto bulk = ConnectTo(d.local_socket(), "bulk");
  std::vector<Placed> ends;
  for (uint64_t i = 0; i < 4; ++i) ends.push_back(Place(*bulk, Bytes1D(32 << 20), 10 + i));
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::thread load([&] {
    std::vector<uint64_t> tickets;
    for (size_t i = 0; !stop; ++i) {
      while (tickets.size() < 4) {
        auto t = bulk->Submit(ends[i % 2].inst, ends[2 + i % 2].inst);
        if (!t.ok()) {
          ++failed;
          return;
        }
        tickets.push_back(*t);
      }
      if (!bulk->Wait(tickets.front()).status.ok()) ++failed;
      tickets.erase(tickets.begin());
    }
    for (uint64_t t : tickets) (void)bulk->Wait(t);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Loaded: 200 us apart, well inside the poll window. A ring thread that
  // polled would span each gap awake; one that does not sleeps through it.
  // Back to back, a ring thread that serves slowly (a sanitized build)
  // found the next copy already submitted whenever it looked, and slept
  // seldom without polling either. The gap is spun: the client keeps its
  // CPU, as a closed loop of copies does.
  const RingThreadUse loaded =
      RingThreadOver(*small, src, dst, d.pid(), tid, std::chrono::milliseconds(400),
                     std::chrono::microseconds(200));
  stop = true;
  load.join();
  CHECK(failed == 0);

  // Idle, the window keeps it awake from one copy to the next (a wait for
  // a lock is a voluntary switch too: a few, more in a sanitized build);
  // loaded, it sleeps after each copy and is woken for the next.
  CHECK(idle.sleeps_per_copy < 0.3);
  CHECK(loaded.sleeps_per_copy > 0.7);
}

}  // namespace ISOMETRY_TEST_FILE
