// Copies a 2-D instance from array-of-structs to struct-of-arrays layout
// through the Isometry runtime, then checks every element.
#include <cstdio>
#include <vector>

#include "config/runtime_config.h"
#include "daemon/runtime/runtime.h"

using namespace isometry;

int main() {
  auto runtime = Runtime::Create(DefaultRuntimeConfig());
  if (!runtime.ok()) {
    return std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str()), 1;
  }
  const MemoryId sys = *(*runtime)->FindMemory("sys0");

  // 512 x 256 points, fields {float x, y, z; double mass}.
  const Box space = Box::FromExtents({512, 256});
  const FieldSpace fields = *FieldSpace::Make({{"x", 4}, {"y", 4}, {"z", 4}, {"mass", 8}});
  InstanceShape aos{space, fields, Layout::Aos(2)};
  InstanceShape soa{space, fields, Layout::Soa(2)};

  std::vector<std::byte> src(aos.total_bytes()), dst(soa.total_bytes());
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = std::byte(i * 7 + 3);
  }

  auto transfer = (*runtime)->Copy(
      {.src = {sys, src.data(), src.size(), aos}, .dst = {sys, dst.data(), dst.size(), soa}});
  if (!transfer.ok()) {
    return std::fprintf(stderr, "%s\n", transfer.status().ToString().c_str()), 1;
  }
  if (Status s = transfer->Wait(); !s.ok()) {
    return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  }

  for (size_t f = 0; f < fields.size(); ++f) {
    for (int64_t i = 0; i < 512; ++i) {
      for (int64_t j = 0; j < 256; ++j) {
        for (uint32_t b = 0; b < fields.fields()[f].size; ++b) {
          if (src[aos.OffsetOf(f, {i, j}) + b] != dst[soa.OffsetOf(f, {i, j}) + b]) {
            std::fprintf(stderr, "mismatch at field %zu point (%ld, %ld)\n", f, i, j);
            return 1;
          }
        }
      }
    }
  }
  std::printf("copied %zu bytes AOS -> SOA along %s: all elements match\n", src.size(),
              transfer->path().ToString((*runtime)->topology()).c_str());
  return 0;
}
