#include "procmem/cma_copy.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <string>

#include "core/strings.h"
#include "procmem/pidfd.h"

namespace isometry {
namespace {

ssize_t RealRead(pid_t pid, const iovec* local, unsigned long local_count, const iovec* remote,
                 unsigned long remote_count, unsigned long flags) {
  return ::process_vm_readv(pid, local, local_count, remote, remote_count, flags);
}
ssize_t RealWrite(pid_t pid, const iovec* local, unsigned long local_count, const iovec* remote,
                  unsigned long remote_count, unsigned long flags) {
  return ::process_vm_writev(pid, local, local_count, remote, remote_count, flags);
}

uint64_t Address(const iovec& v) { return reinterpret_cast<uintptr_t>(v.iov_base); }

// The batch through /proc/<pid>/mem (CmaTarget::mem_fd), as process_vm_*
// would move it: one preadv/pwritev per remote iovec, with the local
// iovecs that cover its bytes; stops at the first short call and returns
// the bytes moved, or -1 with errno when the first call moved nothing.
// EIO (what the file says for an unmapped address) becomes EFAULT, and 0
// bytes from a live process ENOEXEC: its address space is gone (exec).
ssize_t MemCall(int fd, bool read, const iovec* local, size_t local_count, const iovec* remote,
                size_t remote_count) {
  std::array<iovec, kMaxIovecs> pieces;  // filled before use: no 16 KiB memset a call
  size_t li = 0;
  uint64_t used = 0;  // bytes of local[li] already paired
  ssize_t total = 0;
  for (size_t ri = 0; ri < remote_count; ++ri) {
    size_t n = 0;
    for (uint64_t need = remote[ri].iov_len; need > 0 && li < local_count;) {
      const uint64_t take = std::min<uint64_t>(need, local[li].iov_len - used);
      pieces[n++] = {static_cast<std::byte*>(local[li].iov_base) + used, take};
      need -= take;
      used += take;
      if (used == local[li].iov_len) {
        ++li;
        used = 0;
      }
    }
    const auto at = static_cast<off_t>(Address(remote[ri]));
    const ssize_t got = read ? ::preadv(fd, pieces.data(), static_cast<int>(n), at)
                             : ::pwritev(fd, pieces.data(), static_cast<int>(n), at);
    if (got <= 0) {
      if (total > 0) return total;
      if (got == 0) errno = ENOEXEC;
      if (got < 0 && errno == EIO) errno = EFAULT;
      return -1;
    }
    total += got;
    if (static_cast<uint64_t>(got) < remote[ri].iov_len) return total;
  }
  return total;
}
// Remote addresses are the other process's: the kernel reads them, this
// process never dereferences them, so the cast costs no optimization.
void* Pointer(uint64_t address) {
  return reinterpret_cast<void*>(  // NOLINT(performance-no-int-to-ptr)
      static_cast<uintptr_t>(address));
}

// Drops the first `n` bytes of the iovecs from `at` on (a partial call).
void Advance(iovec* v, size_t& at, uint64_t n) {
  while (n > 0) {
    if (n < v[at].iov_len) {
      v[at].iov_base = Pointer(Address(v[at]) + n);
      v[at].iov_len -= n;
      return;
    }
    n -= v[at].iov_len;
    ++at;
  }
}

// Collects runs into iovec batches and issues them (see cma_copy.h).
class Batcher {
 public:
  // `record`: collect the batches there instead of issuing them.
  Batcher(const CmaTarget& target, const std::atomic<bool>* cancelled, const CmaLimits& limits,
          CmaCopyStats& stats, CmaBatches* record = nullptr)
      : t_(target),
        cancelled_(cancelled),
        batch_bytes_(limits.batch_bytes ? limits.batch_bytes : 1),
        max_iovecs_(std::clamp<size_t>(limits.max_iovecs, 1, kMaxIovecs)),
        call_(target.syscall                            ? target.syscall
              : target.direction == CmaDirection::kRead ? RealRead
                                                        : RealWrite),
        use_mem_(!target.syscall && target.mem_fd >= 0),
        check_before_(limits.check_before),
        stats_(stats),
        record_(record) {}

  // One run: `len` bytes at `remote` in the other process, at `local` here.
  Status Add(uint64_t remote, uint64_t local, uint64_t len) {
    while (len > 0) {
      const uint64_t piece = std::min(len, batch_bytes_ - bytes_);
      const bool join_remote =
          nr_ && Address(remote_[nr_ - 1]) + remote_[nr_ - 1].iov_len == remote;
      const bool join_local = nl_ && Address(local_[nl_ - 1]) + local_[nl_ - 1].iov_len == local;
      if ((!join_remote && nr_ == max_iovecs_) || (!join_local && nl_ == max_iovecs_)) {
        ISO_RETURN_IF_ERROR(Issue());
        continue;
      }
      Append(remote_, nr_, join_remote, remote, piece);
      Append(local_, nl_, join_local, local, piece);
      bytes_ += piece;
      remote += piece;
      local += piece;
      len -= piece;
      if (bytes_ == batch_bytes_) ISO_RETURN_IF_ERROR(Issue());
    }
    return OkStatus();
  }

  // Issues what is collected; also the first cancellation and liveness
  // check of a program with no bytes.
  Status Finish() { return bytes_ ? Issue() : record_ ? OkStatus() : Check(); }

  // Issues one recorded batch.
  Status Replay(const CmaBatches& b, const CmaBatches::Batch& batch) {
    std::copy_n(b.remote.begin() + static_cast<ptrdiff_t>(batch.remote_begin), batch.remote_count,
                remote_.begin());
    std::copy_n(b.local.begin() + static_cast<ptrdiff_t>(batch.local_begin), batch.local_count,
                local_.begin());
    nr_ = batch.remote_count;
    nl_ = batch.local_count;
    bytes_ = 0;
    for (size_t i = 0; i < nr_; ++i) bytes_ += remote_[i].iov_len;
    return Issue();
  }

 private:
  static void Append(std::array<iovec, kMaxIovecs>& v, size_t& n, bool join, uint64_t address,
                     uint64_t len) {
    if (join) {
      v[n - 1].iov_len += len;
    } else {
      v[n++] = iovec{Pointer(address), len};
    }
  }

  Status Check() const {
    if (cancelled_ && cancelled_->load(std::memory_order_acquire)) {
      return absl::CancelledError(StrCat(t_.channel, ": request cancelled"));
    }
    return Alive();
  }

  // Pinning identity. process_vm_* take a pid, not a pidfd, so the kernel
  // resolves t_.pid afresh at each call. The pidfd refers to the process
  // that registered (ClientProcess::Open checked it); a pid is reused only
  // after its process has exited AND been reaped, and a pidfd polls
  // readable from the exit on. So if the pidfd's process is alive after a
  // call, the pid was bound to it from pidfd_open through the whole call,
  // and every byte the call moved was that process's: checking after the
  // call is what proves a successful request touched the right process.
  // When the check after a call finds the process gone, the request
  // fails (its bytes are not used) — and for the call itself to have
  // reached another process, within the one call since the check before
  // it, the client would have had to exit, be reaped, and the kernel to
  // hand its pid out again, which takes allocating every other free pid
  // first (pids are allocated cyclically up to kernel.pid_max). The
  // check before each batch keeps that window to one call.
  Status Alive() const {
    ISO_ASSIGN_OR_RETURN(bool exited, PidfdExited(t_.pidfd));
    if (exited) return NotFound(t_.channel, ": process ", t_.pid, " has exited");
    return OkStatus();
  }

  Status CallFailed(int err, const iovec& at) const {
    const char* verb = t_.direction == CmaDirection::kRead ? "read" : "write";
    switch (err) {
      case ESRCH:
        return NotFound(t_.channel, ": process ", t_.pid, " has exited");
      case EPERM:
        return PermissionDenied(t_.channel, ": the kernel does not let this daemon ", verb,
                                " process ", t_.pid,
                                " (ptrace access check: CAP_SYS_PTRACE, kernel.yama.ptrace_scope)");
      case EFAULT:
        return InvalidArgument(t_.channel, ": could not ", verb, " ", at.iov_len, " bytes at ",
                               HexAddress(Address(at)), " in process ", t_.pid, ": not mapped",
                               t_.direction == CmaDirection::kWrite ? " writable" : "");
      case ENOEXEC:
        return FailedPrecondition(t_.channel, ": process ", t_.pid,
                                  " has replaced its program (exec) since it registered its "
                                  "memory; register again from the new program");
      case ENOMEM:
        return ResourceExhausted(t_.channel, ": out of memory for a ", verb, " of process ",
                                 t_.pid);
      default:
        return Internal(t_.channel, ": process_vm_", verb, "v of process ", t_.pid, ": ",
                        ErrnoString(err));
    }
  }

  // Keeps the collected batch in record_.
  Status Record() {
    record_->batches.push_back({record_->remote.size(), nr_, record_->local.size(), nl_});
    record_->remote.insert(record_->remote.end(), remote_.begin(),
                           remote_.begin() + static_cast<ptrdiff_t>(nr_));
    record_->local.insert(record_->local.end(), local_.begin(),
                          local_.begin() + static_cast<ptrdiff_t>(nl_));
    nr_ = nl_ = 0;
    bytes_ = 0;
    return OkStatus();
  }

  Status Issue() {
    if (record_) return Record();
    if (check_before_) {
      ISO_RETURN_IF_ERROR(Check());
    } else if (cancelled_ && cancelled_->load(std::memory_order_acquire)) {
      return absl::CancelledError(StrCat(t_.channel, ": request cancelled"));
    }
    ++stats_.batches;
    stats_.remote_iovecs += nr_;
    stats_.local_iovecs += nl_;
    size_t ri = 0, li = 0;
    uint64_t left = bytes_;
    Status result = OkStatus();
    while (left > 0) {
      ++stats_.calls;
      const ssize_t n = use_mem_ ? MemCall(t_.mem_fd, t_.direction == CmaDirection::kRead,
                                           &local_[li], nl_ - li, &remote_[ri], nr_ - ri)
                                 : call_(t_.pid, &local_[li], nl_ - li, &remote_[ri], nr_ - ri, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // No progress: the first remaining remote byte is unreachable
        // (the kernel stops there; a partial call returned the bytes
        // before it).
        const int err = n < 0 ? errno : EFAULT;
        result = CallFailed(err, remote_[ri]);
        // An address space that is gone is an exec, or an exit still
        // under way (the memory goes before the pidfd reports the exit):
        // the task's PF_EXITING tells which.
        if (err == ENOEXEC) {
          ISO_ASSIGN_OR_RETURN(bool exiting, ProcessExiting(t_.pid, t_.pidfd));
          if (exiting) result = NotFound(t_.channel, ": process ", t_.pid, " has exited");
        }
        break;
      }
      if (static_cast<uint64_t>(n) > left) {
        result = Internal(t_.channel, ": the kernel reports ", n, " bytes moved of ", left);
        break;
      }
      Advance(remote_.data(), ri, static_cast<uint64_t>(n));
      Advance(local_.data(), li, static_cast<uint64_t>(n));
      left -= static_cast<uint64_t>(n);
    }
    nr_ = nl_ = 0;
    bytes_ = 0;
    // After the call, also when it failed: an exit explains ESRCH and
    // EFAULT (the mappings go first) better than they do.
    ISO_RETURN_IF_ERROR(Alive());
    return result;
  }

  const CmaTarget& t_;
  const std::atomic<bool>* cancelled_;
  const uint64_t batch_bytes_;
  const size_t max_iovecs_;
  const CmaSyscall call_;
  const bool use_mem_;  // through the pinned address space (CmaTarget::mem_fd)
  const bool check_before_;
  CmaCopyStats& stats_;
  CmaBatches* const record_;
  // Filled before use: a Batcher per request must not cost a 32 KiB memset.
  std::array<iovec, kMaxIovecs> remote_;
  std::array<iovec, kMaxIovecs> local_;
  size_t nr_ = 0, nl_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace

namespace {

// Feeds every run of `program` to `batcher`.
Status WalkRuns(const CopyProgram& program, const CmaTarget& target, Batcher& batcher) {
  const bool read = target.direction == CmaDirection::kRead;
  const uint64_t local_base = reinterpret_cast<uintptr_t>(target.local_base);
  for (const CopyOp& op : program.ops) {
    bool empty = op.run_bytes == 0;
    for (int k = 0; k < op.num_loops; ++k) empty |= op.loops[k].count == 0;
    if (empty) continue;
    // Offsets wrap modulo 2^64 like the strides (copy_program.h).
    uint64_t src = op.src_offset, dst = op.dst_offset;
    std::array<uint64_t, kMaxCopyLoops> index{};
    while (true) {
      const uint64_t remote = target.remote_base + (read ? src : dst);
      const uint64_t local = local_base + (read ? dst : src);
      ISO_RETURN_IF_ERROR(batcher.Add(remote, local, op.run_bytes));
      int k = op.num_loops - 1;
      for (; k >= 0; --k) {
        const CopyLoop& loop = op.loops[k];
        if (++index[k] < loop.count) {
          src += loop.src_stride;
          dst += loop.dst_stride;
          break;
        }
        src -= (loop.count - 1) * loop.src_stride;
        dst -= (loop.count - 1) * loop.dst_stride;
        index[k] = 0;
      }
      if (k < 0) break;
    }
  }
  return batcher.Finish();
}

}  // namespace

Status CmaCopy(const CopyProgram& program, const CmaTarget& target,
               const std::atomic<bool>* cancelled, const CmaLimits& limits, CmaCopyStats* stats) {
  CmaCopyStats ignored;
  Batcher batcher(target, cancelled, limits, stats ? *stats : ignored);
  return WalkRuns(program, target, batcher);
}

CmaBatches BuildCmaBatches(const CopyProgram& program, const CmaTarget& target,
                           const CmaLimits& limits) {
  CmaBatches out;
  CmaCopyStats ignored;
  Batcher batcher(target, nullptr, limits, ignored, &out);
  // Recording never fails: nothing is issued.
  (void)WalkRuns(program, target, batcher);
  return out;
}

Status IssueCmaBatches(const CmaBatches& b, const CmaTarget& target, size_t first, size_t step,
                       const CmaLimits& limits) {
  CmaCopyStats ignored;
  Batcher batcher(target, nullptr, limits, ignored);
  for (size_t i = first; i < b.batches.size(); i += std::max<size_t>(step, 1)) {
    ISO_RETURN_IF_ERROR(batcher.Replay(b, b.batches[i]));
  }
  return OkStatus();
}

}  // namespace isometry
