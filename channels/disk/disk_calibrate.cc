// Disk channels' calibration (MeasureDiskChannel, channels/calibrate.h).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "channels/calibrate.h"
#include "channels/calibration_timing.h"
#include "channels/disk/disk_file.h"
#include "channels/host_pages.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/unique_fd.h"

namespace isometry {

namespace {

using calibration::Clock;
using calibration::MeasureSizes;
using calibration::TimeRequests;

constexpr uint64_t kDiskArea = 128ull << 20;  // scratch file bytes a read cycles through
// A write calibration writes into holes (a sparse file of this size, its
// blocks dropped before each size), as a copy's fresh destination file
// does: overwriting allocated blocks measures far faster than durable copies
// into new files reach (docs/benchmarks/design-measurements.md, "Disk").
// Nothing is allocated until written.
constexpr uint64_t kDiskWriteArea = 512ull << 20;
// Each size, read or write, is timed twice and the better figure kept
// (MeasureSizes takes the upper of two): a write calibration started right after gigabytes of
// other writes or freed memory (isometry_bench's full run) read 1.25-1.29
// times below the 1 GiB copies that followed, where one started on a
// quiet VM read 0.91-1.03 of them. A slow moment of the virtual disk
// lowers one window, not the figure.
constexpr int kDiskWindows = 2;

// The curve of a write calibration's sizes up to their fdatasync, from
// the rates timed (`timed`, by size). Sizes MeasureSizes extended flat
// (past the budget) stay flat here too.
std::vector<RateSample> UnsyncedSamples(const std::vector<RateSample>& samples,
                                        const std::map<uint64_t, double>& timed) {
  std::vector<RateSample> out;
  for (const RateSample& s : samples) {
    auto it = timed.find(s.request_bytes);
    const double bps = it != timed.end() ? it->second
                       : out.empty()     ? s.bytes_per_s
                                         : out.back().bytes_per_s;
    out.push_back({s.request_bytes, bps});
  }
  return out;
}

// Writes `bytes` of `host` (cycled) at the start of `file`, durably: the
// area a DiskRead calibration reads. A sparse file would read as zeros
// without touching the device.
Status FillFile(const DiskFile& file, const HostPages& host, uint64_t bytes) {
  const int fd = file.direct_fd() >= 0 ? file.direct_fd() : file.fd();
  for (uint64_t off = 0; off < bytes;) {
    const uint64_t n = std::min<uint64_t>(host.size(), bytes - off);
    const ssize_t w = ::pwrite(fd, host.data(), n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return Internal("calibration: writing ", file.path(), ": ",
                      w < 0 ? ErrnoString(errno) : "no progress");
    }
    off += static_cast<uint64_t>(w);
  }
  return SyncFile(file.Ref());
}

// The scratch file of a calibration in `directory`: an unnamed file
// (O_TMPFILE), nothing to plant a link at, nothing left behind even if the
// daemon dies mid-measurement. `path` is for messages only. File systems
// without O_TMPFILE get a fresh file of that unpredictable name (O_EXCL |
// O_NOFOLLOW), unlinked at once.
Result<DiskFile> OpenScratch(const std::string& directory, const std::string& path) {
  UniqueFd scratch(::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  const bool named = !scratch.valid() && (errno == EOPNOTSUPP || errno == EISDIR);
  if (named) {
    scratch.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  }
  if (!scratch.valid()) {
    const int err = errno;
    return Status(absl::ErrnoToStatusCode(err),
                  StrCat("calibration: scratch file ", path, ": ", ErrnoString(err)));
  }
  if (named) ::unlink(path.c_str());
  return DiskFile::Open(StrCat("/proc/self/fd/", scratch.get()), DiskFile::Mode::kUpdate, path);
}

}  // namespace

Result<DiskCurves> MeasureDiskChannel(Channel& channel, const std::string& directory,
                                      std::chrono::milliseconds budget) {
  const ChannelKind kind = channel.caps().kind;
  if (kind != ChannelKind::kDiskRead && kind != ChannelKind::kDiskWrite) {
    return InvalidArgument("calibration: channel '", channel.caps().name,
                           "' is not a disk channel");
  }
  const bool write = kind == ChannelKind::kDiskWrite;
  const std::vector<uint64_t> sizes = CalibrationSizes(channel.caps());
  const std::string path = StrCat(directory, "/.isometry-calibration-", RandomHex(8));
  ISO_ASSIGN_OR_RETURN(DiskFile file, OpenScratch(directory, path));
  // Sized first: ext4 serializes O_DIRECT writes that extend a file.
  if (::ftruncate(file.fd(), static_cast<off_t>(write ? kDiskWriteArea : kDiskArea)) != 0) {
    return Internal("calibration: sizing ", path, ": ", ErrnoString(errno));
  }
  // Host memory like the daemon's rings (huge pages where allowed), as
  // large as a host-memory calibration's areas: consecutive requests use
  // the next slot, so the channel's copies between host memory and its
  // staging go to memory as a large copy's do (with one buffer for every
  // request, a 4 MiB source was read from the cache each time).
  const uint64_t host_area = std::max(sizes.back(), CalibrationAreaBytes());
  ISO_ASSIGN_OR_RETURN(HostPages host, HostPages::Map(host_area, /*populate=*/true));
  std::memset(host.data(), 0x5a, host.size());
  if (!write) ISO_RETURN_IF_ERROR(FillFile(file, host, kDiskArea));
  const FileRange ref = file.Ref();
  const uint64_t area = write ? kDiskWriteArea : kDiskArea;
  // Writes: each size's rate up to its fdatasync too (DiskCurves::unsynced).
  std::map<uint64_t, double> unsynced;
  DiskCurves out;
  ISO_ASSIGN_OR_RETURN(
      out.samples,
      MeasureSizes(
          sizes, 0, budget,
          [&](uint64_t size, Clock::duration slice) -> Result<double> {
            auto program = ContiguousProgram(size);
            // Sequential requests through the area, wrapping at its end.
            const uint64_t per_area = std::max<uint64_t>(1, area / size);
            const uint64_t host_slots = std::max<uint64_t>(1, host.size() / size);
            std::function<Status()> finish;
            Clock::time_point synced_at;
            if (write) {
              // Fresh holes, and the fdatasync a durable copy ends with, timed.
              // Synced before the clock starts: freeing the blocks the last
              // size wrote is the file system's work, done at its next commit,
              // and the size after it paid for that: unsynced, the size after
              // the one that wrote the whole area measured well under its
              // neighbours (docs/benchmarks/design-measurements.md, "Disk").
              if (::ftruncate(file.fd(), 0) != 0 ||
                  ::ftruncate(file.fd(), static_cast<off_t>(area)) != 0 ||
                  ::fsync(file.fd()) != 0) {
                return Internal("calibration: resetting ", path, ": ", ErrnoString(errno));
              }
              finish = [&] {
                synced_at = Clock::now();
                return SyncFile(ref);
              };
            }
            auto make = [&](uint64_t k) {
              ChannelRequest r{.program = program};
              FileRange at = ref;
              at.offset = (k % per_area) * size;
              if (write) {
                r.src = HostBytes{host.data() + (k % host_slots) * size};
                r.dst = std::move(at);
              } else {
                r.src = std::move(at);
                r.dst = HostBytes{host.data() + (k % host_slots) * size};
              }
              return r;
            };
            const auto start = Clock::now();
            ISO_ASSIGN_OR_RETURN(const double bps,
                                 TimeRequests(channel, make, size, slice, finish));
            if (write) {
              // The bytes TimeRequests moved, over the time before the sync.
              const double all_s = std::chrono::duration<double>(Clock::now() - start).count();
              const double writes_s = std::chrono::duration<double>(synced_at - start).count();
              if (writes_s > 0) unsynced[size] = std::max(unsynced[size], bps * all_s / writes_s);
            }
            return bps;
          },
          kDiskWindows));
  if (write) out.unsynced = UnsyncedSamples(out.samples, unsynced);
  return out;
}

}  // namespace isometry
