#include "core/cpu_cache.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace isometry {

namespace {

constexpr uint64_t kFallback = 32ull << 20;

// "32768K", "1M", "512" (bytes) as sysfs writes cache sizes.
uint64_t ParseSize(const std::string& text) {
  size_t used = 0;
  uint64_t n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : ' ';
  if (unit == 'K') return n << 10;
  if (unit == 'M') return n << 20;
  if (unit == 'G') return n << 30;
  return n;
}

uint64_t ReadLargestCache() {
  uint64_t largest = 0;
  for (int index = 0; index < 16; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    if (!in) break;
    std::string text;
    in >> text;
    largest = std::max(largest, ParseSize(text));
  }
  return largest > 0 ? largest : kFallback;
}

}  // namespace

uint64_t LastLevelCacheBytes() {
  static const uint64_t bytes = ReadLargestCache();
  return bytes;
}

}  // namespace isometry
