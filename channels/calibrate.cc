#include "channels/calibrate.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace isometry {

namespace {

using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};

constexpr uint64_t kGatherBytes = 4ull << 20;  // data per request of small runs

// Runs of `run` bytes gathered from every other run-sized slot of the
// source into consecutive bytes of the destination: 4 MiB per request, or
// one run when it is larger.
std::shared_ptr<const CopyProgram> Runs(uint64_t run) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.run_bytes = run;
  const uint64_t count = std::max<uint64_t>(1, kGatherBytes / run);
  if (count > 1) {
    op.num_loops = 1;
    op.loops[0] = {count, 2 * run, run};
  }
  p->ops.push_back(op);
  p->bytes = count * run;
  p->runs = count;
  return p;
}

}  // namespace

std::vector<uint64_t> CalibrationSizes(const ChannelCaps& caps) {
  std::vector<uint64_t> sizes;
  if (caps.converts_layout) {
    for (uint64_t s = 1; s <= (64ull << 20); s *= 8) sizes.push_back(s);
    sizes.push_back(64ull << 20);
  } else {
    for (uint64_t s = 4096; s <= (64ull << 20); s *= 4) sizes.push_back(s);
  }
  return sizes;
}

Result<std::vector<RateSample>> MeasureChannel(Channel& channel,
                                                     std::chrono::milliseconds budget) {
  const std::vector<uint64_t> sizes = CalibrationSizes(channel.caps());
  // Room for the largest run, or for 4 MiB of runs at a stride of two runs.
  const uint64_t largest = std::max(sizes.back(), 2 * kGatherBytes);
  std::unique_ptr<std::byte, FreeDeleter> src(static_cast<std::byte*>(std::aligned_alloc(4096, largest)));
  std::unique_ptr<std::byte, FreeDeleter> dst(static_cast<std::byte*>(std::aligned_alloc(4096, largest)));
  if (!src || !dst) return ResourceExhausted("calibration: cannot allocate scratch buffers");
  std::memset(src.get(), 1, largest);  // fault the pages in before timing
  std::memset(dst.get(), 0, largest);
  const int depth = std::max(1, channel.caps().max_in_flight);
  const auto per_size = budget / static_cast<int>(sizes.size());

  std::vector<RateSample> out;
  for (uint64_t size : sizes) {
    // A slow (rate-capped) channel would blow the budget on large requests:
    // past the point where two requests take longer than the slice, the
    // curve is flat at the last measured rate.
    if (!out.empty()) {
      const double predicted_s =
          2.0 * static_cast<double>(std::max(size, kGatherBytes)) / out.back().bytes_per_s;
      if (predicted_s > std::chrono::duration<double>(per_size).count()) {
        out.push_back({size, out.back().bytes_per_s});
        continue;
      }
    }
    auto program = Runs(size);
    std::mutex mu;
    std::condition_variable cv;
    int in_flight = 0;
    Status failure;
    uint64_t done = 0;
    const auto start = Clock::now();
    const auto deadline = start + per_size;
    uint64_t issued = 0;
    std::unique_lock lock(mu);
    while ((Clock::now() < deadline || issued < 2) && failure.ok()) {
      while (in_flight >= depth) cv.wait(lock);
      ++in_flight;
      ++issued;
      lock.unlock();
      channel.Submit({program, src.get(), dst.get()}, [&](Status s) {
        std::lock_guard l(mu);
        --in_flight;
        ++done;
        if (!s.ok()) failure = s;
        cv.notify_all();
      });
      lock.lock();
    }
    cv.wait(lock, [&] { return in_flight == 0; });
    if (!failure.ok()) return failure;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    out.push_back({size, static_cast<double>(done * program->bytes) / seconds});
  }
  return out;
}

}  // namespace isometry
