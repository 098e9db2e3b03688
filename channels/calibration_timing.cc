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

Result<std::vector<RateSample>> MeasureSizes(
    const std::vector<uint64_t>& sizes, uint64_t min_request, std::chrono::milliseconds budget,
    const std::function<Result<double>(uint64_t, Clock::duration)>& measure, int windows) {
  windows = std::max(windows, 1);
  const auto per_window = budget / static_cast<int>(sizes.size()) / windows;
  std::vector<RateSample> out;
  for (uint64_t size : sizes) {
    if (!out.empty()) {
      const uint64_t bytes = std::max(size, min_request);
      const bool grows = bytes > std::max(out.back().request_bytes, min_request);
      const double predicted_s = 2.0 * static_cast<double>(bytes) / out.back().bytes_per_s;
      if (grows && predicted_s > std::chrono::duration<double>(per_window).count()) {
        out.push_back({size, out.back().bytes_per_s});
        continue;
      }
    }
    std::vector<double> figures;
    for (int w = 0; w < windows; ++w) {
      ISO_ASSIGN_OR_RETURN(const double bps, measure(size, per_window));
      figures.push_back(bps);
    }
    std::nth_element(figures.begin(), figures.begin() + windows / 2, figures.end());
    out.push_back({size, figures[static_cast<size_t>(windows / 2)]});
  }
  return out;
}

}  // namespace isometry::calibration
