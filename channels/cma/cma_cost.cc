// MeasureCmaCost (cma_channel.h): the per-iovec overhead and bandwidth of
// process_vm_readv, for the planner's choice between a direct CMA copy
// and packing through a pool slot (issue 14: fragmented types pack).
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "channels/cma/cma_channel.h"
#include "core/strings.h"

namespace isometry {
namespace {

constexpr size_t kArea = 1 << 20;
// Best of: a fragmented read takes milliseconds, a contiguous one 0.1 ms
// (more repeats, as cheap, for a steadier figure).
constexpr int kRepeats = 3;
constexpr int kContiguousRepeats = 24;

using Clock = std::chrono::steady_clock;

// Best of `repeats`: seconds to read kArea bytes of this process in
// iovecs of `piece` bytes (1024 a call), strided 2x on the remote side so
// the kernel cannot see them as one range.
Result<double> TimeRead(const std::vector<std::byte>& src, std::vector<std::byte>& dst,
                        size_t piece, int repeats) {
  const size_t n = kArea / piece;
  std::vector<iovec> remote(n), local(n);
  for (size_t i = 0; i < n; ++i) {
    remote[i] = {const_cast<std::byte*>(src.data()) + 2 * i * piece, piece};
    local[i] = {dst.data() + i * piece, piece};
  }
  double best = 1e9;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (size_t at = 0; at < n;) {
      const size_t count = std::min<size_t>(n - at, 1024);
      const ssize_t got = ::process_vm_readv(::getpid(), &local[at], count, &remote[at], count, 0);
      if (got != static_cast<ssize_t>(count * piece)) {
        return Unavailable("process_vm_readv of this process: ",
                           got < 0 ? ErrnoString(errno) : StrCat("short read of ", got));
      }
      at += count;
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

Result<CmaCost> MeasureCmaCost() {
  // The source is strided 2x, so twice the area; both faulted in first.
  std::vector<std::byte> src(2 * kArea, std::byte{1}), dst(kArea, std::byte{0});
  ISO_ASSIGN_OR_RETURN(double contiguous, TimeRead(src, dst, kArea, kContiguousRepeats));
  // t(n) = n * per_iovec + bytes / bandwidth: least squares over n.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int points = 0;
  for (size_t piece = 64; piece <= (64u << 10); piece *= 4) {
    ISO_ASSIGN_OR_RETURN(double t, TimeRead(src, dst, piece, kRepeats));
    const double n = static_cast<double>(kArea) / static_cast<double>(piece);
    sx += n;
    sy += t;
    sxx += n * n;
    sxy += n * t;
    ++points;
  }
  CmaCost cost;
  const double slope = (points * sxy - sx * sy) / (points * sxx - sx * sx);
  cost.per_iovec_seconds = std::max(slope, 0.0);
  cost.bytes_per_second = static_cast<double>(kArea) / std::max(contiguous, 1e-9);
  return cost;
}

}  // namespace isometry
