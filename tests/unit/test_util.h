// Shared helpers for tests: random shapes from a seeded generator and an
// element-by-element reference check.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/instance.h"
#include "core/status.h"

namespace isometry::testing {

// A field of this process's mapping that starts at `p` (/proc/self/smaps),
// in bytes: "Rss" (how much of it the page table maps now),
// "ShmemPmdMapped" (how much of a memfd's mapping is mapped by 2 MiB
// entries). 0 when there is no such mapping or field.
inline uint64_t MappingField(const void* p, const std::string& field) {
  std::ifstream in("/proc/self/smaps");
  bool inside = false;
  const std::string key = field + ":";
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash < 17 && line.find(' ') > dash) {
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == reinterpret_cast<uintptr_t>(p);
    } else if (inside && line.rfind(key, 0) == 0) {
      return std::stoull(line.substr(key.size())) * 1024;  // "Rss:   8192 kB"
    }
  }
  return 0;
}
inline uint64_t MappedRss(const void* p) { return MappingField(p, "Rss"); }

inline FieldSpace RandomFields(std::mt19937_64& rng, int max_fields = 8) {
  static constexpr uint32_t kSizes[] = {1, 2, 3, 4, 8, 12, 16};
  const int n = std::uniform_int_distribution<int>(1, max_fields)(rng);
  std::vector<Field> fields;
  fields.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    fields.push_back({StrCat("f", i), kSizes[rng() % std::size(kSizes)]});
  }
  return *FieldSpace::Make(std::move(fields));
}

// A random valid layout: each dimension whole or blocked (blocking factors
// that divide the extent and that do not), components in random order.
inline Layout RandomLayout(std::mt19937_64& rng, const Box& bounds) {
  using Kind = LayoutComponent::Kind;
  std::vector<LayoutComponent> comps{{Kind::kFields, 0, 0}};
  for (int d = 0; d < bounds.dims; ++d) {
    if (rng() % 3 == 0) {
      comps.push_back({Kind::kDim, d, 0});
    } else {
      const int64_t e = std::max<int64_t>(bounds.extent(d), 1);
      int64_t c = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(e + 2));
      comps.push_back({Kind::kDimIn, d, c});
      comps.push_back({Kind::kDimOut, d, 0});
    }
  }
  std::shuffle(comps.begin(), comps.end(), rng);
  return *Layout::Make(std::move(comps), bounds.dims);
}

inline Box RandomBounds(std::mt19937_64& rng, int dims, int64_t max_extent) {
  Box b;
  b.dims = dims;
  for (int d = 0; d < dims; ++d) {
    b.lo[d] = static_cast<int64_t>(rng() % 5) - 2;
    b.hi[d] = b.lo[d] + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_extent));
  }
  return b;
}

inline Box RandomSubBox(std::mt19937_64& rng, const Box& outer) {
  Box b = outer;
  for (int d = 0; d < outer.dims; ++d) {
    const int64_t e = outer.extent(d);
    const int64_t lo = outer.lo[d] + static_cast<int64_t>(rng() % static_cast<uint64_t>(e));
    b.lo[d] = lo;
    b.hi[d] = lo + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(outer.hi[d] - lo));
  }
  return b;
}

inline std::vector<std::byte> Pattern(uint64_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(&v[i], &x, std::min<uint64_t>(8, n - i));
  }
  return v;
}

template <typename F>
void ForEachPoint(const Box& box, F&& f) {
  if (box.empty()) return;
  std::array<int64_t, kMaxDims> p{};
  for (int d = 0; d < box.dims; ++d) p[d] = box.lo[d];
  while (true) {
    f(p);
    int d = 0;
    while (d < box.dims && ++p[d] == box.hi[d]) {
      p[d] = box.lo[d];
      ++d;
    }
    if (d == box.dims) return;
  }
}

// The same in row-major order (the last dimension fastest), the order of
// LayoutForm's packed stream.
template <typename F>
void ForEachPointC(const Box& box, F&& f) {
  if (box.empty()) return;
  std::array<int64_t, kMaxDims> p = box.lo;
  while (true) {
    f(p);
    int d = box.dims - 1;
    while (d >= 0 && ++p[d] == box.hi[d]) {
      p[d] = box.lo[d];
      --d;
    }
    if (d < 0) return;
  }
}

// Compares every byte of every (field, point) of `box` between the two
// instances, and checks that destination bytes outside the box still hold
// `dst_before`. Returns "" or a description of the first difference.
inline std::string CheckCopy(const InstanceShape& ss, const std::vector<std::byte>& src,
                             const InstanceShape& ds, const std::vector<std::byte>& dst,
                             const std::vector<std::byte>& dst_before, const Box& box) {
  std::vector<uint8_t> written(dst.size(), 0);
  std::string err;
  for (size_t f = 0; f < ss.fields.size() && err.empty(); ++f) {
    const uint32_t size = ss.fields.fields()[f].size;
    ForEachPoint(box, [&](const std::array<int64_t, kMaxDims>& p) {
      if (!err.empty()) return;
      const uint64_t so = ss.OffsetOf(f, p), dof = ds.OffsetOf(f, p);
      if (std::memcmp(&src[so], &dst[dof], size) != 0) {
        err =
            StrCat("field ", f, " at point (", p[0], ",", p[1], ",", p[2], ",", p[3], ") differs");
      }
      for (uint32_t b = 0; b < size; ++b) written[dof + b] = 1;
    });
  }
  for (size_t i = 0; i < dst.size() && err.empty(); ++i) {
    if (!written[i] && dst[i] != dst_before[i]) {
      err = StrCat("byte ", i, " outside the box changed");
    }
  }
  return err;
}

}  // namespace isometry::testing
