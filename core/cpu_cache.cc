#include "core/cpu_cache.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace isometry {

namespace {

constexpr uint64_t kFallback = 32ull << 20;

uint64_t ReadLargestCache() {
  uint64_t largest = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    std::ifstream type(dir + "/type"), size(dir + "/size");
    std::string t, sz;
    if (!(type >> t) || !(size >> sz)) continue;
    if (t == "Instruction") continue;
    largest = std::max(largest, ParseCacheSize(sz));
  }
  return largest > 0 ? largest : kFallback;
}

}  // namespace

uint64_t LastLevelCacheBytes() {
  static const uint64_t bytes = ReadLargestCache();
  return bytes;
}

uint64_t ParseCacheSize(std::string_view text) {
  uint64_t n = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (n > (uint64_t{1} << 40)) return 0;  // nonsense, not a cache
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i == 0) return 0;
  const std::string_view unit = text.substr(i);
  if (unit.empty() || unit == "\n") return n;
  switch (unit[0]) {
    case 'K':
      return n << 10;
    case 'M':
      return n << 20;
    case 'G':
      return n << 30;
    default:
      return 0;
  }
}

}  // namespace isometry
