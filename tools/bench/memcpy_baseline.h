// The memcpy baselines of the contiguous SYS->SYS row: one thread, and two
// threads each copying one half of the buffer, timed together from the
// start of both to the end of the later (the machine's real limit for one
// big copy on two cores).
//
// Memory: both take buffers the caller has already written (HostBuffer
// fills them at construction, so every page is faulted in), exactly the
// buffers the Isometry copy of the same round moves; neither times a page
// fault, a thread start or an allocation.
#pragma once

#include <cstddef>

namespace isometry::bench {

// Seconds of one memcpy(dst, src, bytes) on the calling thread.
double TimedMemcpy(std::byte* dst, const std::byte* src, size_t bytes);

// Seconds of the same bytes copied by two threads, half each (the split at
// a 4 KiB boundary). The helper thread is started and parked before the
// clock starts; the caller's thread copies the other half.
double TimedMemcpy2(std::byte* dst, const std::byte* src, size_t bytes);

}  // namespace isometry::bench
