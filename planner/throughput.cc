#include "planner/throughput.h"

#include <algorithm>
#include <cmath>

namespace isometry {

// The monotonic envelope as breakpoints (x = log2(request bytes), y = bytes/s),
// x strictly increasing, y non-decreasing. Between breakpoints y is linear in
// x; before the first it is proportional to the request size; after the last
// it is flat.
struct ThroughputFunction::Curve {
  std::vector<double> x;
  std::vector<double> y;
  double first_bytes = 1;  // 2^x[0], kept exact
};

ThroughputFunction::ThroughputFunction() {
  static const std::shared_ptr<const Curve> kDefault = [] {
    auto c = std::make_shared<Curve>();
    c->x = {0};
    c->y = {1e9};
    return std::shared_ptr<const Curve>(std::move(c));
  }();
  curve_ = kDefault;
}

ThroughputFunction::ThroughputFunction(std::shared_ptr<const Curve> curve)
    : curve_(std::move(curve)) {}

ThroughputFunction ThroughputFunction::Constant(double bytes_per_second) {
  auto c = std::make_shared<Curve>();
  c->x = {0};
  c->y = {std::isfinite(bytes_per_second) ? std::max(0.0, bytes_per_second) : 0.0};
  return ThroughputFunction(std::move(c));
}

ThroughputFunction ThroughputFunction::PerRequestOverhead(double peak, double overhead_seconds) {
  if (!(overhead_seconds > 0)) {
    return Constant(peak);
  }
  std::vector<ThroughputSample> s;
  for (int k = 0; k <= 40; ++k) {
    const double r = std::ldexp(1.0, k);
    s.push_back({uint64_t{1} << k, r / (r / peak + overhead_seconds)});
  }
  return *FromSamples(std::move(s));
}

Result<ThroughputFunction> ThroughputFunction::FromSamples(std::vector<ThroughputSample> samples) {
  if (samples.empty()) {
    return InvalidArgument("throughput function: no samples");
  }
  for (const ThroughputSample& s : samples) {
    if (s.request_bytes == 0) {
      return InvalidArgument("throughput function: a sample has a request of 0 bytes");
    }
    if (!std::isfinite(s.bytes_per_second) || s.bytes_per_second < 0) {
      return InvalidArgument("throughput function: the sample at ", s.request_bytes,
                             " bytes has throughput ", s.bytes_per_second,
                             "; it must be finite and >= 0");
    }
  }
  std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
    return a.request_bytes < b.request_bytes ||
           (a.request_bytes == b.request_bytes && a.bytes_per_second > b.bytes_per_second);
  });
  // Raw points, one per request size (the best measurement of each).
  std::vector<double> rx, ry;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (i > 0 && samples[i].request_bytes == samples[i - 1].request_bytes) {
      continue;
    }
    rx.push_back(std::log2(static_cast<double>(samples[i].request_bytes)));
    ry.push_back(samples[i].bytes_per_second);
  }
  // Running maximum of the piecewise-linear raw curve, with a breakpoint
  // where a rise crosses the current maximum.
  auto c = std::make_shared<Curve>();
  c->first_bytes = static_cast<double>(samples.front().request_bytes);
  c->x.push_back(rx[0]);
  c->y.push_back(ry[0]);
  double max = ry[0];
  for (size_t k = 1; k < rx.size(); ++k) {
    if (ry[k] <= max) {
      continue;  // the envelope stays flat through this segment
    }
    double start = rx[k - 1];
    if (ry[k - 1] < max) {
      start = rx[k - 1] + (max - ry[k - 1]) / (ry[k] - ry[k - 1]) * (rx[k] - rx[k - 1]);
    }
    if (start > c->x.back()) {
      c->x.push_back(start);
      c->y.push_back(max);
    }
    c->x.push_back(rx[k]);
    c->y.push_back(ry[k]);
    max = ry[k];
  }
  return ThroughputFunction(std::move(c));
}

double ThroughputFunction::At(uint64_t request_bytes) const {
  if (request_bytes == 0) {
    return 0;
  }
  const Curve& c = *curve_;
  const double bytes = static_cast<double>(request_bytes);
  if (bytes <= c.first_bytes) {
    return std::min(c.y[0], c.y[0] * (bytes / c.first_bytes));
  }
  const double x = std::log2(bytes);
  const size_t i = static_cast<size_t>(std::upper_bound(c.x.begin(), c.x.end(), x) - c.x.begin());
  if (i >= c.x.size()) {
    return c.y.back();
  }
  if (i == 0) {
    return c.y[0];
  }
  const double t = (x - c.x[i - 1]) / (c.x[i] - c.x[i - 1]);
  return std::clamp(c.y[i - 1] + (c.y[i] - c.y[i - 1]) * t, c.y[i - 1], c.y[i]);
}

double ThroughputFunction::Peak() const { return curve_->y.back(); }

std::optional<uint64_t> ThroughputFunction::MinRequestFor(double bps) const {
  if (!(bps > 0)) {
    return uint64_t{1};
  }
  const Curve& c = *curve_;
  if (bps > c.y.back()) {
    return std::nullopt;
  }
  const size_t i = static_cast<size_t>(std::lower_bound(c.y.begin(), c.y.end(), bps) - c.y.begin());
  double guess;
  if (i == 0) {
    guess = std::ceil(bps / c.y[0] * c.first_bytes);
  } else {
    const double t = (bps - c.y[i - 1]) / (c.y[i] - c.y[i - 1]);
    guess = std::ceil(std::exp2(c.x[i - 1] + t * (c.x[i] - c.x[i - 1])));
  }
  // The closed form is off by rounding at most; settle on the exact answer
  // with the monotone At (a few steps), then by bisection if need be.
  const double kMax = 1.8e19;
  uint64_t r = static_cast<uint64_t>(std::clamp(guess, 1.0, kMax));
  for (int step = 0; step < 4 && r > 1 && At(r - 1) >= bps; ++step) {
    --r;
  }
  for (int step = 0; step < 4 && At(r) < bps; ++step) {
    ++r;
  }
  if (At(r) < bps || (r > 1 && At(r - 1) >= bps)) {
    uint64_t lo = 1, hi = r;  // find the first r with At(r) >= bps in [1, hi]
    while (At(hi) < bps) {
      hi = hi > (UINT64_MAX >> 1) ? UINT64_MAX : hi * 2;
    }
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (At(mid) >= bps) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    r = lo;
  }
  return r;
}

std::vector<ThroughputSample> ThroughputFunction::Breakpoints() const {
  std::vector<ThroughputSample> out;
  for (size_t i = 0; i < curve_->x.size(); ++i) {
    out.push_back({static_cast<uint64_t>(std::llround(std::exp2(curve_->x[i]))), curve_->y[i]});
  }
  return out;
}

namespace {

// The envelope at log2(request bytes) = x, for any real x >= 0.
double AtLog2(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs[0]) {
    return ys[0] * std::exp2(x - xs[0]);
  }
  const size_t i = static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), x) - xs.begin());
  if (i >= xs.size()) {
    return ys.back();
  }
  const double t = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return std::clamp(ys[i - 1] + (ys[i] - ys[i - 1]) * t, ys[i - 1], ys[i]);
}

}  // namespace

bool ThroughputFunction::AtLeast(const ThroughputFunction& other) const {
  if (curve_ == other.curve_) {
    return true;
  }
  const Curve& a = *curve_;
  const Curve& b = *other.curve_;
  for (const Curve* c : {&a, &b}) {
    for (double x : c->x) {
      if (AtLog2(a.x, a.y, x) < AtLog2(b.x, b.y, x) * (1 - 1e-12)) {
        return false;
      }
    }
  }
  return true;
}

bool ThroughputFunction::operator==(const ThroughputFunction& other) const {
  return curve_ == other.curve_ || (curve_->x == other.curve_->x && curve_->y == other.curve_->y &&
                                    curve_->first_bytes == other.curve_->first_bytes);
}

}  // namespace isometry
