#include "daemon/server/metrics_process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace isometry {

namespace {

std::optional<std::string> ReadWhole(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::optional<double> BootTime() {
  const std::optional<std::string> stat = ReadWhole("/proc/stat");
  if (!stat) return std::nullopt;
  const size_t at = stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  uint64_t btime = 0;
  const char* begin = stat->data() + at + 7;
  if (std::from_chars(begin, stat->data() + stat->size(), btime).ec != std::errc()) {
    return std::nullopt;
  }
  return static_cast<double>(btime);
}

uint64_t OpenFds() {
  std::error_code ec;
  uint64_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return n > 0 ? n - 1 : 0;  // the iterator's own directory fd
}

}  // namespace

std::optional<ProcessMetrics> ParseProcStat(std::string_view stat, double boot_time_s,
                                            double ticks_per_s, uint64_t page_bytes) {
  // The command name (field 2) is in parentheses and may hold spaces or
  // parentheses itself: the fields that follow start after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_s <= 0) return std::nullopt;
  std::vector<std::string_view> fields;  // fields[0] is field 3 (state)
  size_t i = close + 1;
  while (i < stat.size()) {
    while (i < stat.size() && (stat[i] == ' ' || stat[i] == '\n')) ++i;
    const size_t start = i;
    while (i < stat.size() && stat[i] != ' ' && stat[i] != '\n') ++i;
    if (i > start) fields.push_back(stat.substr(start, i - start));
  }
  // utime 14, stime 15, starttime 22, vsize 23, rss 24 (proc(5)).
  auto field = [&](size_t number) -> std::optional<uint64_t> {
    if (number - 3 >= fields.size()) return std::nullopt;
    const std::string_view f = fields[number - 3];
    uint64_t v = 0;
    if (std::from_chars(f.data(), f.data() + f.size(), v).ec != std::errc()) return std::nullopt;
    return v;
  };
  const auto utime = field(14), stime = field(15), start = field(22), vsize = field(23),
             rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  ProcessMetrics m;
  m.cpu_s = static_cast<double>(*utime + *stime) / ticks_per_s;
  m.start_time_s = boot_time_s + static_cast<double>(*start) / ticks_per_s;
  m.virtual_bytes = *vsize;
  m.resident_bytes = *rss * page_bytes;
  return m;
}

std::optional<ProcessMetrics> ReadProcessMetrics() {
  const std::optional<std::string> stat = ReadWhole("/proc/self/stat");
  const std::optional<double> boot = BootTime();
  if (!stat || !boot) return std::nullopt;
  std::optional<ProcessMetrics> m =
      ParseProcStat(*stat, *boot, static_cast<double>(sysconf(_SC_CLK_TCK)),
                    static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  if (!m) return std::nullopt;
  m->open_fds = OpenFds();
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) m->max_fds = limit.rlim_cur;
  return m;
}

}  // namespace isometry
