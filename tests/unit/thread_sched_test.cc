// How the daemon's threads present themselves to the scheduler and to an
// operator: their names, the short slice of the threads a small copy
// waits on, the nice value and policy of a traffic class's work, and the
// CPUs the copy threads claim (a spinner's cue to sleep).
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_claims.h"
#include "core/thread_name.h"
#include "core/thread_nice.h"
#include "core/thread_slice.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

std::string OwnName() {
  std::ifstream f("/proc/thread-self/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

TEST_CASE("NameThisThread names the thread, cut to the kernel's 15 bytes") {
  std::string short_name, long_name;
  std::thread([&] {
    NameThisThread("dma:memcpy0");
    short_name = OwnName();
    NameThisThread("ch:a-channel-named-at-length");
    long_name = OwnName();
  }).join();
  CHECK(short_name == "dma:memcpy0");
  CHECK(long_name == "ch:a-channel-na");
}

TEST_CASE("RequestShortSlice gives the thread a 100 us slice where the kernel has them") {
  // On a thread of the test's own, where Catch may not assert.
  std::optional<uint64_t> before, after;
  std::thread([&] {
    before = ThisThreadSliceNs();
    RequestShortSlice();
    after = ThisThreadSliceNs();
  }).join();
  const uint64_t short_ns = std::chrono::nanoseconds(kShortSlice).count();
  REQUIRE(before.has_value());
  REQUIRE(after.has_value());
  if (ShortSliceSupported()) {
    CHECK(*before != short_ns);  // the default slice is longer
    CHECK(*after == short_ns);
  } else {
    // Older kernels ignore sched_runtime outside SCHED_DEADLINE: nothing
    // changed, and nothing claims it did.
    WARN("this kernel has no custom slices (Linux 6.12+): checked that none was set");
    CHECK(*after == *before);
  }
}

TEST_CASE("SetThreadNice moves a thread to a class's nice value or SCHED_IDLE and back") {
  struct Seen {
    int policy, nice;
    std::optional<uint64_t> slice;
  };
  auto seen = [] {
    return Seen{sched_getscheduler(0), getpriority(PRIO_PROCESS, gettid()), ThisThreadSliceNs()};
  };
  std::vector<Seen> steps;
  std::thread([&] {
    RequestShortSlice();
    steps.push_back(seen());
    for (int nice : {10, kIdleThreadNice, 0, kIdleThreadNice, 5, 0}) {
      SetThreadNice(nice);
      steps.push_back(seen());
    }
  }).join();
  REQUIRE(steps.size() == 7);
  const Seen start = steps[0];
  if (!ThreadNiceSupported()) {
    WARN("this process may not move its threads' nice values back: " +
         ThreadNiceUnsupportedReason() + "; checked that none moved");
    for (const Seen& s : steps) CHECK((s.policy == start.policy && s.nice == start.nice));
    return;
  }
  CHECK(start.policy == SCHED_OTHER);
  const int base = start.nice;
  const struct {
    int policy, nice;
  } want[] = {{SCHED_OTHER, base + 10}, {SCHED_IDLE, base + 10}, {SCHED_OTHER, base},
              {SCHED_IDLE, base},       {SCHED_OTHER, base + 5}, {SCHED_OTHER, base}};
  for (size_t i = 0; i < 6; ++i) {
    INFO("step " << i);
    CHECK(steps[i + 1].policy == want[i].policy);
    CHECK(steps[i + 1].nice == want[i].nice);
    CHECK(steps[i + 1].slice == start.slice);  // the short slice survives the idle policy
  }
}

TEST_CASE("a thread another one brings back from SCHED_IDLE goes there again at its next class") {
  if (!ThreadNiceSupported()) {
    WARN("this process may not move its threads' nice values back: " +
         ThreadNiceUnsupportedReason() + "; checked that nothing is restored");
    CHECK_FALSE(RestoreThreadNice(gettid()));
    return;
  }
  const int base = getpriority(PRIO_PROCESS, gettid());
  std::promise<pid_t> idle;
  std::promise<void> restored;
  std::vector<int> policies;  // lowered, restored from outside, back at 0, lowered again
  std::thread t([&] {
    {
      ClassNiceScope lowered(kIdleThreadNice);
      policies.push_back(sched_getscheduler(0));
      idle.set_value(gettid());
      restored.get_future().wait();
      policies.push_back(sched_getscheduler(0));
    }
    policies.push_back(sched_getscheduler(0));
    ClassNiceScope again(kIdleThreadNice);
    policies.push_back(sched_getscheduler(0));
  });
  CHECK(RestoreThreadNice(idle.get_future().get()));
  restored.set_value();
  t.join();
  CHECK(policies == std::vector<int>{SCHED_IDLE, SCHED_OTHER, SCHED_OTHER, SCHED_IDLE});
  CHECK(getpriority(PRIO_PROCESS, gettid()) == base);
}

TEST_CASE("copy threads claim CPUs while they run, and give a claim back while they sleep") {
  const int usable = UsableCpus();
  CHECK(usable >= 1);
  CHECK(usable <= static_cast<int>(std::thread::hardware_concurrency()));
  const int before = CpuClaim::Held();
  {
    std::vector<std::unique_ptr<CpuClaim>> claims;
    claims.reserve(static_cast<size_t>(usable));
    for (int i = 0; i < usable; ++i) claims.push_back(std::make_unique<CpuClaim>());
    CHECK(CpuClaim::Held() == before + usable);
    CHECK(EveryCpuClaimed());
    {
      const CpuClaim::Paused asleep;  // a paced copy waiting for its slot
      CHECK(CpuClaim::Held() == before + usable - 1);
      if (before == 0) CHECK_FALSE(EveryCpuClaimed());
    }
    CHECK(EveryCpuClaimed());
  }
  CHECK(CpuClaim::Held() == before);
}

}  // namespace ISOMETRY_TEST_FILE
