// Whether the daemon may reach other users' processes by CMA, and the one
// log line at start that says what is off when it may not.
//
// CMA (process_vm_readv/writev, /proc/<pid>/maps) on a client's private
// memory passes the kernel's ptrace access check only for a process of the
// daemon's own uid under kernel.yama.ptrace_scope 0, unless the daemon holds
// CAP_SYS_PTRACE (channels/cma/client_process.h). The systemd unit grants
// it only through the opt-in drop-in share/isometry/isometryd-cma.conf
// (docs/operations/systemd.md, "CMA across users"), so a daemon started
// without it says so once instead of failing each such copy mysteriously.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "config/runtime_config.h"

namespace isometry {

// CAP_SYS_PTRACE in the effective set (capget); false if it cannot be read.
bool HoldsPtraceCapability();

// What a daemon with these facts cannot do, as one log line; nothing when
// it holds the capability or has no cma channel (no feature needs it).
// `yama_scope` is kernel.yama.ptrace_scope, -1 without Yama.
std::optional<std::string> PtraceLossLine(bool holds_capability, bool has_cma_channel,
                                          int yama_scope, uid_t uid);

// Logs PtraceLossLine for this process and `config` (a warning).
void LogPtraceLoss(const Config& config);

}  // namespace isometry
