#include "channels/cma/client_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>
#include <string>

#include "core/strings.h"

namespace isometry {
namespace {

// The numbers after `key` on its line of /proc/<pid>/status, in `base`.
template <class T, size_t N>
Status ParseLine(std::string_view text, std::string_view key, int base, T (&out)[N]) {
  size_t at = 0;
  while (true) {
    at = text.find(key, at);
    if (at == std::string_view::npos) {
      return InvalidArgument("/proc status has no '", key, "' line");
    }
    if (at == 0 || text[at - 1] == '\n') break;
    at += key.size();
  }
  std::string_view line = text.substr(at + key.size());
  line = line.substr(0, line.find('\n'));
  for (size_t i = 0; i < N; ++i) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) {
      return InvalidArgument("/proc status line '", key, "' has fewer than ", N, " fields");
    }
    line = line.substr(start);
    const std::string_view field = line.substr(0, line.find_first_of(" \t"));
    std::optional<uint64_t> v;
    if (base == 16) {
      uint64_t x = 0;
      const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), x, 16);
      if (ec == std::errc() && end == field.data() + field.size()) v = x;
    } else {
      v = ParseNumber<uint64_t>(field);
    }
    if (!v || *v != static_cast<T>(*v)) {
      return InvalidArgument("/proc status line '", key, "' has a bad field '", field, "'");
    }
    out[i] = static_cast<T>(*v);
    line = line.substr(field.size());
  }
  return OkStatus();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) return NotFound(path, " does not exist");
    return Internal("open ", path, ": ", ErrnoString(err));
  }
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
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

Result<ProcessIds> ReadProcessIds(pid_t pid) {
  ProcessIds ids;
  ISO_ASSIGN_OR_RETURN(std::string status, ReadSmallFile(StrCat("/proc/", pid, "/status")));
  ISO_RETURN_IF_ERROR(ParseProcStatus(status, ids));
  struct stat st {};
  const std::string dir = StrCat("/proc/", pid);
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(dir, " does not exist");
    return Internal("stat ", dir, ": ", ErrnoString(err));
  }
  ids.proc_owner = st.st_uid;
  return ids;
}

}  // namespace

Status ParseProcStatus(std::string_view text, ProcessIds& ids) {
  ISO_RETURN_IF_ERROR(ParseLine(text, "Uid:", 10, ids.uid));
  ISO_RETURN_IF_ERROR(ParseLine(text, "Gid:", 10, ids.gid));
  uint64_t cap[1] = {};
  ISO_RETURN_IF_ERROR(ParseLine(text, "CapPrm:", 16, cap));
  ids.cap_permitted = cap[0];
  ISO_RETURN_IF_ERROR(ParseLine(text, "CapEff:", 16, cap));
  ids.cap_effective = cap[0];
  return OkStatus();
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

Status ClientProcess::CheckAlive() const {
  ISO_ASSIGN_OR_RETURN(bool exited, PidfdExited(pidfd_.get()));
  if (exited) return NotFound("process ", pid_, " has exited");
  return OkStatus();
}

Result<ClientProcess> ClientProcess::Open(const PeerCredentials& peer) {
  // Order matters: the pidfd first, so the pid cannot be reused by the
  // time /proc is read without the pidfd seeing its process exit.
  ISO_ASSIGN_OR_RETURN(UniqueFd pidfd, OpenPidfd(peer.pid));
  ClientProcess process(peer.pid, std::move(pidfd));
  // Then the address space, before the checks (see the header).
  const std::string mem = StrCat("/proc/", peer.pid, "/mem");
  process.mem_.reset(::open(mem.c_str(), O_RDWR | O_CLOEXEC));
  if (!process.mem_.valid()) {
    const int err = errno;
    ISO_RETURN_IF_ERROR(process.CheckAlive());
    return Status(absl::ErrnoToStatusCode(err),
                  StrCat("cannot open ", mem, ": ", ErrnoString(err)));
  }
  ISO_ASSIGN_OR_RETURN(ProcessIds ids, ReadProcessIds(peer.pid));
  // Alive now, so /proc spoke of the pidfd's process (its pid was bound
  // to it from pidfd_open until this check).
  ISO_RETURN_IF_ERROR(process.CheckAlive());
  const auto refuse = [&](const auto&... why) {
    return PermissionDenied("process ", peer.pid, " may not be reached by CMA for uid ", peer.uid,
                            ": ", why...);
  };
  static constexpr const char* kWhich[] = {"real", "effective", "saved", "filesystem"};
  for (int i = 0; i < 4; ++i) {
    if (ids.uid[i] != peer.uid) {
      return refuse("its ", kWhich[i], " uid is ", ids.uid[i]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    if (ids.gid[i] != peer.gid) {
      return refuse("its ", kWhich[i], " gid is ", ids.gid[i], ", not ", peer.gid);
    }
  }
  if (ids.proc_owner != peer.uid) {
    return refuse("it is not dumpable (a setuid/setgid exec or prctl(PR_SET_DUMPABLE, 0)); /proc/",
                  peer.pid, " is owned by uid ", ids.proc_owner);
  }
  if (peer.uid != 0 && (ids.cap_permitted | ids.cap_effective) != 0) {
    return refuse("it holds capabilities (CapPrm ", ids.cap_permitted, ")");
  }
  return process;
}

}  // namespace isometry
