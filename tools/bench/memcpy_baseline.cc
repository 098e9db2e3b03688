#include "tools/bench/memcpy_baseline.h"

#include <chrono>
#include <cstring>
#include <latch>
#include <thread>

#include "tools/bench/stopwatch.h"

namespace isometry::bench {

double TimedMemcpy(std::byte* dst, const std::byte* src, size_t bytes) {
  const auto t0 = Clock::now();
  std::memcpy(dst, src, bytes);
  asm volatile("" ::: "memory");
  return SecondsSince(t0);
}

double TimedMemcpy2(std::byte* dst, const std::byte* src, size_t bytes) {
  const size_t half = bytes / 2 / 4096 * 4096;
  std::latch start(1), done(1);
  std::thread helper([&] {
    start.wait();
    std::memcpy(dst + half, src + half, bytes - half);
    done.count_down();
  });
  // Give the helper time to reach start.wait(), so the clock does not
  // include its creation.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto t0 = Clock::now();
  start.count_down();
  std::memcpy(dst, src, half);
  done.wait();
  asm volatile("" ::: "memory");
  const double seconds = SecondsSince(t0);
  helper.join();
  return seconds;
}

}  // namespace isometry::bench
