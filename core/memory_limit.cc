#include "core/memory_limit.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/status.h"
#include "core/strings.h"

namespace isometry {

namespace {

constexpr uint64_t kUnknown = 1ull << 40;

// The first number in `path` after `key` (a "key value" line), or in the
// file's first word when `key` is empty; 0 when absent or "max".
uint64_t ReadNumber(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream words(line);
    std::string first;
    if (!(words >> first)) continue;
    if (key.empty()) {
      return first == "max" ? 0 : std::strtoull(first.c_str(), nullptr, 10);
    }
    if (first != key) continue;
    uint64_t v = 0;
    words >> v;
    return v;
  }
  return 0;
}

// A limit as the kernel writes "none": 0 or a value near 2^63 (v1's
// PAGE_COUNTER_MAX in bytes), which bounds nothing.
uint64_t Bound(uint64_t v) { return v == 0 || v >= (1ull << 60) ? kUnknown : v; }

// cgroup v2: memory.max of the process's cgroup and of each parent, under
// the unified mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified beside v1).
uint64_t V2Limit(const std::string& root, const std::string& path) {
  uint64_t limit = kUnknown;
  for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    std::string dir = path;
    while (true) {
      limit = std::min(limit, Bound(ReadNumber(StrCat(root, mount, dir, "/memory.max"), "")));
      if (dir.empty() || dir == "/") break;
      dir = dir.substr(0, dir.find_last_of('/'));
    }
  }
  return limit;
}

// cgroup v1: the memory controller's hierarchical limit (its own and its
// parents'), in the process's cgroup as the host names it, or at the
// mount's top where a container sees only its own cgroup there.
uint64_t V1Limit(const std::string& root, const std::string& path) {
  uint64_t limit = kUnknown;
  for (const std::string& dir : {path, std::string()}) {
    const std::string stat = StrCat(root, "/sys/fs/cgroup/memory", dir, "/memory.stat");
    limit = std::min(limit, Bound(ReadNumber(stat, "hierarchical_memory_limit")));
  }
  return limit;
}

}  // namespace

uint64_t ReadMemoryLimitBytes(const std::string& root) {
  uint64_t limit = Bound(ReadNumber(root + "/proc/meminfo", "MemTotal:") * 1024);
  std::ifstream cgroups(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    // "ID:CONTROLLERS:PATH"; v2's is "0::PATH".
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (controllers.empty()) {
      limit = std::min(limit, V2Limit(root, path));
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      limit = std::min(limit, V1Limit(root, path));
    }
  }
  return limit;
}

uint64_t MemoryLimitBytes() {
  static const uint64_t bytes = ReadMemoryLimitBytes("");
  return bytes;
}

}  // namespace isometry
