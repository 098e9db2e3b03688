#include "channels/cma/client_process.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statfs.h>
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

bool IsProcFileOf(int fd, pid_t pid, std::string_view file, int mode) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) return false;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) != mode) return false;
  char target[64];
  const std::string link = StrCat("/proc/self/fd/", fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
  return n > 0 &&
         std::string_view(target, static_cast<size_t>(n)) == StrCat("/proc/", pid, "/", file);
}

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

Status ClientProcess::CheckAlive() const {
  ISO_ASSIGN_OR_RETURN(bool exited, PidfdExited(pidfd_.get()));
  if (exited) return NotFound("process ", pid_, " has exited");
  return OkStatus();
}

Result<RangeProtection> ClientProcess::Protection(uint64_t address, uint64_t bytes) const {
  const std::string path = StrCat("/proc/", pid_, "/maps");
  ISO_ASSIGN_OR_RETURN(std::string maps,
                       maps_.valid() ? ReadSmallFile(maps_.get(), path) : ReadSmallFile(path));
  ISO_RETURN_IF_ERROR(CheckAlive());  // the maps were the pidfd's process's
  ISO_ASSIGN_OR_RETURN(RangeProtection p, ProtectionOf(maps, address, bytes));
  // The range is mapped readable in the process's address space now; the
  // pinned one reads nothing (0) once an exec has replaced it, and pages
  // it cannot reach (device memory) fail the read.
  char byte = 0;
  const ssize_t n = ::pread(mem_.get(), &byte, 1, static_cast<off_t>(address));
  if (n < 0) {
    const int err = errno;
    ISO_RETURN_IF_ERROR(CheckAlive());
    return InvalidArgument("private range at ", address, " in process ", pid_,
                           ": the daemon cannot read its pages (", ErrnoString(err), ")");
  }
  if (n == 0) {
    ISO_RETURN_IF_ERROR(CheckAlive());
    return FailedPrecondition("process ", pid_,
                              " is not the program this session first registered memory of (it "
                              "has exec'd since): open a new session for its private ranges");
  }
  return p;
}

Result<ClientProcess> ClientProcess::Open(const PeerCredentials& peer, UniqueFd given,
                                          UniqueFd maps) {
  // Order matters: the pidfd first, so the pid cannot be reused by the
  // time /proc is read without the pidfd seeing its process exit.
  ISO_ASSIGN_OR_RETURN(UniqueFd pidfd, OpenPidfd(peer.pid));
  ClientProcess process(peer.pid, std::move(pidfd));
  // Then the address space, before the checks (see the header): the
  // client's own when it passed it, else opened here.
  const std::string mem = StrCat("/proc/", peer.pid, "/mem");
  if (maps.valid() && IsProcFileOf(maps.get(), peer.pid, "maps", O_RDONLY)) {
    process.maps_ = std::move(maps);
  }
  if (given.valid() && IsProcFileOf(given.get(), peer.pid, "mem", O_RDWR)) {
    process.mem_ = std::move(given);
  } else {
    process.mem_.reset(::open(mem.c_str(), O_RDWR | O_CLOEXEC));
  }
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
