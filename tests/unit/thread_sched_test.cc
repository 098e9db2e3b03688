// How the daemon's threads present themselves to the scheduler and to an
// operator: their names, the short slice of the threads a small copy waits
// on, and spinning that stops once the cores are contended.
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include "core/spin_wait.h"
#include "core/thread_name.h"
#include "core/thread_slice.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

std::string OwnName() {
  std::ifstream f("/proc/thread-self/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// The calling thread's sched_runtime as sched_getattr reports it: its
// slice where the kernel has custom slices, 0 on older ones; UINT64_MAX
// when the call fails. (Called on threads of the test's own, where Catch
// may not assert.)
uint64_t OwnSchedRuntime() {
  struct {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
  } attr{};
  if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return UINT64_MAX;
  return attr.runtime;
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
  uint64_t before = 0, after = 0;
  std::thread([&] {
    before = OwnSchedRuntime();
    RequestShortSlice();
    after = OwnSchedRuntime();
  }).join();
  const uint64_t short_ns = std::chrono::nanoseconds(kShortSlice).count();
  REQUIRE(before != UINT64_MAX);
  if (ShortSliceSupported()) {
    CHECK(before != short_ns);  // the default slice is longer
    CHECK(after == short_ns);
  } else {
    // Older kernels ignore sched_runtime outside SCHED_DEADLINE: nothing
    // changed, and nothing claims it did.
    WARN("this kernel has no custom slices (Linux 6.12+): checked that none was set");
    CHECK(after == before);
  }
}

TEST_CASE("A yield that hands the core to another thread stops every SpinWait's spinning") {
  // The spinner and a busy thread share one core: the spinner's yield
  // gives the busy thread a slice, far longer than an idle yield.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  std::atomic<bool> stop{false};
  std::atomic<bool> seen{false};
  int pinned = -1;
  std::chrono::steady_clock::time_point when;
  std::thread busy([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  std::thread spinner([&] {
    pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    SpinWait spin;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      spin.Step();
      when = std::chrono::steady_clock::now();
      if (SpinWait::Contended(when)) {
        seen = true;
        break;
      }
    }
  });
  spinner.join();
  stop = true;
  busy.join();
  REQUIRE(pinned == 0);
  REQUIRE(seen);
  // It lasts a while, then spinning may resume.
  CHECK(SpinWait::Contended(when + std::chrono::milliseconds(10)));
  CHECK_FALSE(SpinWait::Contended(when + std::chrono::seconds(1)));
}

}  // namespace ISOMETRY_TEST_FILE
