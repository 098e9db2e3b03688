// MeasureCmaCost (cma_channel.h): the per-run overhead and bandwidth of
// reading a client's memory (preadv of /proc/<pid>/mem), for the planner's choice between a direct
// CMA copy and packing through a pool slot (issue 14: fragmented types pack).
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "channels/cma/cma_channel.h"
#include "core/strings.h"
#include "core/unique_fd.h"

namespace isometry {
namespace {

constexpr size_t kArea = 1 << 20;
// Best of: a fragmented read takes milliseconds, a contiguous one 0.1 ms
// (more repeats, as cheap, for a steadier figure).
constexpr int kRepeats = 3;
constexpr int kContiguousRepeats = 24;

using Clock = std::chrono::steady_clock;

// Best of `repeats`: seconds to read kArea bytes of this process in
// pieces of `piece` bytes, strided 2x on the remote side so the kernel
// cannot see them as one range, the way the channel reads a client: one
// preadv of /proc/<pid>/mem per remote run (cma_copy.h, CmaTarget::mem_fd).
Result<double> TimeRead(int mem, const std::vector<std::byte>& src, std::vector<std::byte>& dst,
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
    for (size_t at = 0; at < n; ++at) {
      const auto from = static_cast<off_t>(reinterpret_cast<uintptr_t>(remote[at].iov_base));
      const ssize_t got = ::preadv(mem, &local[at], 1, from);
      if (got != static_cast<ssize_t>(piece)) {
        return Unavailable("reading /proc/self/mem: ",
                           got < 0 ? ErrnoString(errno) : StrCat("short read of ", got));
      }
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

Result<CmaCost> MeasureCmaCost() {
  // The source is strided 2x, so twice the area; both faulted in first.
  std::vector<std::byte> src(2 * kArea, std::byte{1}), dst(kArea, std::byte{0});
  const UniqueFd mem(::open("/proc/self/mem", O_RDONLY | O_CLOEXEC));
  if (!mem.valid()) return Unavailable("opening /proc/self/mem: ", ErrnoString(errno));
  ISO_ASSIGN_OR_RETURN(double contiguous, TimeRead(mem.get(), src, dst, kArea, kContiguousRepeats));
  // t(n) = n * per_iovec + bytes / bandwidth: least squares over n.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int points = 0;
  for (size_t piece = 64; piece <= (64u << 10); piece *= 4) {
    ISO_ASSIGN_OR_RETURN(double t, TimeRead(mem.get(), src, dst, piece, kRepeats));
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
