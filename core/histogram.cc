#include "core/histogram.h"

#include <algorithm>
#include <cmath>

namespace isometry {

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.first(std::min(bounds.size(), kMaxBounds))) {}

void Histogram::Observe(double value) {
  // Bucket i counts values in (bounds[i-1], bounds[i]]; the last, above them all.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  if (value > 0 && std::isfinite(value)) {
    sum_nano_.fetch_add(static_cast<uint64_t>(std::llround(value * 1e9)),
                        std::memory_order_relaxed);
  }
}

HistogramCounts Histogram::Counts() const {
  HistogramCounts c;
  c.bounds = bounds_;
  c.cumulative.reserve(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    c.cumulative.push_back(total);
  }
  c.count = total;
  c.sum = static_cast<double>(sum_nano_.load(std::memory_order_relaxed)) / 1e9;
  return c;
}

}  // namespace isometry
