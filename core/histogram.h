// A histogram of fixed buckets for the metrics endpoint (Prometheus's
// `_bucket{le=...}`, `_sum`, `_count`), cheap enough for a hot path.
//
// Observe() is lock-free: a few relaxed atomic adds, no allocation. The
// buckets are a static array of upper bounds chosen by the caller (in
// ascending order, at most kMaxBounds), so the memory a histogram holds
// never grows. Counts() may run concurrently with Observe(): each bucket is
// read once, so a snapshot can be off by the observations in flight (the
// count is derived from the buckets, so `+Inf` always equals it).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace isometry {

// What a histogram held when read: cumulative counts per bound (the last
// entry is `+Inf`, equal to `count`) and the sum of what was observed.
struct HistogramCounts {
  std::span<const double> bounds;    // static storage, ascending
  std::vector<uint64_t> cumulative;  // bounds.size() + 1 entries
  uint64_t count = 0;
  double sum = 0;
};

class Histogram {
 public:
  static constexpr size_t kMaxBounds = 24;

  // `bounds` must outlive the histogram (a static constexpr array).
  explicit Histogram(std::span<const double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double value);
  HistogramCounts Counts() const;

 private:
  const std::span<const double> bounds_;
  std::array<std::atomic<uint64_t>, kMaxBounds + 1> buckets_{};  // not cumulative
  // The sum in nanounits: an integer add stays lock-free where a double's
  // would need a compare-exchange loop.
  std::atomic<uint64_t> sum_nano_{0};
};

// Bounds for durations in seconds: 10 us to 10 min.
inline constexpr double kSecondsBounds[] = {1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05,
                                            0.1,  0.5,  1,    5,    10,   60,   600};

// The priority under which a channel counts the queue waits of priorities
// past the first 16 it saw (a client picks its priority: the series must
// stay bounded); the metrics call it "other".
inline constexpr int kOtherPriorities = std::numeric_limits<int>::min();

}  // namespace isometry
