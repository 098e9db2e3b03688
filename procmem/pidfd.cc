// pidfds and /proc reads for reaching another process: see pidfd.h.
#include "procmem/pidfd.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "core/strings.h"

namespace isometry {

Result<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) return NotFound(path, " does not exist");
    return Internal("open ", path, ": ", ErrnoString(err));
  }
  return ReadSmallFile(fd.get(), path);
}

Result<std::string> ReadSmallFile(int fd, const std::string& path) {
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      if (err == ESRCH) return NotFound(path, ": the process has exited");
      return Internal("read ", path, ": ", ErrnoString(err));
    }
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (1u << 20)) return Internal(path, " is larger than 1 MiB");
  }
}

Result<uint64_t> ParseProcStatFlags(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return InvalidArgument("/proc stat has no ')'");
  std::string_view rest = text.substr(close + 1);
  // After the name: state ppid pgrp session tty_nr tpgid flags.
  for (int field = 3; field <= 9; ++field) {
    const size_t start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) {
      return InvalidArgument("/proc stat ends before field ", field);
    }
    rest = rest.substr(start);
    const std::string_view value = rest.substr(0, rest.find_first_of(" \n"));
    if (field == 9) {
      const std::optional<uint64_t> flags = ParseNumber<uint64_t>(value);
      if (!flags) return InvalidArgument("/proc stat has bad flags '", value, "'");
      return *flags;
    }
    rest = rest.substr(value.size());
  }
  return InvalidArgument("/proc stat: unreachable");
}

Result<bool> ProcessExiting(pid_t pid, int pidfd) {
  constexpr uint64_t kPfExiting = 0x4;  // include/linux/sched.h
  ISO_ASSIGN_OR_RETURN(bool exited, PidfdExited(pidfd));
  if (exited) return true;
  Result<std::string> stat = ReadSmallFile(StrCat("/proc/", pid, "/stat"));
  if (absl::IsNotFound(stat.status())) return true;  // reaped since
  ISO_RETURN_IF_ERROR(stat.status());
  ISO_ASSIGN_OR_RETURN(uint64_t flags, ParseProcStatFlags(*stat));
  // Still the pidfd's process after the read, so the flags were its own.
  ISO_ASSIGN_OR_RETURN(exited, PidfdExited(pidfd));
  return exited || (flags & kPfExiting) != 0;
}

Result<UniqueFd> OpenPidfd(pid_t pid) {
  if (pid <= 0) return InvalidArgument("pid ", pid, " names no process");
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) {
    const int err = errno;
    if (err == ESRCH) return NotFound("process ", pid, " does not exist");
    return Internal("pidfd_open(", pid, "): ", ErrnoString(err));
  }
  // pidfd_open sets O_CLOEXEC itself.
  return UniqueFd(static_cast<int>(fd));
}

Result<bool> PidfdExited(int pidfd) {
  pollfd p{.fd = pidfd, .events = POLLIN, .revents = 0};
  while (true) {
    const int n = ::poll(&p, 1, 0);
    if (n >= 0) break;
    if (errno != EINTR) return Internal("poll(pidfd): ", ErrnoString(errno));
  }
  if (p.revents & POLLNVAL) return Internal("poll(pidfd): ", pidfd, " is not an open pidfd");
  return (p.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace isometry
