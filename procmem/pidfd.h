// A process other than this one, pinned by a pidfd: opening the pidfd,
// telling an exit (or an exit under way) from an exec, and reading small
// /proc files. Shared by the daemon's cma channel (channels/cma/) and
// clients that read a peer's memory themselves (client/cpp/direct_read.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

// The whole of a small file (/proc/<pid>/status, stat): NOT_FOUND when it
// or its process is gone; INTERNAL past 1 MiB.
Result<std::string> ReadSmallFile(const std::string& path);
// The same through an open fd, from its start (pread: threads may share
// the fd); `name` is for messages.
Result<std::string> ReadSmallFile(int fd, const std::string& name);

// pidfd_open(2) of `pid` (a thread-group leader). NOT_FOUND when no such
// process exists; the errno otherwise (ENOSYS before Linux 5.3).
Result<UniqueFd> OpenPidfd(pid_t pid);

// Whether the process `pidfd` refers to has exited (it is a zombie or
// gone: its pid may be reused from then on). A pidfd polls readable once
// the process has exited; this does not wait.
Result<bool> PidfdExited(int pidfd);

// The kernel's per-task flags (field 9) of a /proc/<pid>/stat line; the
// command name in parentheses may hold any byte, ')' and spaces included,
// so the fields are counted from its last ')'. INVALID_ARGUMENT when the
// line is malformed.
Result<uint64_t> ParseProcStatFlags(std::string_view text);

// Whether the process `pidfd` pins (thread-group leader `pid`) is exiting
// or has exited: its pidfd polls readable, or its leader carries
// PF_EXITING, which do_exit sets before the address space goes, and which
// an exec never sets. This is what tells an exit from an exec when the
// pinned address space turns out empty: the pidfd alone reports the exit
// only at exit_notify, after the memory is torn down (tens of ms for a
// large process on a busy machine).
Result<bool> ProcessExiting(pid_t pid, int pidfd);

}  // namespace isometry
