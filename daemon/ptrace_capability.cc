#include "daemon/ptrace_capability.h"

#include <linux/capability.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

#include "channels/channel_edges.h"
#include "core/group.h"
#include "core/strings.h"

namespace isometry {

namespace {

// kernel.yama.ptrace_scope, -1 without Yama. Read here, not asked of the
// cma channel: the daemon layer reaches channels only through the factory.
int YamaScope() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  return in >> scope ? scope : -1;
}

}  // namespace

bool HoldsPtraceCapability() {
  // The raw call: libcap is not a dependency for one bit.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_SYS_PTRACE)].effective & CAP_TO_MASK(CAP_SYS_PTRACE)) != 0;
}

std::optional<std::string> PtraceLossLine(bool holds_capability, bool has_cma_channel,
                                          int yama_scope, uid_t uid) {
  if (holds_capability || !has_cma_channel) return std::nullopt;
  // Yama 1 and 2 admit only ancestors or CAP_SYS_PTRACE: the daemon is no
  // client's ancestor, so then even its own user's clients are out of reach.
  const std::string reach =
      yama_scope >= 1
          ? StrCat("no client at all (kernel.yama.ptrace_scope ", yama_scope,
                   " admits only CAP_SYS_PTRACE)")
          : StrCat("only clients running as ", UserNameOf(uid).value_or("?"), " (uid ", uid, ")");
  return StrCat("without CAP_SYS_PTRACE: copies to and from clients' private memory (CMA) reach ",
                "every client that passes its own /proc/self/mem and maps when it registers "
                "memory (isometry's C++ and Python clients do); of other clients, ",
                reach,
                "; registering the private memory of any other fails PERMISSION_DENIED "
                "(pool, DSK and cluster copies are unaffected; see CMA across users in "
                "docs/operations/systemd.md and the drop-in share/isometry/isometryd-cma.conf)");
}

void LogPtraceLoss(const Config& config) {
  const bool cma = ReachesProcessMemory(config.runtime);
  if (auto line = PtraceLossLine(HoldsPtraceCapability(), cma, YamaScope(), ::geteuid())) {
    spdlog::warn("{}", *line);
  }
}

}  // namespace isometry
