// daemon.cpu_latency_us: a CPU wake-up latency request (the kernel's PM
// QoS interface, /dev/cpu_dma_latency) held while the daemon runs.
//
// Every small copy hands work between threads (the ring thread, a
// channel's worker, the client), and each hand-off wakes an idle core.
// How long that takes is the idle state the core sleeps in: a condition
// variable round trip between two threads can take ten times longer with
// idle cores halting than with this request at 0
// (docs/benchmarks/design-measurements.md, "Wake-ups"). A request keeps every core of
// the node out of idle states slower to leave than it asks for, which
// costs power (and, in a VM, host CPU): it is the operator's choice, off
// unless configured, as tuned's latency-performance profile makes it.
//
// The request lasts while its file descriptor is open: the kernel drops it
// when the daemon exits, however it exits.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

inline constexpr char kCpuLatencyDevice[] = "/dev/cpu_dma_latency";

// Holds a request for wake-ups within `us` microseconds until the returned
// descriptor is closed. An error names daemon.cpu_latency_us and says what
// to change (the device is root's, mode 0600, on most systems).
Result<UniqueFd> HoldCpuLatency(uint32_t us, const std::string& device = kCpuLatencyDevice);

// For --check-config: the daemon could open `device` for writing (changes
// nothing).
Status CheckCpuLatencyDevice(const std::string& device = kCpuLatencyDevice);

// The node's effective request now, in microseconds (the smallest held by
// any process; the kernel's default when none is), read from `device`.
Result<int32_t> CurrentCpuLatency(const std::string& device = kCpuLatencyDevice);

}  // namespace isometry
