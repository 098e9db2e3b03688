#include "client/cpp/write_tracker.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "core/strings.h"

namespace isometry::client {
namespace {

// Linux 6.7 ABI that Debian 12's kernel headers (6.1) do not carry yet.
constexpr uint64_t kFeatureWpUnpopulated = uint64_t{1} << 13;
constexpr uint64_t kFeatureWpAsync = uint64_t{1} << 15;
struct PageRegion {
  uint64_t start, end, categories;
};
struct PmScanArg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
constexpr uint64_t kScanWpMatching = 1;    // PM_SCAN_WP_MATCHING: protect what matched
constexpr uint64_t kScanCheckWpAsync = 2;  // PM_SCAN_CHECK_WPASYNC
constexpr uint64_t kPageIsWritten = 2;     // PAGE_IS_WRITTEN
const unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);  // NOLINT(google-runtime-int)
constexpr uint64_t kPage = 4096;

// A userfaultfd: the syscall, or /dev/userfaultfd where the syscall is
// refused (vm.unprivileged_userfaultfd = 0 for a process without
// CAP_SYS_PTRACE) but the device is accessible.
Result<UniqueFd> OpenUffd() {
  const int flags = O_CLOEXEC | O_NONBLOCK;
  const long fd =
      syscall(SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY);  // NOLINT(google-runtime-int)
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  const int first = errno;
  if (first == ENOSYS) return Unimplemented("userfaultfd: this kernel has no userfaultfd");
  UniqueFd dev(::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC));
  if (dev.get() >= 0) {
    const int ufd = ::ioctl(dev.get(), USERFAULTFD_IOC_NEW, flags);
    if (ufd >= 0) return UniqueFd(ufd);
  }
  return PermissionDenied("userfaultfd refused (", ErrnoString(first),
                          "): allow it with sysctl vm.unprivileged_userfaultfd=1, "
                          "CAP_SYS_PTRACE, or access to /dev/userfaultfd");
}

// A userfaultfd set up for asynchronous write-protect on shmem.
Result<UniqueFd> OpenWpAsync() {
  uint64_t available = 0;
  {
    ISO_ASSIGN_OR_RETURN(UniqueFd probe, OpenUffd());
    uffdio_api api{};
    api.api = UFFD_API;
    if (::ioctl(probe.get(), UFFDIO_API, &api) != 0) {
      return Unimplemented("userfaultfd UFFDIO_API: ", ErrnoString(errno));
    }
    available = api.features;
  }
  const uint64_t needed = kFeatureWpAsync | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
  if ((available & needed) != needed) {
    return Unimplemented("this kernel's userfaultfd lacks ",
                         (available & kFeatureWpAsync) == 0 ? "UFFD_FEATURE_WP_ASYNC (Linux 6.7)"
                                                            : "write-protect on shmem (Linux 5.19)",
                         ": client writes cannot be tracked; take full checkpoints");
  }
  ISO_ASSIGN_OR_RETURN(UniqueFd uffd, OpenUffd());
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = needed | (available & kFeatureWpUnpopulated);
  if (::ioctl(uffd.get(), UFFDIO_API, &api) != 0) {
    return Unimplemented("userfaultfd UFFDIO_API with WP_ASYNC: ", ErrnoString(errno));
  }
  return uffd;
}

Result<UniqueFd> OpenPagemap() {
  UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pm.get() < 0) return Unimplemented("open /proc/self/pagemap: ", ErrnoString(errno));
  // An empty scan tells whether the kernel has PAGEMAP_SCAN (Linux 6.7).
  PmScanArg arg{};
  arg.size = sizeof arg;
  if (::ioctl(pm.get(), kPagemapScan, &arg) < 0 && (errno == ENOTTY || errno == EOPNOTSUPP)) {
    return Unimplemented(
        "this kernel has no PAGEMAP_SCAN ioctl (Linux 6.7): client writes "
        "cannot be tracked; take full checkpoints");
  }
  return pm;
}

}  // namespace

Status WriteTracker::Supported() {
  ISO_RETURN_IF_ERROR(OpenWpAsync().status());
  return OpenPagemap().status();
}

Result<std::unique_ptr<WriteTracker>> WriteTracker::Start(std::byte* data, uint64_t bytes) {
  const auto start = reinterpret_cast<uint64_t>(data);
  if (start % kPage != 0 || bytes == 0 || bytes % kPage != 0) {
    return InvalidArgument("write tracking needs a page-aligned range of whole pages, not ", bytes,
                           " bytes at ", data);
  }
  ISO_ASSIGN_OR_RETURN(UniqueFd uffd, OpenWpAsync());
  ISO_ASSIGN_OR_RETURN(UniqueFd pagemap, OpenPagemap());
  uffdio_register reg{};
  reg.range = {start, bytes};
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(uffd.get(), UFFDIO_REGISTER, &reg) != 0) {
    return Unimplemented("userfaultfd write-protect register of ", bytes,
                         " bytes: ", ErrnoString(errno),
                         " (the range must be one shared memfd mapping)");
  }
  uffdio_writeprotect wp{};
  wp.range = {start, bytes};
  wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  if (::ioctl(uffd.get(), UFFDIO_WRITEPROTECT, &wp) != 0) {
    const int err = errno;
    uffdio_range r{start, bytes};
    (void)::ioctl(uffd.get(), UFFDIO_UNREGISTER, &r);
    return Unimplemented("userfaultfd write-protect: ", ErrnoString(err));
  }
  return std::unique_ptr<WriteTracker>(
      new WriteTracker(std::move(uffd), std::move(pagemap), data, bytes));
}

WriteTracker::~WriteTracker() {
  uffdio_range r{reinterpret_cast<uint64_t>(data_), bytes_};
  (void)::ioctl(uffd_.get(), UFFDIO_UNREGISTER, &r);
}

Result<std::vector<WriteTracker::PageRange>> WriteTracker::Collect() {
  const auto base = reinterpret_cast<uint64_t>(data_);
  std::vector<PageRange> out;
  PageRegion regions[256];
  uint64_t at = base;
  while (at < base + bytes_) {
    PmScanArg arg{};
    arg.size = sizeof arg;
    arg.flags = kScanWpMatching | kScanCheckWpAsync;
    arg.start = at;
    arg.end = base + bytes_;
    arg.vec = reinterpret_cast<uint64_t>(regions);
    arg.vec_len = std::size(regions);
    arg.category_mask = kPageIsWritten;
    arg.return_mask = kPageIsWritten;
    const int n = ::ioctl(pagemap_.get(), kPagemapScan, &arg);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Internal("PAGEMAP_SCAN of ", bytes_, " bytes: ", ErrnoString(errno));
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t first = (regions[i].start - base) / kPage;
      const uint64_t last = (regions[i].end - base + kPage - 1) / kPage;
      if (!out.empty() && out.back().first + out.back().second == first) {
        out.back().second += last - first;
      } else {
        out.emplace_back(first, last - first);
      }
    }
    if (arg.walk_end <= at) break;  // no progress: the kernel's answer is final
    at = arg.walk_end;
  }
  return out;
}

}  // namespace isometry::client
