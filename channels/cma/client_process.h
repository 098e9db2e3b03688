// Client processes the daemon reaches by CMA (process_vm_readv/writev),
// pinned by a pidfd, and the identity check that decides whether it may.
//
// What the kernel checks. process_vm_readv/writev on process T succeed
// only where the caller passes ptrace_may_access(T,
// PTRACE_MODE_ATTACH_REALCREDS): the caller's real uid equals T's real,
// effective and saved uids and its real gid T's real, effective and saved
// gids, T is dumpable (not a setuid/setgid exec, no
// prctl(PR_SET_DUMPABLE, 0)) and T's permitted capabilities are a subset
// of the caller's — or the caller has CAP_SYS_PTRACE in T's user
// namespace, which skips all of that. Then Yama, for ATTACH-mode checks
// such as these: kernel.yama.ptrace_scope 0 adds nothing; 1
// ("restricted", Debian's and Ubuntu's default where Yama is built in)
// lets only an ancestor of T, a tracer T declared with
// prctl(PR_SET_PTRACER), or CAP_SYS_PTRACE through — the daemon is no
// client's ancestor, so without the capability it reaches nobody; 2
// ("admin only") lets only CAP_SYS_PTRACE through; 3 ("no attach")
// refuses everyone, root included, until reboot.
//
// Why the daemon checks for itself. systemd/isometryd.service runs the
// daemon with CAP_SYS_PTRACE (ambient), so the kernel lets it read and
// write every process on the node (except under ptrace_scope 3): the
// kernel's check says nothing about the client the daemon acts for. A
// client names its process only through the connection's SO_PEERCRED
// pid, taken at connect(); by the time it registers memory, that pid may
// run a setuid binary (the connecting process exec'd it and kept the
// socket), have been passed the socket by another process, or be a new
// process that got the recycled pid. So the daemon repeats the kernel's
// test between the client and the process itself — ids equal, dumpable,
// no capabilities unless the client is root — after pinning the process with a
// pidfd, and then acts only through that pidfd's process.
//
// Thread safety: ClientProcess is immutable after Open(); its methods may
// be called from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "channels/endpoint.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "procmem/pidfd.h"
#include "procmem/proc_maps.h"

namespace isometry {

// Who is asking, as SO_PEERCRED reported it at connect().
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// What ClientProcess::Open reads from /proc/<pid>.
struct ProcessIds {
  uid_t uid[4] = {};  // real, effective, saved, filesystem
  gid_t gid[4] = {};
  uint64_t cap_permitted = 0;
  uint64_t cap_effective = 0;
  uid_t proc_owner = 0;  // owner of /proc/<pid>: root for a non-dumpable process
};

// Whether `fd` is /proc/<pid>/`file` (a procfs file, by its path from this
// process's /proc), opened with access mode `mode` (O_RDONLY, O_RDWR).
bool IsProcFileOf(int fd, pid_t pid, std::string_view file, int mode);

// Parses the Uid:, Gid:, CapPrm: and CapEff: lines of /proc/<pid>/status
// (the other fields of the result are left alone). INVALID_ARGUMENT when
// a line is missing or malformed.
Status ParseProcStatus(std::string_view text, ProcessIds& ids);

// A client's process, pinned by a pidfd; move-only.
class ClientProcess {
 public:
  // The security check: opens a pidfd for `peer.pid`, then reads the
  // process's credentials from /proc and requires that
  //  - every uid (real, effective, saved, fs) equals peer.uid and every
  //    gid peer.gid (a setuid/setgid program, even one that dropped its
  //    effective id for a while, is refused);
  //  - it is dumpable (/proc/<pid> owned by its uid; a non-dumpable
  //    process asked not to be inspected, as the kernel honours);
  //  - for a non-root peer, it holds no permitted capability (a binary
  //    with file capabilities is more than its uid may reach);
  // and finally that the pidfd's process is still alive, so what /proc
  // said was about that process and not a later one with the same pid.
  // Before reading /proc it opens /proc/<pid>/mem, which holds on to the
  // address space it was opened on: the one the checks then describe (an
  // exec before the checks shows in them; one after them leaves this fd
  // on the old, dead address space, so a copy through it fails instead of
  // reaching the new program — a setuid one, say).
  // PERMISSION_DENIED names the mismatch; NOT_FOUND: the process exited.
  //
  // `mem` is the client's own /proc/self/mem, passed with its request
  // (SCM_RIGHTS): a process may always open its own, while the daemon,
  // running as its own user, opens another uid's only with CAP_SYS_PTRACE
  // and CAP_DAC_OVERRIDE (the file is mode 0600, the client's). It is
  // used when it is /proc/<peer.pid>/mem opened for reading and writing (a
  // procfs file, by its path from this process's /proc); otherwise, or
  // when none came, the daemon opens /proc/<pid>/mem itself as before. It
  // was opened before the checks too, so it holds what they describe.
  // `maps`, its /proc/self/maps, likewise spares the daemon CAP_SYS_PTRACE
  // for reading the process's mappings (Protection), which another uid's
  // /proc/<pid>/maps needs.
  static Result<ClientProcess> Open(const PeerCredentials& peer, UniqueFd mem = UniqueFd(),
                                    UniqueFd maps = UniqueFd());

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  // OK while the process lives; NOT_FOUND once it has exited.
  Status CheckAlive() const;
  // What the process's maps say of [address, +bytes) now
  // (procmem/proc_maps.h): INVALID_ARGUMENT for a hole or no-access
  // pages. Also that the address space Open pinned is still the
  // process's: FAILED_PRECONDITION once it has exec'd (every copy through
  // the pinned one would fail), NOT_FOUND once it has exited.
  Result<RangeProtection> Protection(uint64_t address, uint64_t bytes) const;
  // The endpoint for `address` in this process. The ClientProcess must
  // outlive every request made with it (the endpoint borrows the pidfd).
  ProcessBytes At(uint64_t address) const { return {pid_, address, pidfd_.get(), mem_.get()}; }
  int mem_fd() const { return mem_.get(); }

 private:
  ClientProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  pid_t pid_ = 0;
  UniqueFd pidfd_;
  UniqueFd mem_;   // /proc/<pid>/mem, opened before the checks
  UniqueFd maps_;  // the client's /proc/<pid>/maps when it passed it; else read by path
};

}  // namespace isometry
