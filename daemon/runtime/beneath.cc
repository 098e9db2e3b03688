#include "daemon/runtime/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace isometry {

namespace {

// 1: openat2 works, 0: not probed yet, -1: the kernel lacks it.
std::atomic<int> openat2_state{0};

int Openat2(int dir_fd, const char* rel, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  // openat2 refuses a mode without O_CREAT/O_TMPFILE (O_TMPFILE's bits
  // include O_DIRECTORY's, hence the exact test).
  const bool creates = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
  how.mode = creates ? 0644 : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd;
  do fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, rel, &how, sizeof how));
  while (fd < 0 && (errno == EINTR || errno == EAGAIN));  // EAGAIN: a rename raced the lookup
  return fd;
}

std::vector<std::string> Components(const std::string& rel) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= rel.size()) {
    const size_t end = std::min(rel.find('/', start), rel.size());
    std::string part = rel.substr(start, end - start);
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

// Without openat2: one component at a time, never following a link.
// ELOOP/ENOTDIR for a link met on the way, EXDEV for `..` or an absolute
// name, like openat2 answers.
int WalkBeneath(int dir_fd, const std::string& rel, int flags) {
  if (rel.empty() || rel.front() == '/') {
    errno = EXDEV;
    return -1;
  }
  const std::vector<std::string> parts = Components(rel);
  if (parts.empty()) return ::openat(dir_fd, ".", flags | O_CLOEXEC, 0644);
  UniqueFd at;
  int cur = dir_fd;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "..") {
      errno = EXDEV;
      return -1;
    }
    const bool last = i + 1 == parts.size();
    int f = last ? flags : (O_PATH | O_DIRECTORY);
    // The last component may be a link only where the caller asked for
    // the link itself (O_PATH | O_NOFOLLOW), as openat2 allows.
    const bool want_link = last && (flags & O_PATH) && (flags & O_NOFOLLOW);
    f |= O_NOFOLLOW;
    const int fd = ::openat(cur, parts[i].c_str(), f | O_CLOEXEC, 0644);
    if (fd < 0) {
      // A link where a directory was expected answers ENOTDIR: say ELOOP.
      const int err = errno;
      struct stat st {};
      const bool link = err == ENOTDIR &&
                        ::fstatat(cur, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISLNK(st.st_mode);
      errno = link ? ELOOP : err;
      return -1;
    }
    if (!want_link) {
      // O_NOFOLLOW alone opens a link with O_PATH instead of failing.
      struct stat st {};
      if (::fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
        ::close(fd);
        errno = ELOOP;
        return -1;
      }
    }
    if (last) return fd;
    at.reset(fd);
    cur = at.get();
  }
  return -1;  // not reached
}

}  // namespace

bool HaveOpenat2() { return openat2_state.load() >= 0; }

Result<UniqueFd> OpenBeneath(int dir_fd, const std::string& relative, int flags,
                             const std::string& shown, Resolver resolver) {
  int fd = -1;
  const bool walk = resolver == Resolver::kWalk;
  if (!walk && openat2_state.load() >= 0) {
    fd = Openat2(dir_fd, relative.c_str(), flags);
    if (fd < 0 && errno == ENOSYS) {
      if (openat2_state.exchange(-1) != -1) {
        spdlog::warn(
            "DSK memories: this kernel has no openat2 (Linux >= 5.6); file names are "
            "resolved one component at a time with O_NOFOLLOW instead");
      }
    } else {
      openat2_state.store(1);
    }
  }
  if (walk || openat2_state.load() < 0) fd = WalkBeneath(dir_fd, relative, flags);
  if (fd >= 0) return UniqueFd(fd);
  const int err = errno;
  switch (err) {
    case EXDEV:
      return absl::PermissionDeniedError(StrCat(shown, " leaves the memory's directory"));
    case ELOOP:
      return absl::PermissionDeniedError(
          StrCat(shown, " is or passes through a symbolic link; DSK file names may not use links"));
    default:
      return Status(absl::ErrnoToStatusCode(err), StrCat(shown, ": ", std::strerror(err)));
  }
}

}  // namespace isometry
