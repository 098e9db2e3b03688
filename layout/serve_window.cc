#include "layout/serve_window.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace isometry::serve_window {

void InitHeader(Header& h, uint64_t token) {
  h.magic = kMagic;
  h.version = kVersion;
  h.window_bytes = kWindowBytes;
  h.token = token;
  h.lanes = kLanes;
  h.slots = kSlots;
  h.slot_bytes = kSlotBytes;
  h.program_bytes = kProgramBytes;
  h.areas_offset = kAreasOffset;
  h.header_bytes = sizeof(Header);
}

Status CheckHeader(const Header& h, uint64_t window_bytes, uint64_t token) {
  if (window_bytes != kWindowBytes) {
    return InvalidArgument("serve window of ", window_bytes,
                           " bytes (this library's: ", kWindowBytes, ")");
  }
  if (h.magic != kMagic || h.version != kVersion || h.window_bytes != kWindowBytes ||
      h.lanes != kLanes || h.slots != kSlots || h.slot_bytes != kSlotBytes ||
      h.program_bytes != kProgramBytes || h.areas_offset != kAreasOffset ||
      h.header_bytes != sizeof(Header)) {
    return InvalidArgument("serve window header: magic, version or geometry not this library's");
  }
  if (h.token != token) return InvalidArgument("serve window: not the window the lease named");
  return OkStatus();
}

std::byte* ProgramArea(std::byte* window, uint32_t lane) {
  return window + kAreasOffset + uint64_t{lane} * kAreaBytes;
}

std::byte* Slot(std::byte* window, uint32_t lane, uint32_t slot) {
  return ProgramArea(window, lane) + kProgramBytes + uint64_t{slot} * kSlotBytes;
}

void Relax() { _mm_pause(); }

void LeaveCpu(uint32_t cpu) {
  if (static_cast<uint32_t>(::sched_getcpu()) != cpu) return;
  cpu_set_t allowed, elsewhere;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0 || cpu >= CPU_SETSIZE ||
      !CPU_ISSET(cpu, &allowed) || CPU_COUNT(&allowed) < 2) {
    return;
  }
  elsewhere = allowed;
  CPU_CLR(cpu, &elsewhere);
  // Setting the mask migrates the thread now; the old mask back leaves it
  // where it went.
  if (::sched_setaffinity(0, sizeof elsewhere, &elsewhere) == 0) {
    (void)::sched_setaffinity(0, sizeof allowed, &allowed);
  }
}

// Not FUTEX_PRIVATE_FLAG: the words are shared between two processes.
void Wake(std::atomic<uint32_t>& w) {
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
                0);
}

void Wait(std::atomic<uint32_t>& w, uint32_t seen, uint32_t timeout_us) {
  timespec ts{static_cast<time_t>(timeout_us / 1000000),
              static_cast<long>(timeout_us % 1000000) * 1000};
  (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(&w), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace isometry::serve_window
