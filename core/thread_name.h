// Names for the daemon's threads, so that `top -H`, `ps -T`, perf and gdb
// tell a channel's workers from the ring thread or a peer link's writer
// (docs/operations/tuning.md, "Threads: names and slices").
#pragma once

#include <string_view>

namespace isometry {

// Names the calling thread `name`: its first 15 bytes, the kernel's limit
// (a channel named by the operator may be cut short). Best effort: a name
// that cannot be set leaves the thread as it was.
void NameThisThread(std::string_view name);

}  // namespace isometry
