// A move-only owner of one io_uring instance (liburing), probed at run time.
//
// Uring::Create() sets up a ring, probes the kernel for the opcodes and
// registration calls the disk channels use, and records what it chose in
// UringInfo (Describe() is one log line). It either returns a working ring or
// an error naming the cause (io_uring disabled by sysctl or seccomp, an old
// kernel, a memlock limit); there is no half-built state.
//
// Thread safety: none. A ring belongs to one thread at a time (the disk
// channel's worker); moving it to another thread is fine between calls.
//
// The header keeps liburing out of its includes (io_uring is forward
// declared) so that code which only holds a ring does not need liburing's
// headers; code that prepares SQEs includes <liburing.h> itself and uses
// get().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

struct io_uring;
struct io_uring_sqe;
struct io_uring_cqe;

namespace isometry {

struct UringOptions {
  // Submission queue entries (rounded up to a power of two by the kernel);
  // the completion queue gets twice as many.
  unsigned entries = 32;
  // Try IORING_SETUP_COOP_TASKRUN (5.19+): completions are delivered when the
  // owning thread enters the kernel rather than by interrupting it. Falls back
  // to plain set-up where the kernel refuses it.
  bool coop_taskrun = true;
};

// What the probe found and what Create() chose.
struct UringInfo {
  unsigned sq_entries = 0;
  unsigned cq_entries = 0;
  uint32_t features = 0;          // IORING_FEAT_* the kernel reported
  bool coop_taskrun = false;      // set-up flag in use
  bool read_write = false;        // IORING_OP_READ / IORING_OP_WRITE (5.6+)
  bool fixed_read_write = false;  // IORING_OP_READ_FIXED / WRITE_FIXED
  // Filled by the Register*() calls: whether they succeeded, and why not.
  bool registered_buffer = false;
  bool registered_files = false;
  std::string notes;  // reasons for fallbacks, "; "-separated

  // One line for the log: "io_uring sq=32 cq=64 coop_taskrun fixed-buffer ...".
  std::string Describe() const;
};

class Uring {
 public:
  // Sets up a ring with `options`; fails with the errno of io_uring_setup
  // and a hint, or when the kernel lacks IORING_OP_READ/WRITE.
  static Result<Uring> Create(const UringOptions& options);

  Uring(Uring&& other) noexcept;
  Uring& operator=(Uring&& other) noexcept;
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;
  ~Uring();  // io_uring_queue_exit: the kernel cancels what is still queued

  io_uring* get() const { return ring_.get(); }
  const UringInfo& info() const { return info_; }

  // Registers [base, base + bytes) as fixed buffer 0 (for READ_FIXED /
  // WRITE_FIXED). On failure (e.g. RLIMIT_MEMLOCK) the ring stays usable and
  // the reason is appended to info().notes.
  Status RegisterBuffer(void* base, size_t bytes);
  // Registers a table of `slots` empty file slots (sparse where the kernel
  // has it, else a table of -1). Same failure behaviour.
  Status RegisterFileTable(unsigned slots);
  // Installs `fds` (-1 clears a slot) at [offset, offset + count) of the
  // table. Synchronous; does not wait for in-flight I/O (5.13+ kernels).
  Status UpdateFiles(unsigned offset, const int* fds, unsigned count);

  // The next free SQE, or null when the submission queue is full.
  io_uring_sqe* GetSqe();
  // Submits what was prepared and waits for at least `wait_nr` completions,
  // or until `timeout_ns` (> 0) passes. EINTR is retried; ETIME is success.
  Status SubmitAndWait(unsigned wait_nr, int64_t timeout_ns = 0);
  // A ready completion or null; MarkSeen() hands it back to the kernel.
  io_uring_cqe* PeekCqe();
  void MarkSeen(io_uring_cqe* cqe);

 private:
  struct Closer {
    void operator()(io_uring* ring) const;
  };
  Uring(std::unique_ptr<io_uring, Closer> ring, UringInfo info);

  std::unique_ptr<io_uring, Closer> ring_;
  UringInfo info_;
};

}  // namespace isometry
