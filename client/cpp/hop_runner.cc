#include "client/cpp/hop_runner.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "core/strings.h"
#include "layout/executor.h"

namespace isometry::client {

using hop_window::Direction;
using hop_window::DoneEntry;
using hop_window::kHopEntries;
using hop_window::WorkEntry;

Result<std::unique_ptr<HopRunner>> HopRunner::Map(int fd, uint64_t bytes) {
  if (bytes < sizeof(hop_window::HopWindowHeader)) {
    return InvalidArgument("hop window of ", bytes, " bytes is smaller than its header");
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Internal("cannot map the hop window: ", ErrnoString(errno));
  std::unique_ptr<HopRunner> r(new HopRunner());
  r->base_ = static_cast<std::byte*>(p);
  r->bytes_ = bytes;
  r->header_ = static_cast<hop_window::HopWindowHeader*>(p);
  ISO_RETURN_IF_ERROR(hop_window::CheckHeader(*r->header_, bytes));
  hop_window::HopWindowHeader& w = *r->header_;
  r->work_ = {w.work, kHopEntries, &w.work_head, &w.work_tail};
  r->done_ = {w.done, kHopEntries, &w.done_head, &w.done_tail};
  return r;
}

HopRunner::~HopRunner() {
  if (base_) munmap(base_, bytes_);
}

bool HopRunner::Pending() const { return work_.Waiting(); }

Status HopRunner::RunOne(const WorkEntry& e) {
  const hop_window::HopWindowHeader& h = *header_;
  if (e.program_slot >= kHopEntries || e.program_bytes > h.arena_slot_bytes ||
      e.direction > static_cast<uint32_t>(Direction::kFromClient)) {
    return InvalidArgument("malformed hop work entry");
  }
  ISO_ASSIGN_OR_RETURN(
      CopyProgram program,
      hop_window::DecodeProgram(base_ + h.arena_offset + e.program_slot * h.arena_slot_bytes,
                                e.program_ops, e.program_bytes));
  if (program.bytes != e.bytes) return InvalidArgument("hop program size does not match");
  // The window's side must stay inside the data area. The other side is
  // this process's memory at an address the daemon took from a range this
  // session registered, as a CMA copy would have written it.
  const bool into_client = e.direction == static_cast<uint32_t>(Direction::kIntoClient);
  const std::optional<hop_window::Span> span = hop_window::SideSpan(program, into_client);
  const __int128 lo = static_cast<__int128>(e.window_offset) + (span ? span->lo : 0);
  const __int128 hi = static_cast<__int128>(e.window_offset) + (span ? span->hi : 0);
  if (!span || lo < static_cast<__int128>(h.data_offset) ||
      hi > static_cast<__int128>(h.data_offset) + h.data_bytes) {
    return OutOfRange("hop program reaches outside the window's data area");
  }
  std::byte* window = base_ + e.window_offset;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the address of a registered range, as sent
  auto* mine = reinterpret_cast<std::byte*>(static_cast<uintptr_t>(e.address));
  if (into_client) {
    ExecuteProgram(program, window, mine);
  } else {
    ExecuteProgram(program, mine, window);
  }
  return OkStatus();
}

int HopRunner::RunPending() {
  std::lock_guard lock(mu_);
  // More than a ring ahead: not the daemon this library speaks to; run
  // nothing (the daemon then times the work out).
  const uint32_t ready = work_.Ready(work_.tail()).value_or(0);
  int n = 0;
  for (; n < static_cast<int>(ready); ++n) {
    const WorkEntry e = work_.Take();
    const Status s = RunOne(e);
    (s.ok() ? ran_ : refused_).fetch_add(1, std::memory_order_relaxed);
    work_.Publish();
    DoneEntry d{};
    d.id = e.id;
    d.code = static_cast<int32_t>(s.code());
    done_.Push(d);
  }
  if (n > 0) {
    // Not private: the daemon sleeps on this word in its own mapping.
    (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(&header_->done_tail.value), FUTEX_WAKE,
                  INT_MAX, nullptr, nullptr, 0);
  }
  return n;
}

}  // namespace isometry::client
