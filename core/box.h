// Index spaces: N-dimensional half-open boxes [lo, hi) with 64-bit bounds.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace isometry {

inline constexpr int kMaxDims = 4;

struct Box {
  int dims = 0;
  std::array<int64_t, kMaxDims> lo{};
  std::array<int64_t, kMaxDims> hi{};

  // A box [0, extent) in each dimension.
  static Box FromExtents(std::initializer_list<int64_t> extents);

  int64_t extent(int d) const { return hi[d] - lo[d]; }
  // Number of points; 0 for an empty box. Callers validate first, so the
  // product cannot overflow (Validate checks it).
  uint64_t volume() const;
  bool empty() const;
  bool contains(const Box& other) const;
  bool operator==(const Box&) const = default;

  // Checks 1 <= dims <= kMaxDims, lo <= hi, and that the volume fits in 2^62.
  Status Validate(std::string_view what) const;
};

std::string ToString(const Box& box);

}  // namespace isometry
