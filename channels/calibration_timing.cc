#include "channels/calibration_timing.h"

#include <algorithm>

#include "channels/request_stream.h"

namespace isometry::calibration {

Result<double> TimeRequests(Channel& channel, const std::function<ChannelRequest(uint64_t)>& make,
                            uint64_t bytes, Clock::duration slice,
                            const std::function<Status()>& finish, uint64_t min_requests) {
  const auto start = Clock::now();
  const auto deadline = start + slice;
  const uint64_t least = std::max<uint64_t>(2, min_requests);
  ISO_ASSIGN_OR_RETURN(const uint64_t done, StreamRequests(channel, make, [&](uint64_t issued) {
                         return issued < least || Clock::now() < deadline;
                       }));
  if (finish) ISO_RETURN_IF_ERROR(finish());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(done * bytes) / seconds;
}

// How long a fresh size (MeasureSizes' `fresh_from`) may be predicted to
// take and still be timed, where that is more than four windows.
constexpr double kFreshSeconds = 0.05;

Result<std::vector<RateSample>> MeasureSizes(
    const std::vector<uint64_t>& sizes, uint64_t min_request, std::chrono::milliseconds budget,
    const std::function<Result<double>(uint64_t, Clock::duration)>& measure, int windows,
    uint64_t fresh_from) {
  windows = std::max(windows, 1);
  const auto per_window = budget / static_cast<int>(sizes.size()) / windows;
  // figures[i]: size i's windows; empty where the curve is extended flat.
  std::vector<std::vector<double>> figures(sizes.size());
  // The first pass decides which sizes are timed (from the figure of the
  // last one timed); later passes time those again, in the same order.
  bool timed_one = false;
  double last_bps = 0;
  uint64_t last_bytes = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t bytes = std::max(sizes[i], min_request);
    if (timed_one) {  // as before: even a 0 figure extends the growing sizes flat
      const bool grows = bytes > std::max(last_bytes, min_request);
      const double predicted_s = 2.0 * static_cast<double>(bytes) / last_bps;
      const double window_s = std::chrono::duration<double>(per_window).count();
      // (A size was timed before this one: i > 0.)
      const bool fresh = sizes[i - 1] < fresh_from && sizes[i] >= fresh_from;
      // A fresh size may overrun its window a little, never for long (a
      // rate-capped channel stays flat at its cap).
      const double allowed_s = fresh ? std::max(4 * window_s, kFreshSeconds) : window_s;
      if (grows && predicted_s > allowed_s) continue;
    }
    ISO_ASSIGN_OR_RETURN(const double bps, measure(sizes[i], per_window));
    figures[i].push_back(bps);
    timed_one = true;
    last_bps = bps;
    last_bytes = bytes;
  }
  for (int w = 1; w < windows; ++w) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (figures[i].empty()) continue;
      ISO_ASSIGN_OR_RETURN(const double bps, measure(sizes[i], per_window));
      figures[i].push_back(bps);
    }
  }
  std::vector<RateSample> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<double>& f = figures[i];
    if (f.empty()) {  // extended flat at the size before (the first is always timed)
      out.push_back({sizes[i], out.back().bytes_per_s});
      continue;
    }
    const size_t mid = f.size() / 2;
    std::nth_element(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(mid), f.end());
    out.push_back({sizes[i], f[mid]});
  }
  return out;
}

}  // namespace isometry::calibration
