#include "channels/disk/uring.h"

#include <liburing.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/strings.h"

namespace isometry {

namespace {

void AddNote(std::string* notes, const std::string& note) {
  if (!notes->empty()) notes->append("; ");
  notes->append(note);
}

}  // namespace

void Uring::Closer::operator()(io_uring* ring) const {
  io_uring_queue_exit(ring);
  delete ring;
}

Uring::Uring(std::unique_ptr<io_uring, Closer> ring, UringInfo info)
    : ring_(std::move(ring)), info_(std::move(info)) {}
Uring::Uring(Uring&& other) noexcept = default;
Uring& Uring::operator=(Uring&& other) noexcept = default;
Uring::~Uring() = default;

std::string UringInfo::Describe() const {
  std::string s = StrCat("io_uring sq=", sq_entries, " cq=", cq_entries);
  if (coop_taskrun) s += " coop_taskrun";
  s += registered_buffer ? " fixed-buffer" : " no-fixed-buffer";
  s += registered_files ? " fixed-files" : " no-fixed-files";
  if (!notes.empty()) StrAppend(&s, " (", notes, ")");
  return s;
}

Result<Uring> Uring::Create(const UringOptions& options) {
  auto ring = std::unique_ptr<io_uring, Closer>(new io_uring{});
  UringInfo info;
  io_uring_params params{};
  auto init = [&](uint32_t flags) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_CQSIZE | flags;
    params.cq_entries = 2 * options.entries;
    return io_uring_queue_init_params(options.entries, ring.get(), &params);
  };
  int rc = -EINVAL;
  if (options.coop_taskrun) {
    rc = init(IORING_SETUP_COOP_TASKRUN);
    info.coop_taskrun = rc == 0;
    if (rc == -EINVAL) AddNote(&info.notes, "kernel refused IORING_SETUP_COOP_TASKRUN");
  }
  if (rc == -EINVAL) rc = init(0);  // not asked for, or refused: plain set-up
  if (rc < 0) {
    // The ring was never set up: do not run queue_exit on it.
    delete ring.release();
    const char* hint = (rc == -EPERM || rc == -ENOSYS)
                           ? " (io_uring disabled: kernel.io_uring_disabled sysctl, seccomp, or a "
                             "kernel without CONFIG_IO_URING)"
                           : (rc == -ENOMEM ? " (RLIMIT_MEMLOCK too low for the rings?)" : "");
    return Status(absl::ErrnoToStatusCode(-rc), StrCat("io_uring_setup(", options.entries,
                                                       " entries): ", ErrnoString(-rc), hint));
  }
  info.sq_entries = params.sq_entries;
  info.cq_entries = params.cq_entries;
  info.features = params.features;

  io_uring_probe* probe = io_uring_get_probe_ring(ring.get());
  if (probe == nullptr) {
    return FailedPrecondition("io_uring: the kernel cannot be probed for opcodes (older than 5.6)");
  }
  info.read_write = io_uring_opcode_supported(probe, IORING_OP_READ) &&
                    io_uring_opcode_supported(probe, IORING_OP_WRITE);
  info.fixed_read_write = io_uring_opcode_supported(probe, IORING_OP_READ_FIXED) &&
                          io_uring_opcode_supported(probe, IORING_OP_WRITE_FIXED);
  io_uring_free_probe(probe);
  if (!info.read_write) {
    return FailedPrecondition("io_uring: the kernel lacks IORING_OP_READ/IORING_OP_WRITE (5.6+)");
  }
  return Uring(std::move(ring), std::move(info));
}

Status Uring::RegisterBuffer(void* base, size_t bytes) {
  if (!info_.fixed_read_write) {
    AddNote(&info_.notes, "no READ_FIXED/WRITE_FIXED opcodes");
    return FailedPrecondition("io_uring: no fixed-buffer opcodes");
  }
  iovec iov{base, bytes};
  const int rc = io_uring_register_buffers(ring_.get(), &iov, 1);
  if (rc < 0) {
    AddNote(&info_.notes, StrCat("registering the staging buffer: ", ErrnoString(-rc)));
    return Status(absl::ErrnoToStatusCode(-rc),
                  StrCat("io_uring_register_buffers: ", ErrnoString(-rc)));
  }
  info_.registered_buffer = true;
  return OkStatus();
}

Status Uring::RegisterFileTable(unsigned slots) {
  int rc = io_uring_register_files_sparse(ring_.get(), slots);
  if (rc == -EINVAL) {  // before 5.19: a table of -1 does the same
    std::vector<int> empty(slots, -1);
    rc = io_uring_register_files(ring_.get(), empty.data(), slots);
  }
  if (rc < 0) {
    AddNote(&info_.notes, StrCat("registering a file table: ", ErrnoString(-rc)));
    return Status(absl::ErrnoToStatusCode(-rc),
                  StrCat("io_uring_register_files: ", ErrnoString(-rc)));
  }
  info_.registered_files = true;
  return OkStatus();
}

Status Uring::UpdateFiles(unsigned offset, const int* fds, unsigned count) {
  const int rc = io_uring_register_files_update(ring_.get(), offset, fds, count);
  if (rc < 0) {
    return Status(absl::ErrnoToStatusCode(-rc),
                  StrCat("io_uring_register_files_update: ", ErrnoString(-rc)));
  }
  return OkStatus();
}

io_uring_sqe* Uring::GetSqe() { return io_uring_get_sqe(ring_.get()); }

Status Uring::SubmitAndWait(unsigned wait_nr, int64_t timeout_ns) {
  while (true) {
    int rc;
    if (timeout_ns > 0) {
      __kernel_timespec ts{timeout_ns / 1000000000, timeout_ns % 1000000000};
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_submit_and_wait_timeout(ring_.get(), &cqe, wait_nr, &ts, nullptr);
      if (rc == -ETIME) return OkStatus();
    } else {
      rc = io_uring_submit_and_wait(ring_.get(), wait_nr);
    }
    if (rc >= 0) return OkStatus();
    if (rc == -EINTR) continue;
    return Status(absl::ErrnoToStatusCode(-rc), StrCat("io_uring_enter: ", ErrnoString(-rc)));
  }
}

io_uring_cqe* Uring::PeekCqe() {
  io_uring_cqe* cqe = nullptr;
  return io_uring_peek_cqe(ring_.get(), &cqe) == 0 ? cqe : nullptr;
}

void Uring::MarkSeen(io_uring_cqe* cqe) { io_uring_cqe_seen(ring_.get(), cqe); }

}  // namespace isometry
