#include "tools/bench/machine.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "tools/bench/memcpy_baseline.h"

namespace isometry::bench {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "unknown";
}

std::string Escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

}  // namespace

Machine MeasureMachine() {
  Machine m;
  m.cpu = CpuModel();
  m.cpus = std::thread::hardware_concurrency();
  utsname u{};
  m.kernel = uname(&u) == 0 ? u.release : "unknown";
  constexpr size_t kBytes = size_t{64} << 20;
  // Written first, so no page fault is timed.
  auto src = std::make_unique<std::byte[]>(kBytes);
  auto dst = std::make_unique<std::byte[]>(kBytes);
  std::memset(src.get(), 1, kBytes);
  std::memset(dst.get(), 2, kBytes);
  double one = 1e9, two = 1e9;
  for (int i = 0; i < 5; ++i) {
    one = std::min(one, TimedMemcpy(dst.get(), src.get(), kBytes));
    two = std::min(two, TimedMemcpy2(dst.get(), src.get(), kBytes));
  }
  m.memcpy_gbps_1 = kBytes / one / 1e9;
  m.memcpy_gbps_2 = kBytes / two / 1e9;
  return m;
}

std::string MachineJson(const Machine& m) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"cpu\":\"%s\",\"cpus\":%u,\"kernel\":\"%s\",\"memcpy_gbps_1\":%.3g,"
                "\"memcpy_gbps_2\":%.3g}",
                Escaped(m.cpu).c_str(), m.cpus, Escaped(m.kernel).c_str(), m.memcpy_gbps_1,
                m.memcpy_gbps_2);
  return buf;
}

std::string MachineLine(const Machine& m) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "machine: %s, %u CPUs, Linux %s, memcpy %.3g GB/s one thread, %.3g GB/s two",
                m.cpu.c_str(), m.cpus, m.kernel.c_str(), m.memcpy_gbps_1, m.memcpy_gbps_2);
  return buf;
}

}  // namespace isometry::bench
