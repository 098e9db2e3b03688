// The ring thread's poll window (daemon.ring_poll_us) against a real
// daemon: after a copy it keeps polling the rings while a CPU is free for
// it, and goes to sleep at once while the memcpy channel's threads hold
// every CPU (core/cpu_claims.h), so that it takes no CPU from them, unless
// those threads work for a class whose nice value is "idle". What
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
#include "core/thread_nice.h"
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

constexpr char kIdleClass[] = R"(
[qos]
default_class = "normal"
[[qos.class]]
name = "normal"
[[qos.class]]
name = "scavenger"
nice = "idle"
[[qos.rule]]
client = "idle-bulk"
class = "scavenger"
)";

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

// Bulk copies of 32 MiB from `client`, 4 in flight, on a thread of their
// own until the object goes: as many memcpy threads as CPUs are all busy.
class BulkLoad {
 public:
  BulkLoad(Client& client, uint64_t first_key) : client_(client) {
    for (uint64_t i = 0; i < 4; ++i) {
      ends_.push_back(Place(client, Bytes1D(32 << 20), first_key + i));
    }
    thread_ = std::thread([this] { Run(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ~BulkLoad() {
    stop_ = true;
    thread_.join();
    CHECK(failed_ == 0);
  }

 private:
  void Run() {
    std::vector<uint64_t> tickets;
    for (size_t i = 0; !stop_; ++i) {
      while (tickets.size() < 4) {
        auto t = client_.Submit(ends_[i % 2].inst, ends_[2 + i % 2].inst);
        if (!t.ok()) {
          ++failed_;
          return;
        }
        tickets.push_back(*t);
      }
      if (!client_.Wait(tickets.front()).status.ok()) ++failed_;
      tickets.erase(tickets.begin());
    }
    for (uint64_t t : tickets) (void)client_.Wait(t);
  }

  Client& client_;
  std::vector<Placed> ends_;
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_{0};
  std::thread thread_;
};

}  // namespace

TEST_CASE(
    "the ring thread polls while a CPU is free or only an idle class's copies hold it, and not "
    "while other copies hold every CPU") {
  const int cpus = UsableCpus();
  // A 20 ms poll window: polling, the ring thread never sleeps between
  // copies, even when a test beside this one keeps the client off its CPU
  // for a few scheduler slices. As many memcpy threads as CPUs: bulk
  // copies can hold them all.
  // The client named "idle-bulk" is in a class whose nice value is "idle".
  Daemon d(StrCat("ring_poll_us = 20000\n", kOneMemory, "threads = ", cpus,
                  "\nrequest_size = \"1MiB\"\n", kIdleClass));
  const pid_t tid = ThreadNamed(d.pid(), "iso-ring");
  REQUIRE(tid != 0);
  auto small = ConnectTo(d.local_socket(), "small");
  const Placed src = Place(*small, Bytes1D(4096), 1), dst = Place(*small, Bytes1D(4096), 2);
  for (int i = 0; i < 100; ++i) REQUIRE(small->Copy(src.inst, dst.inst).status.ok());

  // Idle: back to back, so that a busy machine (a test beside this one)
  // cannot stretch a gap past the poll window.
  const RingThreadUse idle =
      RingThreadOver(*small, src, dst, d.pid(), tid, std::chrono::milliseconds(400), {});

  // Loaded: 200 us apart, well inside the poll window. A ring thread that
  // polled would span each gap awake; one that does not sleeps through it.
  // Back to back, a ring thread that serves slowly (a sanitized build)
  // found the next copy already submitted whenever it looked, and slept
  // seldom without polling either. The gap is spun: the client keeps its
  // CPU, as a closed loop of copies does.
  const auto loaded_by = [&](const char* name, uint64_t first_key) {
    auto bulk = ConnectTo(d.local_socket(), name);
    const BulkLoad load(*bulk, first_key);
    return RingThreadOver(*small, src, dst, d.pid(), tid, std::chrono::milliseconds(400),
                          std::chrono::microseconds(200));
  };
  const RingThreadUse loaded = loaded_by("bulk", 10);
  // The same load from a class whose nice value is "idle": its threads
  // run under SCHED_IDLE and hold no CPU, so the window stays open.
  const RingThreadUse loaded_idle = loaded_by("idle-bulk", 20);

  // Idle, the window keeps it awake from one copy to the next (a wait for
  // a lock is a voluntary switch too: a few, more in a sanitized build);
  // loaded, it sleeps after each copy and is woken for the next.
  CHECK(idle.sleeps_per_copy < 0.3);
  CHECK(loaded.sleeps_per_copy > 0.7);
  if (ThreadNiceSupported()) {
    // Since the idle class's threads report each request done at the
    // daemon's own value (so that no lock is held at a lowered one,
    // core/thread_nice.h), a sanitized build's ring thread sleeps after
    // many of these copies, in some runs as often as with claims held; the
    // timing is asserted in the other builds only.
#if defined(__SANITIZE_ADDRESS__)
    WARN("sanitized build: the ring thread slept after " +
         std::to_string(loaded_idle.sleeps_per_copy) + " of the copies beside the idle class");
#else
    CHECK(loaded_idle.sleeps_per_copy < 0.3);
#endif
  } else {
    // The daemon may not move its threads back from SCHED_IDLE, so none
    // goes there: the idle class's copies hold their CPUs as any other.
    WARN("this process may not move its threads' nice values back: " +
         ThreadNiceUnsupportedReason() + "; checked that the idle class holds its CPUs");
    CHECK(loaded_idle.sleeps_per_copy > 0.7);
  }
}

}  // namespace ISOMETRY_TEST_FILE
