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
#include <utility>
#include <vector>

#include "core/strings.h"

namespace isometry {

namespace {

// 1: openat2 works, 0: not probed yet, -1: the kernel lacks it.
std::atomic<int> openat2_state{0};

UniqueFd Openat2(int dir_fd, const char* rel, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_CLOEXEC;
  // openat2 refuses a mode without O_CREAT/O_TMPFILE (O_TMPFILE's bits
  // include O_DIRECTORY's, hence the exact test).
  const bool creates = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
  how.mode = creates ? 0644 : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd;
  do {
    fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, rel, &how, sizeof how));
  } while (fd < 0 && (errno == EINTR || errno == EAGAIN));  // EAGAIN: a rename raced the lookup
  return UniqueFd(fd);
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
// name, like openat2 answers. On failure errno says why (set after every
// fd opened on the way is closed).
UniqueFd WalkBeneath(int dir_fd, const std::string& rel, int flags) {
  if (rel.empty() || rel.front() == '/') {
    errno = EXDEV;
    return UniqueFd();
  }
  const std::vector<std::string> parts = Components(rel);
  if (parts.empty()) return UniqueFd(::openat(dir_fd, ".", flags | O_CLOEXEC, 0644));
  UniqueFd at;
  int cur = dir_fd;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "..") {
      at.reset();
      errno = EXDEV;
      return UniqueFd();
    }
    const bool last = i + 1 == parts.size();
    int f = last ? flags : (O_PATH | O_DIRECTORY);
    // The last component may be a link only where the caller asked for
    // the link itself (O_PATH | O_NOFOLLOW), as openat2 allows.
    const bool want_link = last && (flags & O_PATH) && (flags & O_NOFOLLOW);
    f |= O_NOFOLLOW;
    UniqueFd fd(::openat(cur, parts[i].c_str(), f | O_CLOEXEC, 0644));
    if (!fd.valid()) {
      // A link where a directory was expected answers ENOTDIR: say ELOOP.
      const int err = errno;
      struct stat st {};
      const bool link = err == ENOTDIR &&
                        ::fstatat(cur, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISLNK(st.st_mode);
      at.reset();
      errno = link ? ELOOP : err;
      return UniqueFd();
    }
    if (!want_link) {
      // O_NOFOLLOW alone opens a link with O_PATH instead of failing.
      struct stat st {};
      if (::fstat(fd.get(), &st) == 0 && S_ISLNK(st.st_mode)) {
        fd.reset();
        at.reset();
        errno = ELOOP;
        return UniqueFd();
      }
    }
    if (last) return fd;
    at = std::move(fd);
    cur = at.get();
  }
  return UniqueFd();  // not reached
}

}  // namespace

bool HaveOpenat2() { return openat2_state.load() >= 0; }

Result<UniqueFd> OpenBeneath(int dir_fd, const std::string& relative, int flags,
                             const std::string& shown, Resolver resolver) {
  UniqueFd fd;
  const bool walk = resolver == Resolver::kWalk;
  if (!walk && openat2_state.load() >= 0) {
    fd = Openat2(dir_fd, relative.c_str(), flags);
    if (!fd.valid() && errno == ENOSYS) {
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
  if (fd.valid()) return fd;
  const int err = errno;
  switch (err) {
    case EXDEV:
      return absl::PermissionDeniedError(StrCat(shown, " leaves the memory's directory"));
    case ELOOP:
      return absl::PermissionDeniedError(
          StrCat(shown, " is or passes through a symbolic link; DSK file names may not use links"));
    default:
      return Status(absl::ErrnoToStatusCode(err), StrCat(shown, ": ", ErrnoString(err)));
  }
}

}  // namespace isometry
