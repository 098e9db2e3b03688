// Runs one copy program between this process and another one with
// process_vm_readv/process_vm_writev: the engine under the CMA channel
// (cma_channel.h), apart so it can be tested with a syscall that returns
// short.
//
// The program's runs become iovec batches: the other process's side of
// each run a remote iovec, this process's side a local one. Each side is
// coalesced on its own (the kernel treats both lists as byte streams, so a
// run adjacent to the previous one on one side extends that iovec even
// where the other side jumps). A batch holds at most kMaxIovecs iovecs on
// each side (IOV_MAX: the kernel refuses more) and at most
// CmaLimits::batch_bytes bytes, splitting a longer run, so cancellation
// and the liveness check come around at least that often.
//
// A call that moves fewer bytes than asked (the kernel stops at the first
// remote page it cannot reach) is resumed from the byte it stopped at; a
// call that then moves nothing fails the request with a status naming the
// process, the address and the length it could not reach.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "layout/copy_program.h"

namespace isometry {

inline constexpr size_t kMaxIovecs = 1024;  // UIO_MAXIOV, what IOV_MAX says

// Which way the bytes go: read the other process (it is the program's
// source) or write it (it is the destination).
enum class CmaDirection { kRead, kWrite };

// The system call, as process_vm_readv/process_vm_writev take it: the
// default is the real one for the direction. Tests inject wrappers.
using CmaSyscall = ssize_t (*)(pid_t pid, const iovec* local, unsigned long local_count,
                               const iovec* remote, unsigned long remote_count,
                               unsigned long flags);

struct CmaLimits {
  uint64_t batch_bytes = 4ull << 20;  // per system call, at most
  size_t max_iovecs = kMaxIovecs;     // per side per call, 1..kMaxIovecs
  // Check through the pidfd before each batch too, not only after. The
  // daemon must (it reads with CAP_SYS_PTRACE: the window in which a
  // reused pid could be read stays one call). A client reading with its
  // own rights may skip it: a reused pid names a process it may read
  // anyway, and the check after the call fails the copy.
  bool check_before = true;
};

// The other process and how the copy reaches it.
struct CmaTarget {
  pid_t pid = 0;
  int pidfd = -1;  // pins identity; see CmaCopy
  // /proc/<pid>/mem of the registered address space (ProcessBytes). When
  // set (and no `syscall` is injected), each batch goes through it, one
  // preadv/pwritev per remote iovec, instead of process_vm_*: those
  // resolve the pid's *current* program, so a client that exec()s a
  // setuid program after registering would have the daemon (which holds
  // CAP_SYS_PTRACE) read or write the privileged image; through this fd
  // the copy fails with FAILED_PRECONDITION instead. Writes through it
  // also reach read-only pages of the client's own mappings (as ptrace
  // does).
  int mem_fd = -1;
  uint64_t remote_base = 0;         // ProcessBytes::address
  std::byte* local_base = nullptr;  // HostBytes::base
  CmaDirection direction = CmaDirection::kRead;
  CmaSyscall syscall = nullptr;      // null: the real one
  std::string_view channel = "cma";  // for messages
};

// What one CmaCopy did: for the calibration and tests.
struct CmaCopyStats {
  uint64_t calls = 0;    // system calls made, resumptions included
  uint64_t batches = 0;  // batches issued
  uint64_t remote_iovecs = 0;
  uint64_t local_iovecs = 0;
};

// Copies `program` between target.local_base (this process) and
// target.remote_base in process target.pid. Checks `cancelled` before
// every batch (CANCELLED, nothing more moved). Checks through the pidfd
// before and after every batch that the process is alive (NOT_FOUND
// otherwise); see cma_copy.cc for why that pins identity. Errors:
// NOT_FOUND (the process exited), PERMISSION_DENIED (EPERM: the kernel's
// ptrace check refused), INVALID_ARGUMENT (EFAULT: the range named is not
// mapped in the process, or not writable for a write),
// RESOURCE_EXHAUSTED (ENOMEM), INTERNAL otherwise.
Status CmaCopy(const CopyProgram& program, const CmaTarget& target,
               const std::atomic<bool>* cancelled = nullptr, const CmaLimits& limits = {},
               CmaCopyStats* stats = nullptr);

// The iovec batches CmaCopy would issue for `program` against `target`
// (its addresses and direction; pid and pidfd unused), built once to be
// issued many times: FALCON-X memoizes this translation. Each batch is
// at most limits.max_iovecs iovecs a side and limits.batch_bytes bytes.
struct CmaBatches {
  struct Batch {
    size_t remote_begin = 0, remote_count = 0;
    size_t local_begin = 0, local_count = 0;
  };
  std::vector<iovec> remote, local;
  std::vector<Batch> batches;
};
CmaBatches BuildCmaBatches(const CopyProgram& program, const CmaTarget& target,
                           const CmaLimits& limits = {});

// Issues batches first, first + step, first + 2 * step, ... of `b` to
// target.pid as CmaCopy issues its own (short calls resumed, the pidfd
// checked, the same errors), so that several threads can share one copy.
Status IssueCmaBatches(const CmaBatches& b, const CmaTarget& target, size_t first = 0,
                       size_t step = 1, const CmaLimits& limits = {});

}  // namespace isometry
