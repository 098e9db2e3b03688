// How much memory this process may use: the machine's, or less where its
// cgroup caps it (a container's memory limit, a systemd unit's MemoryMax=).
// Calibration sizes its buffers by it, so that a daemon in a container with
// a memory limit is not killed by the kernel while it measures at start.
#pragma once

#include <cstdint>
#include <string>

namespace isometry {

// The smallest of the machine's memory (/proc/meminfo MemTotal) and every
// memory limit above this process in its cgroup hierarchy (cgroup v2
// memory.max of its cgroup and each parent; cgroup v1 the memory
// controller's hierarchical_memory_limit), read once. `root` prefixes every
// path read ("" on a real system; tests pass a folder that mimics one).
// When nothing can be read: 1 TiB (no bound known).
uint64_t MemoryLimitBytes();
uint64_t ReadMemoryLimitBytes(const std::string& root);

}  // namespace isometry
