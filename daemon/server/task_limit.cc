#include "daemon/server/task_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <fstream>
#include <sstream>
#include <utility>

namespace isometry {

namespace {

std::atomic<uint64_t> threads_refused{0};

// The first line of `path` as a number; nullopt for "max", a missing file
// or anything else.
std::optional<uint64_t> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
  if (ec != std::errc() || end != line.data() + line.size()) return std::nullopt;
  return v;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// This process's threads (/proc/self/status).
uint64_t OwnThreads() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoull(line.substr(8));
  }
  return 1;
}

std::optional<TaskHeadroom> FromCgroup() {
  const auto group = PidsCgroupOf(ReadAll("/proc/self/cgroup"));
  if (!group) return std::nullopt;
  const auto& [path, v1] = *group;
  for (const char* root :
       {v1 ? "/sys/fs/cgroup/pids" : "/sys/fs/cgroup", v1 ? "" : "/sys/fs/cgroup/unified"}) {
    if (*root == '\0') continue;
    const std::string dir = std::string(root) + path;
    const std::optional<uint64_t> max = ReadNumber(dir + "/pids.max");
    const std::optional<uint64_t> current = ReadNumber(dir + "/pids.current");
    if (!max || !current) continue;
    return TaskHeadroom{*max, *max > *current ? *max - *current : 0, "cgroup pids.max"};
  }
  return std::nullopt;
}

std::optional<TaskHeadroom> FromRlimit() {
  rlimit r{};
  // Root (CAP_SYS_RESOURCE, CAP_SYS_ADMIN) is not held to it.
  if (::getrlimit(RLIMIT_NPROC, &r) != 0 || r.rlim_cur == RLIM_INFINITY || ::getuid() == 0) {
    return std::nullopt;
  }
  // It counts every task of the uid; this process's are those known.
  const uint64_t used = OwnThreads();
  return TaskHeadroom{r.rlim_cur, r.rlim_cur > used ? r.rlim_cur - used : 0, "RLIMIT_NPROC"};
}

}  // namespace

std::optional<std::pair<std::string, bool>> PidsCgroupOf(std::string_view text) {
  std::optional<std::pair<std::string, bool>> v2;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(line.substr(c2 + 1));
    if (controllers.empty() && line.substr(0, c1) == "0") {
      v2 = std::pair{path, false};
      continue;
    }
    // "pids" as one of the comma-separated controllers.
    for (size_t start = 0; start <= controllers.size();) {
      const size_t comma = std::min(controllers.find(',', start), controllers.size());
      if (controllers.substr(start, comma - start) == "pids") return std::pair{path, true};
      start = comma + 1;
    }
  }
  return v2;
}

std::optional<TaskHeadroom> ReadTaskHeadroom() {
  std::optional<TaskHeadroom> cgroup = FromCgroup();
  std::optional<TaskHeadroom> rlim = FromRlimit();
  if (cgroup && rlim) return cgroup->free <= rlim->free ? cgroup : rlim;
  return cgroup ? cgroup : rlim;
}

void NoteThreadRefused() { threads_refused.fetch_add(1, std::memory_order_relaxed); }

uint64_t ThreadsRefused() { return threads_refused.load(std::memory_order_relaxed); }

uint64_t ConnectionThreadsFitting(uint64_t free) {
  const uint64_t reserve = std::max<uint64_t>(16, free / 8);
  return free > reserve + 2 ? (free - reserve) / 2 : 1;
}

}  // namespace isometry
