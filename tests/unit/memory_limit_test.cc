// How much memory the process may use (core/memory_limit.h), read from
// folders laid out as /proc and /sys/fs/cgroup are under cgroup v2, v1 and
// the hybrid of both, as a container or a systemd unit sees them.
#include "core/memory_limit.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "unit/temp_dir.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using testing::TempDir;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

void Write(const std::string& root, const std::string& path, const std::string& text) {
  const std::filesystem::path p = root + path;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A machine of 24 GiB whose process is in `cgroup` (/proc/self/cgroup).
void Machine(const std::string& root, const std::string& cgroup) {
  Write(root, "/proc/meminfo", "MemTotal:       25165824 kB\nMemFree:        1000 kB\n");
  Write(root, "/proc/self/cgroup", cgroup);
}

}  // namespace

TEST_CASE("without a limit the machine's memory bounds the process") {
  TempDir d;
  Machine(d.path, "0::/user.slice/session-1.scope\n");
  Write(d.path, "/sys/fs/cgroup/user.slice/session-1.scope/memory.max", "max\n");
  CHECK(ReadMemoryLimitBytes(d.path) == 24 * kGiB);
  // Nothing readable at all: no bound known.
  TempDir empty;
  CHECK(ReadMemoryLimitBytes(empty.path) == 1ull << 40);
}

TEST_CASE("cgroup v2: the process's memory.max and every parent's") {
  TempDir d;
  Machine(d.path, "0::/kubepods/pod1/ctr\n");
  Write(d.path, "/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
  Write(d.path, "/sys/fs/cgroup/kubepods/pod1/memory.max", "1610612736\n");  // the pod's 1536Mi
  Write(d.path, "/sys/fs/cgroup/kubepods/memory.max", "8589934592\n");
  CHECK(ReadMemoryLimitBytes(d.path) == 1536ull << 20);
  // A container in its own cgroup namespace sees its cgroup as the root.
  TempDir ns;
  Machine(ns.path, "0::/\n");
  Write(ns.path, "/sys/fs/cgroup/memory.max", "536870912\n");
  CHECK(ReadMemoryLimitBytes(ns.path) == 512ull << 20);
}

TEST_CASE("cgroup v1 and the hybrid: the memory controller's hierarchical limit") {
  TempDir d;
  // runc on v1: the host's path, and the container's cgroup mounted at the
  // controller's top; v2 beside it at /sys/fs/cgroup/unified limits nothing.
  Machine(d.path, "12:cpu,cpuacct:/libpod_parent/ctr\n5:memory:/libpod_parent/ctr\n0::/\n");
  Write(d.path, "/sys/fs/cgroup/memory/memory.stat",
        "cache 0\nrss 0\nhierarchical_memory_limit 1610612736\nhierarchical_memsw_limit 1\n");
  Write(d.path, "/sys/fs/cgroup/unified/memory.max", "max\n");
  CHECK(ReadMemoryLimitBytes(d.path) == 1536ull << 20);
  // No limit: v1 writes the page counter's maximum, which bounds nothing.
  TempDir none;
  Machine(none.path, "5:memory:/user.slice\n");
  Write(none.path, "/sys/fs/cgroup/memory/user.slice/memory.stat",
        "hierarchical_memory_limit 9223372036854771712\n");
  CHECK(ReadMemoryLimitBytes(none.path) == 24 * kGiB);
}

TEST_CASE("this process's limit is at most the machine's memory") {
  const uint64_t limit = MemoryLimitBytes();
  CHECK(limit > 0);
  CHECK(limit <= ReadMemoryLimitBytes(""));
}

}  // namespace ISOMETRY_TEST_FILE
