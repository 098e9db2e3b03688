#include "daemon/runtime/calibration_store.h"

#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>
#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace isometry {

namespace {

std::string FirstLineWith(const char* file, const char* key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line;
  }
  return "";
}

}  // namespace

std::string HardwareFingerprint(const RuntimeConfig& config) {
  std::ostringstream s;
  // The method's version: figures measured by an older method (v1: cache-
  // resident Memcpy buffers; v2: no plain-copy curve, short disk writes)
  // are measured again rather than reused.
  s << "method 3|";
  s << FirstLineWith("/proc/cpuinfo", "model name") << '|' << sysconf(_SC_NPROCESSORS_ONLN) << '|'
    << FirstLineWith("/proc/meminfo", "MemTotal");
  for (const ChannelConfig& c : config.channels) {
    s << '|' << c.name << ':' << static_cast<int>(c.kind) << ':' << c.threads << ':'
      << c.max_in_flight << ':' << c.request_bytes << ':' << c.rate_limit_bytes_per_s;
  }
  // Disk channels are measured on the first DSK directory they serve: a
  // directory on another device is other hardware.
  for (const MemoryConfig& m : config.memories) {
    if (m.kind != MemoryKind::kDsk) continue;
    struct stat st {};
    const bool known = ::stat(m.directory.c_str(), &st) == 0;
    s << '|' << m.name << ':' << m.directory << ':'
      << (known ? static_cast<uint64_t>(st.st_dev) : 0);
  }
  const std::string text = s.str();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return hex;
}

Result<Calibration> LoadCalibration(const std::string& path, const std::string& fingerprint) {
  std::ifstream in(path);
  if (!in) return NotFound("no calibration at ", path);
  toml::table t;
  try {
    t = toml::parse(in, path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(path, ": ", e.description());
  }
  if (t["fingerprint"].value_or(std::string()) != fingerprint) {
    return FailedPrecondition(path, " was measured on other hardware or channel settings");
  }
  Calibration out;
  const toml::table* channels = t["channel"].as_table();
  if (!channels) return InvalidArgument(path, ": no [channel] table");
  for (const auto& [name, node] : *channels) {
    const toml::array* samples = node.as_array();
    if (!samples) return InvalidArgument(path, ": channel '", name.str(), "' is not an array");
    auto& list = out[std::string(name.str())];
    for (const toml::node& s : *samples) {
      const toml::array* pair = s.as_array();
      if (!pair || pair->size() != 2) {
        return InvalidArgument(path, ": bad sample in '", name.str(), "'");
      }
      // An integer node only: toml++ casts a float to an integer,
      // undefined out of range.
      const auto bytes = pair->get(0)->is_integer() ? pair->get(0)->value<int64_t>() : std::nullopt;
      const auto bps = pair->get(1)->value<double>();
      if (!bytes || !bps || *bytes <= 0 || *bps <= 0) {
        return InvalidArgument(path, ": bad sample in '", name.str(), "'");
      }
      list.push_back({static_cast<uint64_t>(*bytes), *bps});
    }
  }
  return out;
}

Status SaveCalibration(const std::string& path, const std::string& fingerprint,
                       const Calibration& calibration) {
  toml::table channels;
  for (const auto& [name, samples] : calibration) {
    toml::array list;
    for (const RateSample& s : samples) {
      // What LoadCalibration refuses is not written: one bad sample would
      // make the whole file unloadable.
      if (!(s.bytes_per_s > 0) || !std::isfinite(s.bytes_per_s) || s.request_bytes == 0 ||
          s.request_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        continue;
      }
      list.push_back(toml::array{static_cast<int64_t>(s.request_bytes), s.bytes_per_s});
    }
    if (!list.empty()) channels.insert(name, std::move(list));  // absent: unmeasured
  }
  toml::table root{{"fingerprint", fingerprint}, {"channel", std::move(channels)}};
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) return Internal("cannot write ", tmp);
    out << "# Isometry channel calibration: [request bytes, bytes/s] per channel\n"
        << "# (\"NAME:contiguous\": the channel's plain copies, by copy size;\n"
        << "# \"NAME:fields8\": its conversions of 8 interleaved fields, by run;\n"
        << "# \":node_copy\": every core copying at once, summed;\n"
        << "# \":node_pipe\": two copying threads pipelined through a ring).\n"
        << root << "\n";
    if (!out) return Internal("cannot write ", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Internal("cannot rename ", tmp, " to ", path);
  }
  return OkStatus();
}

}  // namespace isometry
